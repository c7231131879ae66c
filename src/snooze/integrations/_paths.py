"""The reward log's path as both adapters take it: checked when the trainer is built, not at the first write.

A path that cannot be written (not a path at all, an existing folder, a folder in its way that is a
file) would otherwise fail at the first generation round's reward-log line, after the model, the
rollout workers and a round of generation were paid for. A fresh run whose path holds an earlier run's
log moves that log aside (:func:`open_log`) rather than writing over it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from snooze import IntegrationError
from snooze.logs import RewardLogHeader, RewardLogWriter

__all__ = ["log_path", "open_log"]

log = logging.getLogger(__name__)


def log_path(value: Any, name: str) -> Path:
    """``value`` as the path of a log file to write; ``IntegrationError`` naming ``name`` if it cannot be one."""
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise IntegrationError(f"{name}={value!r}: must be the path of the file to write (a string or a path)")
    path = Path(os.fsdecode(value))
    if path.is_dir():
        raise IntegrationError(
            f"{name}={value!r} is a folder; pass the path of a file in it, e.g. {path / 'rewards.jsonl'}"
        )
    blocked = next((p for p in path.parents if p.exists()), None)
    if blocked is not None and not blocked.is_dir():
        raise IntegrationError(f"{name}={value!r}: {blocked} is a file, so the log cannot be created under it")
    return path


def open_log(path: Path, resumed: bool, config: Any = None, source: str = "") -> RewardLogWriter:
    """The run's reward log: appended to on resume; on a fresh run an earlier run's non-empty log at
    ``path`` is first renamed ``<name>.earlier-N<suffix>`` (the first free N) and a warning names it (the rule of
    every log writer: :func:`snooze.logs._jsonl.move_aside`).
    ``config``: the run's :class:`~snooze.SchedulerConfig`, written as the log's header (a new log's first line);
    under its ``out_of_range="accept"`` the log takes rewards outside the range as the scheduler does."""
    header = RewardLogHeader.of_config(config, source) if config is not None else None
    out_of_range = config.out_of_range if config is not None else "raise"
    return RewardLogWriter(path, append=resumed, header=header, out_of_range=out_of_range)

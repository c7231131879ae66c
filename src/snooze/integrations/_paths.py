"""The reward log's path as both adapters take it: checked when the trainer is built, not at the first write.

A path that cannot be written (not a path at all, an existing folder, a folder in its way that is a
file) would otherwise fail at the first generation round's reward-log line, after the model, the
rollout workers and a round of generation were paid for.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from snooze import IntegrationError

__all__ = ["log_path"]


def log_path(value: Any, name: str) -> Path:
    """``value`` as the path of a log file to write; ``IntegrationError`` naming ``name`` if it cannot be one."""
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise IntegrationError(f"{name}={value!r}: must be the path of the file to write (a string or a path)")
    path = Path(os.fsdecode(value))
    if path.is_dir():
        raise IntegrationError(f"{name}={value!r} is a folder; pass the path of a file in it, e.g. {path / 'rewards.jsonl'}")
    blocked = next((p for p in path.parents if p.exists()), None)
    if blocked is not None and not blocked.is_dir():
        raise IntegrationError(f"{name}={value!r}: {blocked} is a file, so the log cannot be created under it")
    return path

"""The per-group reward log the adapters write, and that ``snooze replay`` reads.

One JSON line per generated group, in generation order::

    {"step": 3, "dataset": "gsm8k", "id": "q-17", "rewards": [1.0, 0.0, 1.0, 1.0]}

The line format and its writer live in :mod:`snooze.analysis.reward_log` (the reference trainer uses
the same writer). This module adds what a framework adapter needs on top: writing straight from
:class:`~snooze.Candidate` objects, and cutting the log back to a checkpoint on resume so a resumed
run does not log the same steps twice.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from snooze.analysis.reward_log import RewardLogWriter
from snooze.core.errors import IntegrationError
from snooze.core.types import Candidate

__all__ = ["RewardLogWriter", "write_groups", "truncate_reward_log"]


def write_groups(writer: RewardLogWriter | None, step: int, candidates: Sequence[Candidate], rewards: Any) -> None:
    """Log one generation round: ``rewards[i]`` (``[N, G]``) is the group of ``candidates[i]``."""
    if writer is None or not candidates:
        return
    writer.write(step, [c.dataset for c in candidates], [c.id for c in candidates], rewards)


def truncate_reward_log(path: str | os.PathLike[str], from_step: int) -> int:
    """Drop every line whose ``step`` is ``>= from_step`` (the steps a resumed run will redo).

    Returns how many lines were dropped. A missing file is fine (nothing logged yet). The file is
    rewritten aside and renamed into place, so a crash leaves either the old or the new log.
    """
    p = Path(path)
    if not p.exists():
        return 0
    kept: list[str] = []
    dropped = 0
    with open(p, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                step = int(json.loads(line)["step"])
            except (ValueError, KeyError, TypeError) as exc:
                raise IntegrationError(
                    f"{p}:{n}: not a reward-log line ({exc}); move the file aside or pass another reward_log path"
                ) from None
            if step >= from_step:
                dropped += 1
            else:
                kept.append(line if line.endswith("\n") else line + "\n")
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.writelines(kept)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, p)
    return dropped

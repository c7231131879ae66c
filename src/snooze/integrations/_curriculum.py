"""A curriculum (``snooze stratify``'s ``curriculum.json``) in the TRL and verl adapters.

The smallest way in: the adapter applies the curriculum to its scheduler when it builds it, calls
``update`` with each finished step's metrics (the next stage starts when its condition holds, as in
the reference trainer), and keeps its state beside the scheduler's in each checkpoint
(:data:`CURRICULUM_STATE`: the stage, the condition streaks and the sha256 of the curriculum), so a
resumed run goes on in the stage it was in. A run resumed with another curriculum, or with one when
it had none (or the reverse), is refused: the scheduler's weights and exclusions would not be the
run's. The ids are the adapter's (``snooze baseline --dataset`` names them so).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from snooze import IntegrationError, StateError, StateMismatchError
from snooze._kit.files import write_atomic
from snooze._kit.json import read_json
from snooze.curriculum import Curriculum

__all__ = ["curriculum_of", "CURRICULUM_STATE", "save_curriculum", "restore_curriculum", "curriculum_sha"]

CURRICULUM_STATE = "snooze_curriculum.json"
"""The curriculum's state in a checkpoint, beside the scheduler's folder."""


def curriculum_of(value: Any, name: str) -> Curriculum | None:
    """``value`` as a curriculum: ``None``, a :class:`~snooze.Curriculum`, or the path of a curriculum file."""
    if value is None or isinstance(value, Curriculum):
        return value
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)):
        raise IntegrationError(f"{name}={value!r}: pass a curriculum file's path (snooze stratify's) or a Curriculum")
    return Curriculum.from_file(value)


def curriculum_sha(cur: Curriculum) -> str:
    """The sha256 of the curriculum's content (what a checkpoint records, to refuse another one on resume)."""
    content = json.dumps({"drop": cur.drop, "stages": [asdict(s) for s in cur.stages]}, sort_keys=True, default=str)
    return hashlib.sha256(content.encode()).hexdigest()


def save_curriculum(cur: Curriculum | None, folder: Path) -> None:
    """Write the curriculum's state into the checkpoint ``folder`` (nothing without one)."""
    if cur is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    record = {"sha256": curriculum_sha(cur), "state": cur.state_dict()}
    write_atomic(folder / CURRICULUM_STATE, json.dumps(record).encode())


def restore_curriculum(cur: Curriculum | None, folder: Path, sched: Any) -> None:
    """Restore the curriculum's state from the checkpoint ``folder`` and apply its stage to ``sched`` (the
    restored scheduler). Raises before changing anything when the run and the checkpoint disagree."""
    path = folder / CURRICULUM_STATE
    if cur is None:
        if path.exists():
            raise StateMismatchError(
                f"{folder} was saved by a run with a curriculum ({path.name}); resume it with the same curriculum"
            )
        return
    if not path.is_file():
        raise StateMismatchError(
            f"{folder} was saved by a run without a curriculum; resume it without one, or start a new run"
        )
    record = read_json(path, StateError, "the checkpoint's curriculum state is damaged")
    if not isinstance(record, dict) or record.get("sha256") != curriculum_sha(cur):
        raise StateMismatchError(
            f"{path}: the run was saved with another curriculum; pass the curriculum file it started with"
        )
    cur.load_state_dict(record.get("state") or {})
    cur.apply(sched)

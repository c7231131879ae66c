"""Which verl checkpoint a run resumes, and whether it holds the scheduler's state: checked when the
trainer is built (on the driver, before any worker starts) and again when verl loads it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from snooze import IntegrationError, StateError

__all__ = ["resumed_folder", "check_state_folder"]


def _absolute(folder: str) -> Path:
    return Path(folder if os.path.isabs(folder) else os.path.join(os.getcwd(), folder))


def resumed_folder(config: Any) -> Path | None:
    """The ``global_step_N`` folder verl's ``_load_checkpoint`` will resume (its own rules), or ``None``."""
    trainer = config.trainer
    mode = trainer.get("resume_mode", "auto")
    if mode == "disable":
        return None
    if mode == "resume_path":
        path = trainer.get("resume_from_path")
        if not isinstance(path, str) or "global_step_" not in path:  # verl's two asserts
            raise IntegrationError(
                f"trainer.resume_from_path={path!r}: with trainer.resume_mode=resume_path it must be the path of a "
                "global_step_N folder"
            )
        return _absolute(path)
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    base = trainer.get("default_local_dir")
    found = find_latest_ckpt_path(str(_absolute(base))) if base else None
    return None if found is None else Path(found)


def check_state_folder(folder: Path) -> None:
    """``folder`` (``global_step_N/snooze``) exists, or a ``StateError`` that says what to do."""
    if not folder.parent.is_dir():
        raise StateError(
            f"{folder.parent} does not exist: there is no verl checkpoint to resume there. Check "
            "trainer.resume_from_path (or trainer.default_local_dir), or start fresh (trainer.resume_mode=disable)."
        )
    if not folder.is_dir():
        raise StateError(
            f"{folder} is missing: this verl checkpoint was not written by the snooze trainer (it saves the "
            "scheduler there before data.pt). Resume from one it wrote, or start fresh (trainer.resume_mode=disable)."
        )

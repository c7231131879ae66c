"""What the reference loop checks before it resumes a run folder, and how it brings the logs back to the checkpoint.

- :func:`check_resume`: the run is resumed with the configuration and the curriculum (or none) it was
  started with (read from the committed checkpoint's ``config.json``);
- :func:`refuse_orphan_logs`: a folder that holds logs but no committed checkpoint is refused, never
  restarted from scratch (which would delete the logs);
- :func:`reconcile_logs`: both logs are cut back to the checkpoint's step (atomically:
  :func:`snooze.logs.truncate_log`), then checked to hold exactly the steps the checkpoint committed.
- :func:`run_lock`: one process trains a run folder at a time.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from snooze._kit.checks import is_int
from snooze._kit.json import read_json
from snooze.core.config import SchedulerConfig
from snooze.core.errors import SnoozeError, StateError, StateMismatchError
from snooze.curriculum import Curriculum
from snooze.logs import METRICS_FILE, REWARDS_FILE, is_header, read_lines, read_metrics, truncate_log

__all__ = ["curriculum_key", "check_resume", "config_differences", "refuse_orphan_logs", "reconcile_logs", "run_lock"]

LOGS = (METRICS_FILE, REWARDS_FILE)
_UNCHECKED = ("checkpoint_every", "metrics")
"""TrainConfig fields a run may be resumed with another value of (they do not change what it computes)."""
_FIX = "use a new run directory (snooze compare: a new --out), or pass resume=False to train() to start over"


def curriculum_key(cur: Curriculum) -> dict[str, Any]:
    """What ``config.json`` records of a curriculum: the sha256 of its content and its stage names."""
    content = json.dumps({"drop": cur.drop, "stages": [asdict(s) for s in cur.stages]}, sort_keys=True, default=str)
    return {"sha256": hashlib.sha256(content.encode()).hexdigest(), "stages": [s.name for s in cur.stages]}


def config_differences(saved: Mapping[str, Any], now: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[str]:
    """Each field whose saved value differs from this run's, as ``"train.grpo.lr: saved 0.001, now 0.01"``.

    A field the saved configuration lacks (added to snooze after the run started) counts as saved with
    its default, so a run is resumed after an upgrade when it uses the new fields' defaults, which keep
    the old behaviour. ``curriculum`` and the train fields in ``_UNCHECKED`` are not compared here."""
    skip = {"curriculum", *(f"train.{name}" for name in _UNCHECKED)}
    return list(_differ(saved, now, defaults, "", skip))


_NONE = object()


def _differ(was: Any, new: Any, default: Any, path: str, skip: set[str]) -> Iterator[str]:
    if isinstance(was, Mapping) and isinstance(new, Mapping):
        default = default if isinstance(default, Mapping) else {}
        for name in sorted(set(was) | set(new), key=str):
            where = f"{path}.{name}" if path else str(name)
            if where not in skip:
                yield from _differ(
                    was.get(name, default.get(name, _NONE)), new.get(name, _NONE), default.get(name), where, skip
                )
    elif was != new or isinstance(was, bool) != isinstance(new, bool):  # (true == 1 in Python: saved true is not 1)
        show = ["(none)" if v is _NONE else repr(v) for v in (was, new)]
        yield f"{path}: saved {show[0]}, now {show[1]}"


def _migrated(saved: dict[str, Any]) -> dict[str, Any]:
    """``saved`` with its scheduler section as this snooze writes it (an earlier release's flat policy
    options moved into ``options``, once: SchedulerConfig.from_dict); a section that does not load is
    compared as it is (each damaged field then differs)."""
    section = saved.get("scheduler")
    if not isinstance(section, Mapping):
        return saved
    try:
        now = SchedulerConfig.from_dict(section).to_dict()
    except SnoozeError:
        return saved
    return {**saved, "scheduler": json.loads(json.dumps(now, default=str))}


def check_resume(
    folder: Path, run_dir: Path, config: Mapping[str, Any], curriculum_file: str, defaults: Mapping[str, Any]
) -> None:
    """Refuse to resume with another configuration, or another curriculum (or none), than the run's.
    ``folder``: the committed step folder (its ``config.json``; a 0.1.0 checkpoint: the run folder's).
    ``defaults``: each section's field defaults (see :func:`config_differences`)."""
    path = folder / "config.json" if (folder / "config.json").exists() else run_dir / "config.json"
    exists = path.exists() or path.is_symlink()
    saved = read_json(path, StateError, f"it is not a readable run configuration; {_FIX}") if exists else None
    now = config.get("curriculum")
    had = (folder / curriculum_file).exists()
    then = saved.get("curriculum") if isinstance(saved, dict) else None
    if had and now is None:
        raise StateMismatchError(
            f"{run_dir}: the run was started with a curriculum (stages {(then or {}).get('stages')}) and is resumed "
            f"without one; pass the same curriculum (train(..., curriculum=Curriculum.from_file(...)), "
            f"snooze compare --curriculum FILE), {_FIX}"
        )
    if now is not None and not had:
        raise StateMismatchError(
            f"{run_dir}: the run was started without a curriculum and is resumed with one; resume it without, {_FIX}"
        )
    if saved is not None and then != now:
        raise StateMismatchError(
            f"{run_dir}: the run was started with another curriculum (sha256 {(then or {}).get('sha256', '?')[:12]}, "
            f"now {(now or {}).get('sha256', '?')[:12]}); pass the curriculum file it started with, {_FIX}"
        )
    if saved is not None and not isinstance(saved, dict):
        raise StateError(f"{path}: not a run configuration (a JSON object); {_FIX}")
    differ = config_differences(_migrated(saved), config, defaults) if saved is not None else []
    if differ:
        shown = "; ".join(differ[:5]) + (f"; and {len(differ) - 5} more" if len(differ) > 5 else "")
        raise StateMismatchError(
            f"{run_dir}: the checkpoint was written with another configuration ({shown}; see {path}); {_FIX}"
        )


def refuse_orphan_logs(run_dir: Path, checkpoint: Path) -> None:
    """Raise :class:`StateError` when ``run_dir`` holds a log with lines but no committed checkpoint."""
    found = [name for name in LOGS if (run_dir / name).is_file() and (run_dir / name).stat().st_size > 0]
    if not found:
        return
    old = checkpoint.with_name(checkpoint.name + ".old")
    hint = (
        f" {old} looks like the previous checkpoint of snooze 0.1.0, left by a save that was killed: rename it to "
        f"{checkpoint.name} to resume from it."
        if (old / "trainer.json").is_file()
        else ""
    )
    raise StateError(
        f"{run_dir}: holds {' and '.join(found)} of a run but no committed checkpoint ({checkpoint}), so the run "
        f"cannot be resumed and is not restarted over its logs.{hint} To start over, move the logs aside (or "
        f"delete them), train into a new folder, or pass resume=False (snooze compare: a new --out)."
    )


def reconcile_logs(run_dir: Path, step: int, generated: int | None = None, groups: int | None = None) -> None:
    """Cut both logs back to the checkpoint (drop the lines of steps ``>= step``), then check that the
    metrics log holds steps ``0 .. step-1`` once each and the reward log one line per generated group.

    With batches generated ahead of training (``TrainConfig.staleness``): ``generated``, the batches
    built (the reward log is cut back to it instead), and ``groups``, the groups generated in all
    (instead of the last metrics line's ``total/gen_groups``)."""
    truncate_log(run_dir / METRICS_FILE, step)
    truncate_log(run_dir / REWARDS_FILE, step if generated is None else generated)
    metrics = run_dir / METRICS_FILE
    lines = read_metrics(metrics) if metrics.exists() else []  # checked: one line per step, numbers
    steps = [x.get("step") for x in lines]
    fix = f"restore the logs of {run_dir} from a backup, or start the run over ({_FIX})"
    if steps != list(range(step)):
        have = f"steps {steps[0]}..{steps[-1]} ({len(steps)} lines)" if steps else "no steps"
        raise StateError(
            f"{metrics}: holds {have}, but the checkpoint committed steps 0..{step - 1}; the log is incomplete; {fix}"
        )
    if groups is None:  # the reward log holds whole groups: a screen that stopped (partial groups) is not in it
        last = lines[-1] if lines else {"total/gen_groups": 0}
        groups = last.get("total/gen_groups")
        stopped = last.get("total/screen_stopped", 0)
        if is_int(groups) and is_int(stopped):
            groups -= stopped
    rewards = run_dir / REWARDS_FILE
    logged = sum(1 for _, obj in read_lines(rewards) if not is_header(obj)) if rewards.exists() else 0
    if groups is not None and (not is_int(groups) or logged != groups):  # (5.5 or true skipped the check)
        raise StateError(
            f"{rewards}: holds {logged} groups, but the {step} committed steps generated {groups} "
            f"(total/gen_groups less total/screen_stopped of {METRICS_FILE}); the log is incomplete; {fix}"
        )


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``run_dir/.lock`` while training; another process holding it is a
    :class:`StateError` (two trainers in one folder would interleave their logs and checkpoints)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - platforms without flock
        yield
        return
    path = run_dir / ".lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateError(
                f"{run_dir}: another process is training this run (it holds {path}); wait for it to end or stop it, "
                "then run the same command again"
            ) from None
        yield
    finally:
        os.close(fd)

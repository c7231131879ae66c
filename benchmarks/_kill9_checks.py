"""The checks of ``kill9_trainer.py``: what a rerun will keep after a kill, and a finished run's logs
and summary against the uninterrupted run's (timing fields aside)."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

TIME_KEYS = frozenset({"time/step_s", "time/elapsed_s", "wall_seconds", "seconds"})
"""Fields that differ between any two runs (wall times): left out of every comparison."""


def _arms(out: Path) -> list[Path]:
    return sorted(p.parent for p in out.glob("*/seed*/config.json"))


def _metrics(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for raw in path.read_text().splitlines():
        try:
            rows.append({k: v for k, v in json.loads(raw).items() if k not in TIME_KEYS})
        except ValueError:
            continue  # a torn last line (the rerun drops it)
    return rows


def _untimed(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _untimed(v) for k, v in obj.items() if k not in TIME_KEYS}
    return [_untimed(v) for v in obj] if isinstance(obj, list) else obj


def _committed_step(run_dir: Path) -> int | None:
    from snooze.trainer.checkpoint import committed

    folder = committed(run_dir / "checkpoint")
    return None if folder is None else int(json.loads((folder / "trainer.json").read_text())["step"])


def crash_check(out: Path, ref: Path) -> dict[str, int]:
    """What a rerun will keep, arm by arm: logs only with a committed checkpoint, and the committed
    steps' lines equal to the reference's. ``lost``: committed lines missing; ``mismatched``: differing."""
    got = collections.Counter()
    for run_dir in _arms(out):
        rel = run_dir.relative_to(out)
        step = _committed_step(run_dir)
        metrics, rewards = _metrics(run_dir / "metrics.jsonl"), _reward_lines(run_dir / "rewards.jsonl")
        if step is None:
            got["orphan_logs"] += int(bool(metrics or rewards))
            continue
        want_m = [x for x in _metrics(ref / rel / "metrics.jsonl") if x["step"] < step]
        want_r = [x for x in _reward_lines(ref / rel / "rewards.jsonl") if json.loads(x).get("step", -1) < step]
        have_m = [x for x in metrics if x["step"] < step]
        have_r = [x for x in rewards if json.loads(x).get("step", -1) < step]  # the header (no step) counts too
        got["lost"] += max(0, len(want_m) - len(have_m)) + max(0, len(want_r) - len(have_r))
        got["mismatched"] += int(have_m != want_m[: len(have_m)] or have_r != want_r[: len(have_r)])
    return got


def _reward_lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    lines = path.read_text().split("\n")
    return [x for x in lines[:-1] if x]  # the part after the last newline is a torn line (or empty)


def final_check(out: Path, ref: Path) -> dict[str, int]:
    """Every arm's logs and the summary against the reference."""
    got = collections.Counter()
    ref_arms = [p.relative_to(ref) for p in _arms(ref)]
    got["arms_missing"] = len(set(ref_arms) - {p.relative_to(out) for p in _arms(out)})
    for rel in ref_arms:
        a, b = _metrics(ref / rel / "metrics.jsonl"), _metrics(out / rel / "metrics.jsonl")
        ra, rb = (
            p.read_bytes() if p.exists() else b"" for p in (ref / rel / "rewards.jsonl", out / rel / "rewards.jsonl")
        )
        got["arms_compared"] += 1
        got["metrics_lines"] += len(b)
        got["reward_lines"] += rb.count(b"\n")
        got["arms_differing"] += int(a != b or ra != rb)
    summaries = [
        _untimed(json.loads((d / "summary.json").read_text())) if (d / "summary.json").exists() else None
        for d in (ref, out)
    ]
    got["summary_differs"] = int(summaries[0] != summaries[1])
    return got

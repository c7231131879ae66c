"""``benchmarks/same_metrics.py``: the refactor check finds a changed value, a lost key and a missing run, passes
identical folders whatever their wall-clock times, and lists a new key without calling it a difference."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "same_metrics.py"


def _run(folder: Path, lines: dict[str, list[dict]]) -> Path:
    for arm, metrics in lines.items():
        path = folder / arm / "seed0" / "metrics.jsonl"
        path.parent.mkdir(parents=True)
        path.write_text("".join(json.dumps(m) + "\n" for m in metrics))
    return folder


def _check(before: Path, after: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(before), str(after)], capture_output=True, text=True)


def test_same_metrics_tells_a_changed_run_from_an_unchanged_one(tmp_path: Path) -> None:
    base = [{"step": 0, "gen/groups": 8, "time/step_s": 0.1}, {"step": 1, "gen/groups": 16, "time/step_s": 0.2}]
    before = _run(tmp_path / "before", {"dapo": base, "snooze": base})
    slower = [{**m, "time/step_s": 9.0, "gen/tokens": 3} for m in base]  # other times, one new key
    same = _check(before, _run(tmp_path / "same", {"dapo": slower, "snooze": slower}))
    assert same.returncode == 0, same.stdout
    assert "2 metrics files: identical" in same.stdout and "new keys (not compared): gen/tokens" in same.stdout

    changed = [base[0], {**base[1], "gen/groups": 16.0}]  # 16 -> 16.0: the same number, not the same bits
    lost = [{k: v for k, v in m.items() if k != "gen/groups"} for m in base]
    out = _check(before, _run(tmp_path / "changed", {"dapo": changed, "snooze": lost}))
    assert out.returncode == 1
    assert "dapo/seed0/metrics.jsonl, line 2: lost [], differ [('gen/groups', '16', '16.0')]" in out.stdout
    assert "snooze/seed0/metrics.jsonl, line 1: lost ['gen/groups']" in out.stdout

    missing = _check(before, _run(tmp_path / "missing", {"dapo": base}))
    assert missing.returncode == 1 and "snooze/seed0/metrics.jsonl: only in one folder" in missing.stdout

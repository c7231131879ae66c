"""Issue 6.2: 100 SIGKILLs at random moments (many inside a save) lose or replay nothing.

Runs ``benchmarks/kill9.py`` (forked workers, so 100 kills take ~20 s on 2 cores), and shows the
harness is not blind: workers broken on purpose (one keeps log lines of uncommitted steps, one
writes a step's log line after committing it) are caught.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "kill9.py"


def _run(*args: str) -> tuple[int, dict[str, int]]:
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr[-2000:]
    return proc.returncode, json.loads(lines[-1])


@pytest.mark.slow
def test_100_kills_lose_and_replay_nothing() -> None:
    code, out = _run("--kills", "100", "--seed", "1")
    assert out["kills"] == 100 and out["resumes"] == 100
    assert out["missing"] == 0 and out["duplicated"] == 0 and out["unexpected"] == 0
    assert out["state_equal"] == 1
    assert out["kills_inside_save"] >= 5  # random kills do land inside saves
    assert out["kills_targeted"] >= 30  # and every third is aimed at a point inside the commit protocol
    assert out["crash_missing"] == 0 and out["crash_mismatched"] == 0
    assert code == 0


def test_harness_catches_a_worker_that_replays_uncommitted_steps() -> None:
    code, out = _run("--kills", "12", "--seed", "2", "--sabotage", "skip-recovery")
    assert out["duplicated"] > 0  # the targeted kill after a log line, before its commit, is replayed
    assert code == 1


def test_harness_catches_a_worker_that_logs_after_committing() -> None:
    code, out = _run("--kills", "12", "--seed", "2", "--sabotage", "log-after-save")  # kill 9 is aimed after the commit
    assert out["crash_missing"] > 0 and out["missing"] > 0  # killed between commit and log line: lost
    assert code == 1

"""``benchmarks/scale.py`` runs end to end on a small table and prints the figures it promises.

Timings are not asserted (shared machines are noisy; the script prints ratios measured side by side).
What is asserted is what does not depend on the machine: the JSON keys, the state size per prompt
and that both implementations ran the same number of steps' worth of candidates.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "scale.py"
KEYS = {
    "prompts",
    "bytes_per_prompt",
    "ms_per_1k_candidates",
    "save_s",
    "load_s",
    "dict_bytes_per_prompt",
    "dict_ms_per_1k_candidates",
}


@pytest.mark.parametrize(("mix", "skip"), [("quota", "counter"), ("stream", "counter"), ("quota", "history")])
def test_scale_benchmark_prints_its_figures(mix, skip):
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--prompts",
            "30000",
            "--dict-prompts",
            "30000",
            "--steps",
            "5",
            "--mix",
            mix,
            "--skip",
            skip,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert KEYS <= set(out) and out["prompts"] == 30000 and out["mix"] == mix
    assert KEYS <= set(out) and out["skip"] == skip
    low = 6.0 if skip == "counter" else 7.0  # counter int32 + flags + streak (+ the history byte), plus the header
    assert low <= out["bytes_per_prompt"] <= 16
    assert out["dict_bytes_per_prompt"] > out["bytes_per_prompt"]
    assert out["ms_per_1k_candidates"] > 0 and out["dict_ms_per_1k_candidates"] > 0


def test_scale_benchmark_measures_predictive_beside_the_seed_rule():
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--prompts",
            "20000",
            "--dict-prompts",
            "5000",
            "--steps",
            "3",
            "--policy",
            "predictive",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["policy"] == "predictive" and KEYS <= set(out)
    assert 11.0 <= out["bytes_per_prompt"] <= 16  # the base 6 bytes + code (1) + looked (4), plus the header
    assert out["seed_bytes_per_prompt"] < out["bytes_per_prompt"]
    assert out["predictive_over_seed_bytes_per_prompt"] == pytest.approx(
        out["bytes_per_prompt"] / out["seed_bytes_per_prompt"], rel=1e-3
    )

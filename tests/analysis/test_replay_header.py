"""``snooze replay`` reads the run from the log's header: its sizes (a contradicting option is refused unless
``--override-header``), whether the run was a DAPO run; without a header it says loudly what it assumes.
And the headline: the groups each policy would have generated, worked out by hand, with its interval."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from snooze.analysis.estimate import headline
from snooze.cli.main import main
from snooze.logs import RewardLogHeader, RewardLogWriter

G = 2
EASY, SIGNAL = [1.0, 1.0], [1.0, 0.0]


def _write(path: Path, header: RewardLogHeader | None, steps: int = 6) -> Path:
    """Each step: 4 groups in one round of 4 (prompt p0 easy every time, p1..p3 with signal)."""
    with RewardLogWriter(path, header=header) as log:
        for step in range(steps):
            log.write(step, ["d"] * 4, [f"p{i}" if i == 0 else f"p{i}-{step}" for i in range(4)], [EASY] + [SIGNAL] * 3)
    return path


def _header(policy: str = "dynamic_sampling", **kw: object) -> RewardLogHeader:
    dapo = policy != "grpo"
    base = dict(group_size=G, batch_size=2, gen_batch_size=4, max_gen_rounds=3, policy=policy, dynamic_sampling=dapo)
    return RewardLogHeader(**{**base, "source": "test", **kw})  # type: ignore[arg-type]


def _replay(log: Path, out: Path, *extra: str) -> int:
    return main(["replay", str(log), "--out", str(out), "--factors", "1", "--no-plot", *extra])


def test_the_sizes_come_from_the_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _write(tmp_path / "r.jsonl", _header())
    assert _replay(log, tmp_path / "o") == 0
    out, err = capsys.readouterr()
    assert "run (from the header, written by test): policy dynamic_sampling, dynamic sampling yes" in out
    assert "batch_size 2, gen_batch_size 4, max_gen_rounds 3" in out and "WARNING" not in err
    info = json.loads((tmp_path / "o" / "replay.json").read_text())["log"]
    assert info["step_loop"] == {"batch_size": 2, "gen_batch_size": 4, "max_gen_rounds": 3} and not info["assumed"]


def test_a_size_against_the_header_is_refused_unless_overridden(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _write(tmp_path / "r.jsonl", _header())
    assert _replay(log, tmp_path / "o", "--batch-size", "4") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--batch-size 4 (the header: 2) contradicts the log's header" in err
    assert "--override-header" in err and not (tmp_path / "o").exists()
    assert _replay(log, tmp_path / "o", "--batch-size", "4", "--override-header") == 0
    out, err = capsys.readouterr()
    assert "batch_size 4, gen_batch_size 4" in out and "WARNING: --override-header: batch_size: 2 in the header" in err
    assert _replay(log, tmp_path / "o2", "--batch-size", "2") == 0  # the header's own value is no contradiction
    assert _replay(log, tmp_path / "o3", "--reward-range=-1,1") == 2
    assert "--reward-range (-1.0, 1.0) contradicts the log's header" in capsys.readouterr().err


def test_a_log_without_header_says_loudly_what_it_assumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _write(tmp_path / "r.jsonl", None)
    assert _replay(log, tmp_path / "o") == 0
    out, err = capsys.readouterr()
    assert "run (ASSUMED: the log has no header): a DAPO run (dynamic sampling)" in out
    assert "no header: taken to be a DAPO run (dynamic sampling) that logged every generated group" in err
    assert "gen_batch_size 4: the gcd of the groups logged per step" in err and "ASSUMES" in err


def test_a_grpo_log_has_no_step_sim_and_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _write(tmp_path / "r.jsonl", _header("grpo", batch_size=4, max_gen_rounds=1))
    assert _replay(log, tmp_path / "o") == 0
    out, err = capsys.readouterr()
    assert "step sim: n/a: the logged run had no dynamic sampling (policy grpo)" in out
    assert "without dynamic sampling: the comparison with DAPO does not apply" in err
    row = next(line for line in out.splitlines() if line.startswith("snooze:1") and "%" in line and "n/a" in line)
    assert "0.0%" not in row.split()[-2]  # the step-sim cell of the details says n/a, never 0.0%
    info = json.loads((tmp_path / "o" / "replay.json").read_text())
    assert info["log"]["step_sim_na"] and "simulated" not in info["policies"]["snooze:1"]


def test_the_headline_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # snooze:1 on p0 (easy at every encounter): rolled, skipped, rolled, skipped, ... -> 3 of 6 skipped, none with
    # signal. N = 24, K = 3, S = 18, M = 0: groups = 21, saved 12.5%, risk 0. filter: 5 skipped, groups 19.
    log = _write(tmp_path / "r.jsonl", _header())
    assert _replay(log, tmp_path / "o") == 0
    pols = json.loads((tmp_path / "o" / "replay.json").read_text())["policies"]
    h = pols["snooze:1"]["headline"]
    assert (h["log_groups"], h["groups"], h["skipped_groups"], h["risk"]) == (24, 21.0, 3, 0.0)
    assert h["saved_frac"] == pytest.approx(3 / 24) and pols["filter"]["headline"]["groups"] == 19.0
    assert (h["log_rollouts"], h["rollouts"], h["skipped_rollouts"]) == (24 * G, 21.0 * G, 3 * G)  # G rewards a line
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("snooze:1"))
    assert line.split()[:2] == ["snooze:1", "42"] and "12.5%" in line  # rollouts first: 21 groups of 2
    assert "unknown" in line and "6 (3)" in line  # tokens unknown (no line gives them); skipped rollouts (groups)


def test_the_interval_resamples_prompts() -> None:
    # 200 prompts of 4 encounters; a prompt's skipped encounters had signal with chance 0.3
    rng = np.random.default_rng(1)
    prompt = np.repeat(np.arange(200), 4)
    signal = rng.uniform(size=800) < 0.5
    skipped = rng.uniform(size=800) < 0.25
    out = headline(prompt, signal, {"p": skipped}, resamples=400, seed=3)["p"]
    n, k, s, m = 800, skipped.sum(), signal.sum(), (skipped & signal).sum()
    assert out["groups"] == pytest.approx((n - k) * s / (s - m))
    lo, hi = out["groups_interval"]
    assert lo < out["groups"] < hi and hi - lo < 0.2 * n
    assert out == headline(prompt, signal, {"p": skipped}, resamples=400, seed=3)["p"]  # seeded: the same again
    same = headline(np.zeros(8, dtype=np.int64), signal[:8], {"p": skipped[:8]}, resamples=50)["p"]
    assert same["groups_interval"][0] == same["groups_interval"][1]  # one prompt: every resample is the log
    none = headline(prompt, signal, {"p": np.zeros(800, dtype=bool)}, resamples=20)["p"]
    assert none["groups"] == 800 and none["risk"] is None

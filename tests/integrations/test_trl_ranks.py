"""``SnoozeGRPOTrainer`` on 2 CPU processes: the real TRL ``GRPOTrainer`` under torchrun (gloo).

One torchrun launch runs every scenario of ``trl_ranks_job.py`` (fresh run, resume, padded rounds,
three kinds of divergence, a state one process cannot read); one plain launch runs the fresh and
padded scenarios on one process. The tests read what each rank wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="needs the [trl] extra")
pytest.importorskip("torch")

from integrations import _trl_tiny as tiny  # noqa: E402

# Every launch resumes a 2-process run on CPU: transformers before 5.18 restores the optimizer to device "cpu:0",
# which torch refuses (a transformers bug on CPU only; on GPUs the device is "cuda:N")
pytestmark = [
    pytest.mark.trl,
    pytest.mark.slow,
    tiny.since("transformers", "5.18.0", "resuming a 2-process run on CPU"),
]

JOB = Path(__file__).with_name("trl_ranks_job.py")
TWO = ["full", "resume", "padded", "seed", "excluded", "flipped", "damaged"]
ONE = ["full", "padded"]
EASY = {"e0", "e1"}


def _launch(out: Path, world: int, scenarios: list[str]) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    if world == 1:
        cmd = [sys.executable, str(JOB), str(out), *scenarios]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world}"]
        cmd += [str(JOB), str(out), *scenarios]
    out.mkdir(parents=True)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("trl_ranks")
    _launch(root / "two", 2, TWO)
    _launch(root / "one", 1, ONE)
    return root


def _ranks(root: Path, name: str, world: int = 2) -> list[dict[str, Any]]:
    return [
        json.loads((root / ("two" if world == 2 else "one") / name / f"rank{r}.json").read_text()) for r in range(world)
    ]


def _log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()][1:]  # after the header


@pytest.mark.parametrize("name, steps", [("full", [0, 1, 2, 3]), ("resume", [2, 3]), ("padded", [0, 1, 2])])
def test_every_rank_has_the_same_scheduler_after_every_step(runs: Path, name: str, steps: list[int]) -> None:
    r0, r1 = _ranks(runs, name)
    assert "error" not in r0 and "error" not in r1
    assert [s["step"] for s in r0["steps"]] == steps == [s["step"] for s in r1["steps"]]
    assert [s["digest"] for s in r0["steps"]] == [s["digest"] for s in r1["steps"]]
    assert [s["digest"][0] for s in r0["steps"]] == [s + 1 for s in steps]  # the digest is taken after each step


def test_easy_prompts_are_skipped_before_generation_on_every_rank(runs: Path) -> None:
    ranks = _ranks(runs, "full")
    assert ranks[0]["steps"][-1]["totals"]["total/skipped"] > 0
    lines = _log(runs / "two" / "full" / "rewards.uninterrupted.jsonl")
    for e in EASY:
        assert [x["rewards"] for x in lines if x["id"] == e] == [[1.0] * 4]  # generated once, then asleep
        # no rank scored it at any other step: the skip happened before generation, on every rank
        steps_scored = {step for r in ranks for step, i in r["scored"] if i == e}
        assert steps_scored == {next(x["step"] for x in lines if x["id"] == e)}
    # the reward log was written once, by the main process: one line per generated group
    assert len(lines) == ranks[0]["steps"][-1]["totals"]["total/gen_groups"]


@pytest.mark.parametrize("name, G", [("full", 4), ("padded", 3)])
def test_every_trained_group_carried_signal_and_ranks_train_on_equal_rows(runs: Path, name: str, G: int) -> None:
    r0, r1 = _ranks(runs, name)
    for s in r0["steps"]:
        assert s["signal"] and s["min_std"] > 0 and not EASY & set(s["ids"]) and "h0" not in s["ids"]
    for s, h0, h1 in zip(r0["steps"], r0["handed"], r1["handed"]):
        assert h0["rows"] == h1["rows"]  # one row count on every rank (collectives, ZeRO-3)
        assert h0["live"] + h1["live"] == G * len(s["ids"])  # every kept row trained once, on one rank
        assert h0["live_zero_adv"] == h1["live_zero_adv"] == 0  # and carries an advantage
        assert h0["num_items"] == h1["num_items"] == h0["local_tokens"] + h1["local_tokens"]  # gathered normaliser
    logged = r0["logged"]
    assert [h["snooze/dist/rows_per_rank"] for h in logged] == [h["rows"] for h in r0["handed"]]
    if name == "full":  # 3 groups of 4 rows on 2 ranks: the middle group spans both, no padding
        assert all(h["snooze/dist/pad_groups"] == 0 for h in logged)
        assert any(0 < h["live"] % G for h in r0["handed"])
    else:  # 3 groups of 3 rows: one inert group pads each round to 6 rows a rank
        assert all(h["snooze/dist/pad_groups"] == h["snooze/gen/rounds"] for h in logged)


def test_snooze_metrics_are_logged_and_every_parameter_learned_alike(runs: Path) -> None:
    r0, r1 = _ranks(runs, "full")
    assert len(r0["logged"]) == 4
    for h in r0["logged"]:
        assert h["snooze/gen/rounds"] >= 1 and "snooze/efficiency" in h and "snooze/dist/inert_rows" in h
    assert r0["params_after"] != r0["params_before"]  # trained (the single-process test checks every parameter)
    assert r0["params_after"] == r1["params_after"]  # DDP kept the replicas equal


def test_resuming_continues_with_the_same_scheduler_totals(runs: Path) -> None:
    full, resumed = _ranks(runs, "full")[0], _ranks(runs, "resume")
    by_step = {s["step"]: s for s in full["steps"]}
    for r in resumed:
        for s in r["steps"]:
            assert s["totals"] == by_step[s["step"]]["totals"]
            assert s["digest"] == by_step[s["step"]]["digest"]
            assert s["ids"] == by_step[s["step"]]["ids"]
    # the reward log, cut back to step 2 and appended to by the main process, equals the uninterrupted one
    assert _log(runs / "two" / "full" / "rewards.jsonl") == _log(runs / "two" / "full" / "rewards.uninterrupted.jsonl")


@pytest.mark.parametrize("name", ONE)
def test_one_and_two_processes_make_the_same_decisions(runs: Path, name: str) -> None:
    (one,), (two, _) = _ranks(runs, name, world=1), _ranks(runs, name)
    log_two = runs / "two" / name / ("rewards.uninterrupted.jsonl" if name == "full" else "rewards.jsonl")
    key = [(x["step"], x["dataset"], x["id"], x["rewards"]) for x in _log(log_two)]
    assert key == [
        (x["step"], x["dataset"], x["id"], x["rewards"]) for x in _log(runs / "one" / name / "rewards.jsonl")
    ]
    assert [s["digest"] for s in one["steps"]] == [s["digest"] for s in two["steps"]]
    assert [s["ids"] for s in one["steps"]] == [s["ids"] for s in two["steps"]]


@pytest.mark.parametrize(
    "name, where, field",
    [
        ("seed", "start:", "seed: rank 0 0 vs rank 1 1"),  # refused when the trainer is built
        ("excluded", "step 1, round 1:", "keys:"),  # the main process alone changed its scheduler after step 0
        ("flipped", "after step 1:", "reports:"),  # rank 1 reported other rewards in step 1
    ],
)
def test_diverging_ranks_raise_naming_the_step(runs: Path, name: str, where: str, field: str) -> None:
    for r in _ranks(runs, name):
        assert r["error"].startswith(where) and field in r["error"], r["error"]
        assert "same Scheduler" in r["error"]
        assert [s["step"] for s in r.get("steps", [])] == ([] if name == "seed" else [0])  # stopped, no hang


def test_a_state_one_process_cannot_read_stops_every_process_and_keeps_the_log(runs: Path) -> None:
    """Rank 1 alone cannot read checkpoint-2's scheduler state (its node's copy, say, is damaged). Every
    rank raises an IntegrationError that says so (rank 1's carries its StateError), before any step, and
    the reward log is not cut back (it was: the main process cut it before the others had failed; and
    rank 0 saw only gloo's "Connection closed by peer")."""
    ranks = _ranks(runs, "damaged")
    for r in ranks:
        assert (
            "state_loaded: rank 0 1 vs rank 1 0" in r["error"] and "could not read it and logged why" in r["error"]
        ), r["error"]
        assert r["steps"] == []
    assert ranks[1]["cause"].startswith("StateError(") and "simulated damage" in ranks[1]["cause"]
    before, after = ranks[0]["log_lines"]
    assert before == after > 0


def test_tensor_parallelism_is_refused_saying_what_to_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import snooze
    from integrations.trl_ranks_job import build

    trainer, _, _ = build(tmp_path, G=4, max_steps=1)

    class TwoWayTensorParallel:
        tp_size = 2

    monkeypatch.setattr(type(trainer.accelerator), "parallelism_config", property(lambda self: TwoWayTensorParallel()))
    with pytest.raises(
        snooze.IntegrationError, match=r"tp_size=2: .*Train data-parallel only .*vllm_tensor_parallel_size"
    ):
        trainer._check_compatible()

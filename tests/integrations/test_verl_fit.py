"""verl 0.9.1's own ``fit()`` end to end on CPU: plain verl with DAPO filtering, the snooze trainer, and a
resume of the snooze run that continues exactly.

verl's: the trainer and its ``fit()`` loop, ``RLHFDataset`` with ``data.filter_overlong_prompts=True``
(it drops one of the seven rows), the agent-loop workers (``AgentLoopWorkerTQ``: chat template, tokenising,
the generate calls), the reward loop workers running a custom reward function, TransferQueue, the replay
buffer (DAPO's or the snooze subclass), GRPO advantages, the policy loss, the checkpoint manager's weight
sync, ``_save_checkpoint`` / ``_load_checkpoint``, validation and the file logger. Ours (``_verl_cpu``):
the actor worker group (a tiny model trained with verl's policy loss) and the rollout server (the same
model sampling). Each run is a process of its own (``_verl_fit``); the two first ones run side by side.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("verl", reason="needs the [verl] extra")
pytest.importorskip("transfer_queue", reason="needs the [verl] extra")
pytest.importorskip("ray", reason="needs the [verl] extra")

from integrations._verl_fit import LONG, ROWS, SAVE_FREQ, STEPS  # noqa: E402

pytestmark = [pytest.mark.verl, pytest.mark.slow, pytest.mark.timeout(900)]

TESTS = Path(__file__).resolve().parents[1]
EASY = [(ds, i) for ds, i, truth in ROWS if truth == "easy"]


def _spawn(argv: list[str], folder: Path, **extra: str) -> subprocess.Popen:
    """``python -m ARGV`` (a run's child module and its arguments) with its output in ``folder/run.log``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]), **extra)
    env["OMP_NUM_THREADS"] = "1"
    env.pop("RAY_ADDRESS", None)  # each run starts a Ray node of its own
    with open(folder / "run.log", "wb") as out:  # the child holds its own copy of the file
        return subprocess.Popen(
            [sys.executable, "-m", *argv],
            stdout=out,
            stderr=out,
            env=env,
            start_new_session=True,  # its Ray node's processes are in its process group: _stop ends them together
        )


def _start(mode: str, folder: Path, **extra: str) -> subprocess.Popen:
    return _spawn(["integrations._verl_fit", mode, str(folder)], folder, **extra)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _wait(proc: subprocess.Popen, folder: Path, timeout: float = 420) -> None:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc)
    if proc.returncode != 0 or not (folder / "summary.json").exists():
        tail = (folder / "run.log").read_text(errors="replace")[-6000:]
        pytest.fail(f"verl's fit() in {folder.name} exited with {proc.returncode}:\n{tail}")


def _resume_folder(done: Path, folder: Path, step: int = SAVE_FREQ) -> None:
    """``done``'s checkpoints as a run that crashed after its last step, with ``step`` as its latest checkpoint
    (here: after logging step 4, before its checkpoint; verl's ``resume_mode=auto`` resumes ``global_step_2`` and
    the reward log still holds steps 3 and 4)."""
    shutil.copytree(done / "ckpt", folder / "ckpt")
    for later in range(step + 1, STEPS + 1):
        shutil.rmtree(folder / "ckpt" / f"global_step_{later}", ignore_errors=True)  # (every SAVE_FREQ steps here)
    (folder / "ckpt" / "latest_checkpointed_iteration.txt").write_text(str(step))
    for name in ("train.parquet", "model"):
        (shutil.copytree if (done / name).is_dir() else shutil.copy)(done / name, folder / name)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three runs' folders: plain verl and snooze side by side, then the snooze run resumed."""
    root = tmp_path_factory.mktemp("fit")
    folders = {name: root / name for name in ("sync", "snooze", "resumed")}
    for folder in folders.values():
        folder.mkdir()
    procs = {mode: _start(mode, folders[mode]) for mode in ("sync", "snooze")}
    try:
        for mode, proc in procs.items():
            _wait(proc, folders[mode])
        _resume_folder(folders["snooze"], folders["resumed"])
        procs["resumed"] = _start("snooze", folders["resumed"])
        _wait(procs["resumed"], folders["resumed"])
    finally:
        for proc in procs.values():  # a failed wait leaves the other run going: stop it
            _stop(proc)
    return folders


def summary(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "summary.json").read_text())


def logged(folder: Path, mode: str = "snooze") -> list[dict[str, Any]]:
    """verl's file logger: one ``{"step", "data"}`` line per ``logger.log`` call."""
    lines = (folder / "log" / "fit" / f"{mode}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _train_lines(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line["data"] for line in lines if "actor/pg_loss" in line["data"]]


def _state(folder: Path, step: int) -> dict[str, Any]:
    from snooze.core.checkpoint import load_state

    return load_state(folder / "ckpt" / f"global_step_{step}" / "snooze")


def _rewards(folder: Path) -> list[dict[str, Any]]:
    """The snooze reward log: one line per group the scheduler was told about."""
    lines = (folder / "ckpt" / "snooze_rewards.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[1:]]  # after the header


def _groups(folder: Path) -> list[tuple[int, str, Any, list[float]]]:
    """The reward log as a multiset: each step's groups in any order, each group's rewards in any order."""
    return sorted((g["step"], g["dataset"], g["id"], sorted(g["rewards"])) for g in _rewards(folder))


def _actor(folder: Path, step: int) -> dict[str, Any]:
    import torch

    return torch.load(folder / "ckpt" / f"global_step_{step}" / "actor" / "tiny.pt", weights_only=True)["model"]


def _checks_common(folder: Path, mode: str) -> list[dict[str, Any]]:
    """What both modes must show: verl trained on the filtered data, logged, checkpointed, validated, learned."""
    got = summary(folder)
    assert got["train_rows"] == len(ROWS)  # the over-long prompt was filtered out by verl
    assert got["global_steps"] == STEPS + 1 and got["actor_updates"] == STEPS
    assert got["weights_end"] != got["weights_start"]  # the actor trained
    lines = logged(folder, mode)
    assert [line["step"] for line in lines] == [0, *range(1, STEPS + 1)]  # validation before training, then steps
    val = {line["step"]: line["data"] for line in lines if any(k.startswith("val-core/") for k in line["data"])}
    assert list(val) == [0, *range(SAVE_FREQ, STEPS + 1, SAVE_FREQ)]
    # the "odd" rows score 1 when the model's first word is odd: greedy validation on math learns it
    assert val[STEPS]["val-core/math/acc/mean@1"] > val[0]["val-core/math/acc/mean@1"]
    for data in _train_lines(lines):
        assert {"actor/grad_norm", "critic/advantages/max", "critic/score/mean", "response_length/mean"} <= set(data)
        assert data["response_length/mean"] > 0 and np.isfinite(data["actor/pg_loss"])
    for step in range(SAVE_FREQ, STEPS + 1, SAVE_FREQ):
        ckpt = folder / "ckpt" / f"global_step_{step}"
        assert (ckpt / "data.pt").is_file() and (ckpt / "actor" / "tiny.pt").is_file()
    assert (folder / "ckpt" / "latest_checkpointed_iteration.txt").read_text() == str(STEPS)
    return _train_lines(lines)


def test_plain_verl_with_dapo_filtering_trains_on_the_filtered_data(runs: dict[str, Path]) -> None:
    steps = _checks_common(runs["sync"], "sync")
    evicted = sum(d.get("training/filter_groups/evicted_samples", 0) for d in steps)
    assert evicted >= 1  # groups without reward spread (the easy prompts' at least) are evicted and replaced
    assert all(d["critic/advantages/max"] > 0 for d in steps)  # only groups with reward spread were trained on
    assert not any(k.startswith("snooze/") for d in steps for k in d)


def test_snooze_trainer_runs_in_verls_fit_and_its_totals_add_up(runs: dict[str, Path]) -> None:
    folder = runs["snooze"]
    steps = _checks_common(folder, "snooze")
    last = steps[-1]
    assert last["snooze/total/steps"] == STEPS and last["snooze/total/train_groups"] == 2 * STEPS
    total = last["snooze/total/gen_groups"]
    assert total == last["snooze/total/train_groups"] + last["snooze/total/dropped"] + last["snooze/total/discarded"]
    assert sum(d["snooze/gen/groups"] for d in steps) == total
    # every group came with the tokens verl's agent loop tagged its trajectories with (response_length=4 at most)
    assert all(d["snooze/gen/tokens_missing"] == 0 for d in steps)
    assert all(0 < d["snooze/gen/tokens"] <= 4 * d["snooze/gen/rollouts"] for d in steps)
    assert sum(d["snooze/gen/tokens"] for d in steps) == last["snooze/total/gen_tokens"]
    asleep = last["snooze/asleep"]
    assert asleep >= len(EASY) and asleep == last["snooze/dataset/gsm/asleep"] + last["snooze/dataset/math/asleep"]
    groups = _rewards(folder)
    assert len(groups) == total  # every generated group reached the scheduler through verl's reward loop
    keys = [(g["dataset"], g["id"]) for g in groups]
    assert set(keys) <= {(ds, i) for ds, i, _ in ROWS} and (LONG[0], LONG[1]) not in keys  # verl's rows only
    easy = [g for g in groups if (g["dataset"], g["id"]) in EASY]
    assert all(g["rewards"] == [1.0] * len(g["rewards"]) for g in easy)  # verl's reward function scored them
    assert sorted(k for k in keys if k in EASY) == sorted(EASY)  # drawn once each, then asleep
    totals = _state(folder, STEPS)["meta"]["metrics"]["totals"]  # the scheduler checkpointed what verl logged
    assert totals["steps"] == STEPS
    assert {k: int(v) for k, v in totals.items()} == {
        k: int(last[f"snooze/total/{k}"]) for k in totals if f"snooze/total/{k}" in last
    }


def test_resumed_snooze_run_continues_exactly(runs: dict[str, Path]) -> None:
    done, resumed = runs["snooze"], runs["resumed"]
    assert summary(resumed)["resumed_at"] == SAVE_FREQ
    lines = logged(resumed)
    assert [line["step"] for line in lines] == [SAVE_FREQ, *range(SAVE_FREQ + 1, STEPS + 1)]
    a, b = _state(done, STEPS), _state(resumed, STEPS)
    assert a["meta"] == b["meta"]
    assert a["arrays"].keys() == b["arrays"].keys()
    for name in a["arrays"]:
        np.testing.assert_array_equal(a["arrays"][name], b["arrays"][name], err_msg=name)
    ours = {k: v for k, v in _train_lines(lines)[-1].items() if k.startswith("snooze/")}
    theirs = {k: v for k, v in _train_lines(logged(done))[-1].items() if k.startswith("snooze/")}
    assert ours == theirs  # the scheduler's step and total metrics of the last step

    # The reward log was cut back to step 2 and the same groups appended. A round's groups finish in any order,
    # and a group's sessions ask the rollout server concurrently (which session drew which sample may differ).
    assert _groups(resumed) == _groups(done)
    # verl's training continued: the same actor (to float rounding: the batch rows may come in another order)
    import torch

    for name, tensor in _actor(done, STEPS).items():
        torch.testing.assert_close(_actor(resumed, STEPS)[name], tensor, rtol=1e-5, atol=1e-7, msg=name)

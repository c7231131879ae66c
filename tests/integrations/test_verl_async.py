"""verl 0.9.1's own colocated async trainer end to end on CPU with the scheduler drawing its prompts
(``trainer.v1.trainer_mode=snooze_colocate_async``), and a run killed after its step-2 checkpoint and resumed.

The same runner and stand-ins as ``test_verl_fit`` (``_verl_fit``, ``_verl_cpu``: only the actor worker
group and the rollout server are ours). What is verl's here beyond the sync test: ``PPOTrainerColocateAsync``
(warm-up batch, partial rollout client, a batch submitted each step ahead of training), the exact refills
of its ``ReplayBufferAsync`` (one prompt per group that cannot train), ``data.gen_batch_size=1``, the
TransferQueue checkpoint and the re-issue of checkpointed in-flight prompts on resume.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="needs the [verl] extra")
pytest.importorskip("transfer_queue", reason="needs the [verl] extra")
pytest.importorskip("ray", reason="needs the [verl] extra")

from integrations._verl_cpu import SLOW_ENV  # noqa: E402
from integrations._verl_fit import LONG, ROWS, SAVE_FREQ, STEPS  # noqa: E402
from integrations.test_verl_fit import _start, _stop, _wait, logged, summary  # noqa: E402

pytestmark = [pytest.mark.verl, pytest.mark.slow, pytest.mark.timeout(900)]

MODE = "snooze_colocate_async"
B = 2  # data.train_batch_size (_verl_env.B)
EASY = [(ds, i) for ds, i, truth in ROWS if truth == "easy"]
# the killed run's rollout server takes this long per token (a GPU server is slow next to the replay buffer's
# polls): prompts are still being generated when a step's batch is full, so its checkpoint holds running ones
SLOW = {SLOW_ENV: "0.1"}


def _kill_after_checkpoint(proc: Any, folder: Path, step: int, timeout: float = 420) -> bool:
    """SIGKILL the run (its whole process group) once verl has committed checkpoint ``step``; whether it
    was still running then."""
    latest = folder / "ckpt" / "latest_checkpointed_iteration.txt"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if latest.exists() and latest.read_text().strip() == str(step):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.1)
    _stop(proc)
    return False


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An uninterrupted async run beside one killed after its step-2 checkpoint, then that one resumed."""
    root = tmp_path_factory.mktemp("async")
    folders = {name: root / name for name in ("done", "killed")}
    for folder in folders.values():
        folder.mkdir()
    done, killed = _start(MODE, folders["done"]), _start(MODE, folders["killed"], **SLOW)
    try:
        was_running = _kill_after_checkpoint(killed, folders["killed"], SAVE_FREQ)
        assert was_running, (folders["killed"] / "run.log").read_text(errors="replace")[-6000:]
        (folders["killed"] / "killed.log").write_bytes((folders["killed"] / "run.log").read_bytes())
        resumed = _start(MODE, folders["killed"], **SLOW)  # verl's resume_mode=auto finds global_step_2
        _wait(done, folders["done"])
        _wait(resumed, folders["killed"])
    finally:
        for proc in (done, killed):
            _stop(proc)
    return folders


def _steps(folder: Path) -> list[dict[str, Any]]:
    return [line["data"] for line in logged(folder, MODE) if "actor/pg_loss" in line["data"]]


def _state(folder: Path, step: int) -> dict[str, Any]:
    from snooze.core.checkpoint import load_state

    return load_state(folder / "ckpt" / f"global_step_{step}" / "snooze")


def _inflight(folder: Path, step: int) -> dict[str, int]:
    return json.loads((folder / "ckpt" / f"global_step_{step}" / "snooze" / "inflight.json").read_text())["uids"]


def _rewards(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "ckpt" / "snooze_rewards.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[1:]]  # after the header


def _exact_counts(folder: Path, cancelled: float) -> dict[str, Any]:
    """Every ticket the scheduler issued is reported once, withdrawn, or still in flight at the end."""
    state = _state(folder, STEPS)
    totals = state["meta"]["metrics"]["totals"]
    pending = {int(t) for t in state["arrays"]["pending"][:, 0]}
    assert state["meta"]["next_ticket"] == totals["gen_groups"] + cancelled + len(pending)
    assert len(_rewards(folder)) == totals["gen_groups"]  # one reward-log line per report
    assert set(_inflight(folder, STEPS).values()) == pending  # what verl keeps in flight is the scheduler's
    assert totals["steps"] == STEPS and totals["train_groups"] == B * STEPS
    return totals


def test_the_async_trainer_trains_on_the_schedulers_groups_and_skips_snoozed_prompts(runs: dict[str, Path]) -> None:
    folder = runs["done"]
    got = summary(folder)
    assert got["train_rows"] == len(ROWS) and got["global_steps"] == STEPS + 1 and got["actor_updates"] == STEPS
    assert got["weights_end"] != got["weights_start"]  # the actor trained
    val = {line["step"]: line["data"] for line in logged(folder, MODE) if "val-core/math/acc/mean@1" in line["data"]}
    assert val[STEPS]["val-core/math/acc/mean@1"] > val[0]["val-core/math/acc/mean@1"]  # it learned the odd rule
    steps = _steps(folder)
    assert len(steps) == STEPS
    assert all(d["snooze/train/groups"] == B and d["critic/advantages/max"] > 0 for d in steps)  # signal only
    last = steps[-1]
    cancelled = sum(d["snooze/gen/cancelled"] for d in steps)
    assert cancelled == 0  # no rollout failed, nothing went stale (max_off_policy_threshold=8)
    totals = _exact_counts(folder, cancelled)
    assert {k: int(v) for k, v in totals.items()} == {k: int(last[f"snooze/total/{k}"]) for k in totals}
    assert totals["gen_groups"] == totals["train_groups"] + totals["dropped"] + totals["discarded"]
    assert totals["dropped"] >= 1  # the easy groups were not trained on; verl refilled one prompt for each
    assert totals["skipped"] >= 1  # a snoozed prompt came up and was skipped at draw time, not generated
    assert last["snooze/asleep"] >= len(EASY)
    groups = _rewards(folder)
    keys = [(g["dataset"], g["id"]) for g in groups]
    assert set(keys) <= {(ds, i) for ds, i, _ in ROWS} and (LONG[0], LONG[1]) not in keys
    assert all(g["rewards"] == [1.0] * len(g["rewards"]) for g in groups if (g["dataset"], g["id"]) in EASY)
    assert {g["step"] for g in groups} == set(range(STEPS))  # each report went to the step open when it came
    # generation ran ahead: the step-2 checkpoint held prompts in flight, which verl saved in TransferQueue, and
    # the core's async metrics say so (in flight at each step's end, feedback a step old behind some groups)
    assert len(_inflight(folder, SAVE_FREQ)) >= 1
    for step in (SAVE_FREQ, STEPS):
        assert steps[step - 1]["snooze/async/in_flight"] == len(_inflight(folder, step))
    assert max(d["snooze/async/age_max"] for d in steps) >= 1  # a group reported a step after it was drawn
    assert all(d["snooze/async/too_stale"] == 0 for d in steps)  # max_staleness unset: none
    assert (folder / "ckpt" / f"global_step_{SAVE_FREQ}" / "transfer_queue").is_dir()


def test_a_run_killed_after_a_checkpoint_resumes_with_every_group_counted_once(runs: dict[str, Path]) -> None:
    folder = runs["killed"]
    assert "Training Progress" in (folder / "killed.log").read_text(errors="replace")  # it was killed mid-run
    got = summary(folder)
    assert got["resumed_at"] == SAVE_FREQ and got["global_steps"] == STEPS + 1
    assert [line["step"] for line in logged(folder, MODE)] == [SAVE_FREQ, *range(SAVE_FREQ + 1, STEPS + 1)]
    steps = _steps(folder)
    cancelled = sum(d["snooze/gen/cancelled"] for d in steps)
    assert cancelled == 0  # every prompt in flight at the checkpoint was re-issued by verl, none withdrawn
    # verl restored exactly the scheduler's in-flight groups from its TransferQueue checkpoint and re-issued
    # those still pending or running (the others had finished unreported: reported at the first poll)
    log = (folder / "run.log").read_text(errors="replace")
    assert [int(n) for n in re.findall(r"Restored (\d+) training prompt groups", log)] == [
        len(_inflight(folder, SAVE_FREQ))
    ]
    reissued = [int(n) for n in re.findall(r"Re-issued (\d+) in-flight prompts", log)]
    assert sum(reissued) <= len(_inflight(folder, SAVE_FREQ))
    totals = _exact_counts(folder, cancelled)
    at_save = _state(folder, SAVE_FREQ)
    flying = {int(t) for t in at_save["arrays"]["pending"][:, 0]}
    assert flying and set(_inflight(folder, SAVE_FREQ).values()) == flying
    assert flying.isdisjoint(int(t) for t in _state(folder, STEPS)["arrays"]["pending"][:, 0])  # reported since
    saved = at_save["meta"]["metrics"]["totals"]
    # the reward log holds the checkpoint's groups and then exactly the groups reported after the resume
    assert len([g for g in _rewards(folder) if g["step"] < SAVE_FREQ]) == saved["gen_groups"]
    assert sum(d["snooze/gen/groups"] for d in steps) == totals["gen_groups"] - saved["gen_groups"]

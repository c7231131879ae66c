"""verl 0.9.1's own separate async trainer end to end on CPU with the scheduler drawing its prompts
(``trainer.v1.trainer_mode=snooze_separate_async``, ``parameter_sync_step=1``, ``hybrid_engine=False``).

The runner and stand-ins of ``test_verl_async`` plus ``_verl_sep``'s at the separate mode's own interfaces:
a checkpoint-engine backend registered by name (``checkpoint_engine.backend=tiny_cpu``), the rollout
replica's ``init_standalone`` on CPU, and the actor worker group with ``DetachActorWorker``'s methods. What is
verl's here: ``PPOTrainerSeparateAsync`` (standalone replicas, ``CheckpointEngineManager.update_weights``
after each step with abort/resume of partial rollout, the fully-async client), its ``ReplayBufferAsync``
refills, the TransferQueue checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="needs the [verl] extra")
pytest.importorskip("transfer_queue", reason="needs the [verl] extra")
pytest.importorskip("ray", reason="needs the [verl] extra")

from integrations._verl_fit import LONG, ROWS, SAVE_FREQ, STEPS  # noqa: E402
from integrations.test_verl_async import EASY, B, _exact_counts, _inflight, _rewards  # noqa: E402
from integrations.test_verl_fit import _start, _stop, _wait, logged, summary  # noqa: E402

pytestmark = [pytest.mark.verl, pytest.mark.slow, pytest.mark.timeout(900)]

MODE = "snooze_separate_async"


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("separate")
    proc = _start(MODE, folder)
    try:
        _wait(proc, folder)
    finally:
        _stop(proc)
    return folder


def _steps(folder: Path) -> list[dict[str, Any]]:
    return [line["data"] for line in logged(folder, MODE) if "actor/pg_loss" in line["data"]]


def test_the_separate_async_trainer_trains_on_the_schedulers_groups_with_weights_synced(done: Path) -> None:
    got = summary(done)
    assert got["train_rows"] == len(ROWS) and got["global_steps"] == STEPS + 1 and got["actor_updates"] == STEPS
    assert got["weights_end"] != got["weights_start"]  # the actor trained
    assert got["weight_syncs"] == STEPS + 1  # through the checkpoint engine: once at init, once after each step
    val = {line["step"]: line["data"] for line in logged(done, MODE) if "val-core/math/acc/mean@1" in line["data"]}
    assert val[STEPS]["val-core/math/acc/mean@1"] > val[0]["val-core/math/acc/mean@1"]  # it learned the odd rule
    steps = _steps(done)
    assert len(steps) == STEPS
    assert all(d["snooze/train/groups"] == B and d["critic/advantages/max"] > 0 for d in steps)  # signal only
    # the standalone server generated with the weights the engine sent: its version is at most a step old
    assert all(d["training/off_policy/trajectory_staleness/max"] <= 1 for d in steps)
    assert max(d["training/off_policy/trajectory_staleness/max"] for d in steps) == 1  # and it ran ahead
    last = steps[-1]
    cancelled = sum(d["snooze/gen/cancelled"] for d in steps)
    assert cancelled == 0
    totals = _exact_counts(done, cancelled)  # tickets issued = reported + withdrawn + in flight
    assert {k: int(v) for k, v in totals.items()} == {k: int(last[f"snooze/total/{k}"]) for k in totals}
    assert totals["gen_groups"] == totals["train_groups"] + totals["dropped"] + totals["discarded"]
    assert totals["dropped"] >= 1 and totals["skipped"] >= 1  # easy groups dropped; a snoozed prompt skipped
    assert last["snooze/asleep"] >= len(EASY)
    keys = [(g["dataset"], g["id"]) for g in _rewards(done)]
    assert set(keys) <= {(ds, i) for ds, i, _ in ROWS} and (LONG[0], LONG[1]) not in keys
    for step in (SAVE_FREQ, STEPS):
        assert steps[step - 1]["snooze/async/in_flight"] == len(_inflight(done, step))
    assert (done / "ckpt" / f"global_step_{SAVE_FREQ}" / "transfer_queue").is_dir()

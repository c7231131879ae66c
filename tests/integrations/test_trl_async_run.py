"""The async trainer's step loop (``snooze.integrations.trl._async_run``) on its own, without TRL: what it issues
and when, what closes a step, the rows a step hands TRL, the states kept for checkpoints, save and restore.
The rollout worker is played by hand: each issued prompt is recorded, and scored groups are handed back in any
order (``ScoredGroup``-shaped)."""

from __future__ import annotations

import queue
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import snooze
from snooze.core.checkpoint import load_state
from snooze.integrations.trl._async_run import AsyncRun, ScheduledQueue
from snooze.logs import read_reward_log

G = 2
RECORDS = [{"id": f"q{i}", "prompt": [{"role": "user", "content": f"q {i}"}]} for i in range(8)]
SIGNAL, FLAT = [0.0, 1.0], [1.0, 1.0]


@dataclass
class Row:  # the fields of TRL's RolloutSample the step loop touches
    group_id: int
    advantage: float


def _run(rows_per_step: int = 4, window: int = 4, **cfg: Any) -> tuple[AsyncRun, list[tuple[int, str]]]:
    """DAPO's config (``dynamic_sampling``) unless a test names another policy: the steps below are worked out for it
    (tests/test_default_setting.py runs the default the trainer builds)."""
    config = snooze.SchedulerConfig(batch_size=2, group_size=G, shuffle=False, **{"policy": "dynamic_sampling", **cfg})
    sent: list[tuple[int, str]] = []
    run = AsyncRun(
        snooze.Scheduler({"d": RECORDS}, config), lambda t, r: sent.append((t, r["id"])), rows_per_step, window
    )
    return run, sent


def _scored(ticket: int, rewards: list[float]) -> Any:
    rows = [Row(ticket, float(r) - float(np.mean(rewards))) for r in rewards]
    return SimpleNamespace(ticket=ticket, rewards=rewards, samples=rows)


def test_rounds_are_issued_within_the_window_and_the_round_bound() -> None:
    run, sent = _run(max_gen_rounds=3)
    run.issue()
    assert [t for t, _ in sent] == [0, 1, 2, 3]  # two rounds of 2: the window of 4 is full
    run.issue()
    assert len(sent) == 4
    run.report(_scored(0, FLAT))
    run.report(_scored(1, FLAT))
    run.issue()
    assert [t for t, _ in sent][4:] == [4, 5]  # the third round, and the last this step may draw
    run.report(_scored(4, FLAT))
    run.report(_scored(5, FLAT))
    run.issue()
    assert len(sent) == 6
    assert not run.closable()  # tickets 2 and 3 were drawn this step and are still out
    run.report(_scored(3, SIGNAL))
    assert not run.closable()
    run.report(_scored(2, FLAT))
    assert run.closable()


def test_a_full_batch_closes_the_step_with_candidates_still_out() -> None:
    run, sent = _run()
    run.issue()
    run.report(_scored(1, SIGNAL))
    run.report(_scored(0, [1.0, 0.0]))
    assert run.closable() and set(run.out) == {2, 3}
    rows = run.close()
    assert [r.group_id for r in rows] == [1, 1, 0, 0] and any(r.advantage for r in rows)
    assert run.metrics[0]["snooze/fill_rows"] == 0 and run.metrics[0]["snooze/train/groups"] == 2
    run.report(_scored(2, SIGNAL))  # drawn in step 0, reported in step 1: age 1
    run.report(_scored(3, SIGNAL))
    run.close()
    assert run.metrics[1]["snooze/async/age_mean"] == 1.0


def test_a_short_step_is_filled_with_zero_advantage_copies_of_its_rows() -> None:
    run, sent = _run(max_gen_rounds=1, rows_per_step=4)
    run.issue()
    assert len(sent) == 2
    run.report(_scored(0, FLAT))
    run.report(_scored(1, SIGNAL))
    assert run.closable()
    rows = run.close()
    assert len(rows) == 4 and [r.group_id for r in rows] == [1, 1, 1, 1]
    assert [r.advantage for r in rows[2:]] == [0.0, 0.0] and rows[0].advantage != 0.0
    assert run.metrics[0]["snooze/fill_rows"] == 2
    # a step with no signal at all trains on the zero-signal rows it generated, at advantage 0
    run.issue()
    run.report(_scored(2, FLAT))
    run.report(_scored(3, FLAT))
    rows = run.close()
    assert len(rows) == 4 and {r.group_id for r in rows} <= {2, 3} and not any(r.advantage for r in rows)


def test_a_group_too_stale_for_max_staleness_teaches_the_policy_but_is_not_trained() -> None:
    run, sent = _run(max_staleness=0, policy="snooze")
    run.issue()  # tickets 0-3, drawn at step 0
    run.report(_scored(0, SIGNAL))
    run.report(_scored(1, SIGNAL))
    run.close()
    run.report(_scored(2, SIGNAL))  # drawn at step 0, reported at step 1: too stale for max_staleness=0
    run.report(_scored(3, FLAT))  # ... and too easy: the prompt is snoozed all the same
    assert not run.scheduler.batch_full
    rows = run.close()
    assert run.metrics[1]["snooze/async/too_stale"] == 2 and run.metrics[1]["snooze/snooze/asleep"] == 1
    assert not any(r.advantage for r in rows)  # the stale group's rows only fill the step, at advantage 0


def test_what_the_worker_returns_is_checked_before_anything_changes() -> None:
    run, sent = _run()
    run.issue()
    before = run.scheduler.state_dict()
    with pytest.raises(snooze.IntegrationError, match="group 9, which the scheduler did not issue"):
        run.report(_scored(9, SIGNAL))
    with pytest.raises(snooze.IntegrationError, match="scored 3 completions, not num_generations=2"):
        run.report(_scored(0, [1.0, 0.0, 1.0]))
    run.out[0] = (run.scheduler.pending_candidates()[0], 0)  # (the failed report popped it)
    after = run.scheduler.state_dict()
    assert all(np.array_equal(before["arrays"][k], after["arrays"][k]) for k in before["arrays"])


def test_the_tokens_of_a_scored_group_are_reported_with_it(tmp_path: Path) -> None:
    run, _ = _run()
    run.reward_log = tmp_path / "rewards.jsonl"
    run.issue()
    run.report(SimpleNamespace(**vars(_scored(0, SIGNAL)), tokens=7))
    run.report(_scored(1, SIGNAL))  # a worker that kept no token ids: counted as missing
    m = run.scheduler.finish_step().metrics
    assert (m["gen/tokens"], m["gen/tokens_missing"], m["gen/rollouts"]) == (7, 1, 2 * G)
    run._log().close()
    assert read_reward_log(run.reward_log).tokens.tolist() == [7, -1]  # and logged with it, or left out


def test_unscorable_completions_count_as_the_low_end_of_the_range() -> None:
    run, sent = _run()
    run.issue()
    run.report(_scored(0, [float("nan"), 1.0]))
    assert run.scheduler.batch_full is False and len(run.rows[0]) == 2
    run.report(_scored(1, SIGNAL))
    batch_rewards = run.scheduler.finish_step().rewards
    assert batch_rewards[0].tolist() == [0.0, 1.0]


def test_the_state_at_each_close_is_kept_for_the_checkpoint_and_restores_with_its_candidates_out(
    tmp_path: Path,
) -> None:
    run, sent = _run()
    run.issue()
    run.report(_scored(0, SIGNAL))
    run.report(_scored(1, SIGNAL))
    run.close()  # step 0 closes with tickets 2, 3 out
    held = run.snapshots[1]
    run.issue()
    run.report(_scored(2, SIGNAL))  # the read-ahead into step 1: after the state TRL's checkpoint 1 must hold
    run.save(tmp_path / "snooze", 1)
    saved = load_state(tmp_path / "snooze")
    assert saved["arrays"]["pending"][:, 0].tolist() == [2, 3]
    assert all(np.array_equal(saved["arrays"][k], held["arrays"][k]) for k in held["arrays"])
    with pytest.raises(snooze.IntegrationError, match="no scheduler state was kept at the close of step 4"):
        run.save(tmp_path / "other", 5)

    fresh, resent = _run()
    with pytest.raises(snooze.StateError, match="after 1 steps, but TRL resumes after step 3"):
        fresh.restore(tmp_path / "snooze", 3)
    assert fresh.scheduler.step_index == 0 and not resent
    fresh.restore(tmp_path / "snooze", 1)
    fresh.issue()
    assert [t for t, _ in resent[:2]] == [2, 3]  # the checkpoint's candidates out, again, first
    assert [i for _, i in resent[:2]] == [i for t, i in sent if t in (2, 3)]
    fresh.report(_scored(3, SIGNAL))
    fresh.report(_scored(2, SIGNAL))
    assert fresh.closable() and fresh.close()[0].group_id == 3


def test_old_states_are_not_kept() -> None:
    run, _ = _run()
    for step in range(5):
        run.issue()
        for t in list(run.out):
            run.report(_scored(t, SIGNAL))
            if run.closable():
                break
        run.close()
        assert max(run.snapshots) == step + 1
    assert sorted(run.snapshots) == [3, 4, 5]


def test_used_up_data_stops_after_its_step_and_nothing_at_all_is_an_error() -> None:
    run, sent = _run(epochs=1, rows_per_step=4)
    while run.exhausted_after is None:
        run.issue()
        for t in list(run.out):
            run.report(_scored(t, SIGNAL))
        last = run.close()
    assert run.exhausted_after == 1 and len(sent) == len(RECORDS)  # 4 drawn a step (the window), 8 prompts
    assert run.closable()  # TRL reads one step ahead before it stops: that step is the last one's rows, inert
    ahead = run.close()
    assert [r.group_id for r in ahead] == [r.group_id for r in last] and not any(r.advantage for r in ahead)
    assert run.exhausted_after == 1  # (the step read ahead does not move it)
    nothing, _ = _run()
    nothing.scheduler.set_excluded("d", [r["id"] for r in RECORDS])
    assert nothing.closable()
    with pytest.raises(snooze.IntegrationError, match="nothing could be generated"):
        nothing.close()


def test_once_the_data_is_used_up_a_step_waits_for_every_candidate_out() -> None:
    run, sent = _run(epochs=1)
    run.issue()
    run.report(_scored(0, SIGNAL))
    run.report(_scored(1, SIGNAL))
    run.close()  # step 0: full, tickets 2 and 3 out
    run.issue()  # 4, 5
    run.report(_scored(2, SIGNAL))
    run.report(_scored(3, SIGNAL))
    run.close()  # step 1: full with step 0's, 4 and 5 out
    run.issue()  # 6, 7: the last prompts
    assert run.scheduler.exhausted and len(sent) == len(RECORDS) and run.exhausted_after is None
    for t in (4, 5, 6):
        run.report(_scored(t, FLAT))
        assert not run.closable()  # 4 and 5 were drawn in step 1, yet step 2 waits: they are the last to come
    run.report(_scored(7, SIGNAL))
    assert run.closable()
    run.close()
    assert run.exhausted_after == 2


def test_quotas_hold_each_datasets_share_of_the_batch_whatever_order_groups_come_back() -> None:
    half = {"a": RECORDS[:4], "b": [{**r, "id": f"b{i}"} for i, r in enumerate(RECORDS[4:])]}
    config = snooze.SchedulerConfig(batch_size=2, group_size=G, mix="quota", weights={"a": 1.0, "b": 1.0})
    sent: list[tuple[int, str]] = []
    run = AsyncRun(snooze.Scheduler(half, config), lambda t, r: sent.append((t, r["id"])), 4, 4)
    run.issue()
    by_ticket = dict(sent)
    a_first = sorted(by_ticket, key=lambda t: not by_ticket[t].startswith("q"))  # every 'a' group back first
    for t in a_first:
        run.report(_scored(t, SIGNAL))
        if run.closable():
            break
    batch_ids = {by_ticket[r.group_id] for r in run.close()}
    assert {i[0] for i in batch_ids} == {"q", "b"}  # one group of each dataset, though 'a' came back first


def test_the_queue_hands_rows_of_closed_steps_and_times_out_without_losing_anything() -> None:
    run, sent = _run()
    source: queue.Queue[Any] = queue.Queue()
    q = ScheduledQueue(run, source)
    with pytest.raises(queue.Empty):
        q.get(timeout=0.05)
    assert len(sent) == 4 and q.qsize() == 0
    source.put(_scored(0, SIGNAL))
    with pytest.raises(queue.Empty):
        q.get(timeout=0.05)
    source.put(_scored(1, SIGNAL))
    rows = [q.get(timeout=1.0) for _ in range(4)]
    assert [r.group_id for r in rows] == [0, 0, 1, 1] and run.scheduler.step_index == 1


def test_the_benchmark_of_the_kept_states_runs() -> None:
    """benchmarks/trl_async_state.py, whose figures docs/integrations/trl.md quotes, on a small pool."""
    import trl_async_state

    took, mb = trl_async_state.measure(1000, 1)
    assert 0 < took < 5 and 0 < mb < 1


@pytest.mark.parametrize("policy", ["dynamic_sampling", "snooze"])
def test_carrying_the_surplus_changes_nothing_here(policy: str) -> None:
    """A step closes the moment its batch is full (ScheduledQueue checks before each report), so there is never a
    surplus to carry: the recommended setting's carry_surplus=True gives the same steps as False."""

    def steps(carry: bool) -> list[list[int]]:
        run, _ = _run(policy=policy, carry_surplus=carry, max_gen_rounds=8)
        closed, rng = [], np.random.default_rng(0)
        while len(closed) < 6:
            run.issue()
            if run.closable():
                closed.append(sorted(int(t) for t in run.scheduler.step_record().tickets("trained")))
                run.close()
                continue
            ticket = min(run.out)
            run.report(_scored(ticket, SIGNAL if rng.random() < 0.5 else FLAT))
            assert run.scheduler.step_record().tickets("surplus").size == 0  # never more than the batch
        return closed

    assert steps(True) == steps(False)


def test_groups_carried_past_the_end_of_the_data_are_trained_before_it_stops() -> None:
    """issue 49 build 6: with ``carry_surplus``, groups carried out of the step that used the data up are trained
    in one more step, and the run stops after that one (``exhausted_after``), not before."""
    run, sent = _run(epochs=1, carry_surplus=True)
    trained: list[int] = []
    while run.exhausted_after is None:
        run.issue()
        for t in list(run.out):  # every group out, reported at once: the batch of 2 overflows and carries 2
            run.report(_scored(t, SIGNAL))
        trained += run.scheduler.step_record().tickets("trained").tolist()
        run.close()
        assert len(run.metrics) < 10
    steps = [run.metrics[s] for s in sorted(run.metrics)]
    assert len(sent) == len(RECORDS) and sorted(trained) == list(range(len(RECORDS)))  # none left behind
    assert steps[-2]["snooze/surplus/carried_out"] == 2 and steps[-1]["snooze/surplus/carried_in"] == 2
    assert steps[-1]["snooze/gen/groups"] == 0 and run.exhausted_after == len(steps) - 1

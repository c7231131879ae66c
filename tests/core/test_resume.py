"""Save at several points (an epoch boundary among them), load into a fresh scheduler, continue:
the same candidates and batches as the uninterrupted run."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

import snooze

KINDS = ["signal", "easy", "hard", "signal", "easy", "flat", "signal", "easy"]


def datasets():
    return {
        "a": [{"id": f"a{i}", "kind": k} for i, k in enumerate(KINDS)],
        "b": [{"id": i, "kind": k} for i, k in enumerate(reversed(KINDS))],
    }


def rollout(cands):
    # Deterministic in (prompt, ticket): both runs issue the same tickets, so they see the same rewards.
    out = []
    for c in cands:
        h = int(hashlib.sha256(f"{c.dataset}/{c.id}/{c.ticket}".encode()).hexdigest(), 16)
        kind = c.record["kind"]
        if kind == "signal" or (kind == "easy" and h % 5 == 0):  # easy prompts sometimes regress
            out.append([1.0, 0.0, float(h % 2), 1.0])
        else:
            out.append({"easy": [1.0] * 4, "hard": [0.0] * 4, "flat": [0.5] * 4}[kind])
    return np.array(out)


CONFIGS = {
    "snooze-quota": snooze.SchedulerConfig(
        batch_size=4, group_size=4, options=snooze.SnoozeOptions(factor=2), mix="quota", weights={"a": 1, "b": 1}
    ),
    "filter-stream-carry": snooze.SchedulerConfig(
        batch_size=3, gen_batch_size=5, group_size=4, policy="filter", carry_surplus=True
    ),
    # issue 40's candidate with the audit on: the carried surplus and the audited encounters resume exactly
    "snooze-f1-carry-audit": snooze.SchedulerConfig(
        batch_size=3,
        gen_batch_size=5,
        group_size=4,
        options=snooze.SnoozeOptions(factor=1),
        carry_surplus=True,
        audit=0.4,
    ),
    "snooze-finite": snooze.SchedulerConfig(
        batch_size=4, group_size=4, options=snooze.SnoozeOptions(factor=1), epochs=2, on_short="pad"
    ),
    "snooze-history": snooze.SchedulerConfig(
        batch_size=3,
        group_size=4,
        options=snooze.SnoozeOptions(factor=3, skip="history"),
        weights={"a": 2, "b": 1},
    ),
}


def trace(batch):
    return (batch.step, [(c.dataset, c.id) for c in batch.candidates], batch.rewards.tolist(), batch.metrics)


def run(cfg, steps, save_at=(), tmp_path=None):
    sched = snooze.Scheduler(datasets(), cfg, seed=7)
    out = [sched.run_id]
    for step in range(steps):
        if step in save_at:
            sched.save(tmp_path / f"ckpt{step}")
            sched = snooze.Scheduler.load(tmp_path / f"ckpt{step}", datasets())
        out.append(trace(sched.step(rollout)))
    return out, sched


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_resume_matches_uninterrupted(name, tmp_path):
    cfg = CONFIGS[name]
    (_, *ref), ref_sched = run(cfg, 12)
    (first_id, *got), sched = run(cfg, 12, save_at=(0, 1, 4, 5, 9), tmp_path=tmp_path)
    assert got == ref
    a, b = ref_sched.state_dict(), sched.state_dict()
    assert b["meta"].pop("run_id") == first_id  # the resumed run is the same run: its id survived five loads
    a["meta"].pop("run_id")  # two runs built apart differ in their random id, and only in it
    assert a["meta"] == b["meta"]
    assert a["arrays"].keys() == b["arrays"].keys()
    assert all(np.array_equal(a["arrays"][k], b["arrays"][k]) for k in a["arrays"])


def test_resume_at_an_epoch_boundary(tmp_path):
    # dynamic_sampling over 8 all-signal prompts, 4 per step: steps end exactly on epoch boundaries.
    data = {"a": [{"id": i, "kind": "signal"} for i in range(8)]}
    cfg = snooze.SchedulerConfig(batch_size=4, group_size=4, policy="dynamic_sampling")
    ref = snooze.Scheduler(data, cfg, seed=3)
    ref_trace = [trace(ref.step(rollout)) for _ in range(6)]
    sched = snooze.Scheduler(data, cfg, seed=3)
    got = [trace(sched.step(rollout)) for _ in range(2)]
    assert sched._parts.streams[0].epoch == 1 and sched._parts.streams[0].cursor == 0  # exactly at the boundary
    sched.save(tmp_path / "ck")
    sched = snooze.Scheduler.load(tmp_path / "ck", data)
    got += [trace(sched.step(rollout)) for _ in range(4)]
    assert got == ref_trace


def test_resume_mid_step_keeps_pending_candidates(tmp_path):
    cfg = CONFIGS["snooze-quota"]
    ref = snooze.Scheduler(datasets(), cfg, seed=1)
    cands = ref.propose()
    ref.report(cands, rollout(cands))
    ref_batch = trace(ref.step(rollout))

    sched = snooze.Scheduler(datasets(), cfg, seed=1)
    cands = sched.propose()
    sched.save(tmp_path / "mid")
    sched = snooze.Scheduler.load(tmp_path / "mid", datasets())
    reissued = sched.pending_candidates()
    assert [(c.dataset, c.id, c.ticket) for c in reissued] == [(c.dataset, c.id, c.ticket) for c in cands]
    sched.report(reissued, rollout(reissued))
    assert trace(sched.step(rollout)) == ref_batch


def test_a_resume_under_a_changed_config_is_announced_and_a_matching_one_is_not(tmp_path, caplog):
    """The core accepts a change of what the state does not depend on (here the snooze factor
    and max_gen_rounds), so a resumed run can tune them; it says which, once, as a warning."""
    cfg = CONFIGS["snooze-quota"]
    _, sched = run(cfg, 2)
    sched.save(tmp_path / "ckpt")
    with caplog.at_level("WARNING", logger="snooze.core.scheduler"):
        snooze.Scheduler.load(tmp_path / "ckpt", datasets())  # the saved config: nothing to say
        assert not caplog.records
        now = cfg.replace(options=cfg.options.replace(factor=5), max_gen_rounds=2)
        changed = snooze.Scheduler.load(tmp_path / "ckpt", datasets(), now)
    assert changed.config.options.factor == 5
    (record,) = caplog.records
    assert (
        f"max_gen_rounds: saved {cfg.max_gen_rounds}, now 2" in record.getMessage()
        and "options.factor: saved 2, now 5" in record.getMessage()
    )


def test_a_saved_config_field_that_is_not_a_value_of_it_is_refused():
    """Found by the API fuzz: a saved ``batch_size`` that is an array made the comparison itself raise
    numpy's ValueError from inside load_state_dict. A saved config is now checked as
    ``SchedulerConfig.from_dict`` checks it (what ``Scheduler.load`` builds the scheduler from): refused,
    naming the field, and the scheduler is left as it was."""
    cfg = CONFIGS["snooze-quota"]
    _, sched = run(cfg, 1)
    state = sched.state_dict()
    state["meta"]["config"]["batch_size"] = np.zeros((2, 4))
    fresh = snooze.Scheduler(datasets(), cfg, seed=7)
    before = json.dumps(fresh.state_dict(), sort_keys=True, default=str)
    with pytest.raises(snooze.StateError, match=r"config: batch_size=array\("):
        fresh.load_state_dict(state)
    assert json.dumps(fresh.state_dict(), sort_keys=True, default=str) == before


def test_carried_groups_whose_completions_were_lost_are_dropped_and_generated_again(tmp_path):
    """A trainer that kept the carried surplus outside the scheduler (verl's TransferQueue) restarts: the state
    says which groups were carried in; ``drop_carried`` gives them up before the step's first round, the step's
    record says ``discarded``, and the step's rounds fill the batch in their place."""
    cfg = CONFIGS["filter-stream-carry"]
    sched = snooze.Scheduler(datasets(), cfg, seed=7)
    while not len(sched.step_record().tickets("trained")):  # a step that ends with surplus carried into the next
        sched.step(rollout)
    carried = sched.step_record().tickets("trained").tolist()
    sched.save(tmp_path / "ck")
    sched = snooze.Scheduler.load(tmp_path / "ck", datasets())
    assert sched.step_record().tickets("trained").tolist() == carried and sched.room() == cfg.batch_size - len(carried)
    assert sched.drop_carried() == len(carried) and sched.drop_carried() == 0
    assert sched.room() == cfg.batch_size and sched.step_record().tickets("discarded").tolist() == carried
    batch = sched.step(rollout)
    assert not set(carried) & {c.ticket for c in batch.candidates} and batch.metrics["gen/rounds"] >= 1
    assert set(carried) <= set(batch.record.tickets("discarded").tolist())


def test_drop_carried_after_the_first_round_is_refused_and_changes_nothing():
    cfg = CONFIGS["filter-stream-carry"]
    sched = snooze.Scheduler(datasets(), cfg, seed=7)
    while not len(sched.step_record().tickets("trained")):
        sched.step(rollout)
    sched.propose()
    before = sched.state_dict()
    with pytest.raises(snooze.ReportError, match="only when the step starts"):
        sched.drop_carried()
    after = sched.state_dict()
    assert before["meta"] == after["meta"]
    assert all(np.array_equal(before["arrays"][k], after["arrays"][k]) for k in before["arrays"])

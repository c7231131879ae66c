"""``skip="history"``: each encounter skipped with probability ``min(p**G, k/(k+1))`` from the prompt's
pass-rate history (docs/concepts.md, "skip=\"history\""), checked against a plain model."""

from __future__ import annotations

# audit=0.0 throughout: these tests check the skip rule alone
# (audited encounters would add issued prompts; tests/core/test_audit.py)
import numpy as np
import pytest

import snooze
from snooze.core._stream import dataset_key
from snooze.core.policies.history import encounter_uniform

G, K = 4, 3


def _sched(pass_rates: list[float]) -> snooze.Scheduler:
    cfg = snooze.SchedulerConfig(
        audit=0.0, batch_size=1, group_size=G, options=snooze.SnoozeOptions(factor=K, skip="history")
    )
    return snooze.Scheduler({"d": [{"id": i, "p": p} for i, p in enumerate(pass_rates)]}, cfg, seed=3)


def _rewards(cands, step: int) -> np.ndarray:
    """Exactly round(p * G) of G rollouts right: a prompt's pass rate is its ``p`` every time."""
    return np.array([[1.0] * round(c.record["p"] * G) + [0.0] * (G - round(c.record["p"] * G)) for c in cands])


def _reference(pass_rates: list[float], encounters: int, weight: float = 0.5) -> tuple[list[int], int]:
    """Issued rows and skip count, by the rule read plainly: one encounter at a time, in stream order."""
    n, key = len(pass_rates), dataset_key("d")
    h = [0] * n  # history bytes
    issued, skipped = [], 0
    for e in range(encounters):
        epoch, row = divmod(e, n)
        order = np.random.default_rng([3, key, epoch]).permutation(n)
        r = int(order[row])
        p_hist = (h[r] - 1) / 254 if h[r] else 0.0
        q = min(p_hist**G, K / (K + 1))
        if encounter_uniform(3, key, epoch, np.array([r]))[0] < q:
            skipped += 1
            continue
        issued.append(r)
        m = round(pass_rates[r] * G) / G
        old = p_hist if h[r] else m
        h[r] = int(1 + np.rint(254 * (old + weight * (m - old))))
    return issued, skipped


def test_issued_prompts_match_the_plain_rule():
    rates = [1.0, 0.75, 0.5, 1.0, 0.25, 1.0, 0.0]
    sched = _sched(rates)
    issued = []
    for step in range(60):
        cands = sched.propose(1)
        issued += [c.row for c in cands]
        sched.report(cands, _rewards(cands, step))
        sched.finish_step()
    skipped = sched._parts.step_metrics.totals["skipped"] + sched._parts.step_metrics.scalars["snooze/skipped"]
    ref_issued, ref_skipped = _reference(rates, encounters=len(issued) + skipped)
    assert issued == ref_issued and skipped == ref_skipped


def test_a_solved_prompt_is_skipped_k_of_k_plus_1_times_on_average():
    sched = _sched([1.0] * 50)
    issued = 0
    for step in range(400):
        cands = sched.propose(1)
        issued += len(cands)
        sched.report(cands, _rewards(cands, step))
        sched.finish_step()
    m = sched.metrics()
    encounters = m["total/gen_groups"] + m["total/skipped"]
    # after each prompt's first group, 1 in K+1 encounters is rolled out (binomial: +-4 sd)
    share = (issued - 50) / (encounters - 50)
    sd = np.sqrt(K / (K + 1) ** 2 / (encounters - 50))
    assert abs(share - 1 / (K + 1)) < 4 * sd
    assert sched._parts.memory.tables[0].asleep() == 0  # no counters: the history alone decides


def test_a_half_solved_prompt_is_skipped_at_its_all_correct_chance():
    sched = _sched([0.5] * 20)
    for step in range(400):
        cands = sched.propose(1)
        sched.report(cands, _rewards(cands, step))
        sched.finish_step()
    m = sched.metrics()
    encounters = m["total/gen_groups"] + m["total/skipped"]
    q = 0.5**G  # 6%: far below the cap K/(K+1) = 75% a solved prompt gets
    assert abs(m["total/skipped"] / encounters - q) < 4 * np.sqrt(q * (1 - q) / encounters)


def test_regressions_are_counted_once_per_relapse():
    """A prompt whose groups alternate all-correct / half-correct regresses at every half-correct group (the guard
    off: half the returns relapse, which would turn it on and roll out every skip)."""
    cfg = snooze.SchedulerConfig(
        guard=False, audit=0.0, batch_size=1, group_size=G, options=snooze.SnoozeOptions(factor=K, skip="history")
    )
    sched = snooze.Scheduler({"d": [{"id": i} for i in range(5)]}, cfg, seed=1)
    seen: dict[int, int] = {}
    relapses = regressed = 0
    for _ in range(200):
        cands = sched.propose(1)
        rows = [c.row for c in cands]
        rewards = []
        for r in rows:
            k = seen.get(r, 0)
            seen[r] = k + 1
            rewards.append([1.0] * G if k % 2 == 0 else [1.0, 0.0] * (G // 2))
            relapses += k % 2  # the k-th group of a prompt (k odd) follows a too-easy one
        sched.report(cands, np.array(rewards))
        regressed += sched.finish_step().metrics["snooze/regressed"]
    assert relapses > 10 and regressed == relapses


@pytest.mark.parametrize("skip", ["counter", "history"])
def test_history_is_kept_only_when_used(skip, tmp_path):
    sched = (
        _sched([1.0, 0.5])
        if skip == "history"
        else snooze.Scheduler({"d": [{"id": 0}, {"id": 1}]}, snooze.SchedulerConfig(audit=0.0, group_size=G))
    )
    columns = sched._parts.memory.tables[0].columns
    assert ("history" in columns) == (skip == "history") and (skip != "history" or columns["history"].shape[0] == 2)
    file = sched.save(tmp_path / "s")
    arrays = np.load(file)
    assert ("ds0.history" in arrays.files) == (skip == "history")


def test_a_counter_state_loads_into_history_mode_as_unseen(tmp_path):
    counter = snooze.Scheduler(
        {"d": [{"id": i, "p": 1.0} for i in range(6)]},
        snooze.SchedulerConfig(audit=0.0, batch_size=2, group_size=G, options=snooze.SnoozeOptions(factor=K)),
        seed=3,
    )
    for _ in range(4):
        counter.step(lambda c: _rewards(c, 0))
    counter.save(tmp_path / "s")
    history = counter.config.options.replace(skip="history", rule=None)  # rule=None: the history rule's defaults
    hist = snooze.Scheduler.load(
        tmp_path / "s", {"d": [{"id": i, "p": 1.0} for i in range(6)]}, config=counter.config.replace(options=history)
    )
    assert (
        hist._parts.memory.tables[0].columns["history"].tolist() == [0] * 6
        and hist._parts.memory.tables[0].counter.tolist() == counter._parts.memory.tables[0].counter.tolist()
    )

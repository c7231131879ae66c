"""Issue 27 item 4: with every prompt asleep the draw walk leaps (core/_leap.py) instead of counting
counters down one epoch at a time. The leap must change nothing but the time: every scenario below is
run with it and without it (the walk pass by pass), and the candidates issued and the whole state must
be the same after every step."""

from __future__ import annotations

import numpy as np
import pytest
from _driver import state_hash
from hypothesis import given, settings
from hypothesis import strategies as st

import snooze
import snooze.core._draw as draw
from snooze.core.policies.snooze import MAX_PERIOD


def _for_snooze(policy: str, options: snooze.SnoozeOptions) -> snooze.SnoozeOptions | None:
    """``options`` under ``policy="snooze"``; another policy takes its defaults."""
    return options if policy == "snooze" else None


def _run(seed: int, leap: bool, monkeypatch: pytest.MonkeyPatch) -> list:
    rng = np.random.default_rng(seed)
    D = int(rng.integers(1, 4))
    sizes = [int(rng.integers(1, 8)) for _ in range(D)]
    data = {f"d{d}": [{"id": i, "easy": bool(rng.random() < 0.85)} for i in range(n)] for d, n in enumerate(sizes)}
    policy = str(rng.choice(["snooze", "snooze", "filter"]))
    cfg = snooze.SchedulerConfig(
        audit=0.0,  # pass by pass, the walk would audit encounters the leap jumps over: compared without the audit
        batch_size=int(rng.integers(1, 5)),
        gen_batch_size=int(rng.integers(1, 7)),
        group_size=4,
        policy=policy,
        options=_for_snooze(  # drawn under any policy, so that the draws after it are the same
            policy,
            snooze.SnoozeOptions(
                factor=int(rng.integers(1, 9)),
                backoff=float(rng.choice([1.0, 2.0])),
                max=64,
                hard=bool(rng.random() < 0.3),
            ),
        ),
        mix=str(rng.choice(["stream", "quota"])),
        max_gen_rounds=int(rng.integers(1, 4)),
        epochs=None if rng.random() < 0.6 else int(rng.integers(2, 30)),
        shuffle=bool(rng.random() < 0.8),
        weights={f"d{d}": float(rng.choice([0.5, 1.0, 3.0])) for d in range(D)},
        carry_surplus=bool(rng.random() < 0.3),
    )
    with monkeypatch.context() as m:
        if not leap:
            m.setattr(draw, "asleep_all", lambda table: False)
        s = snooze.Scheduler(data, cfg, seed=seed)
        out = []
        for step in range(12):

            def roll(cands, step=step):
                return np.array(
                    [[1.0] * 4 if c.record["easy"] else ([0.0] * 4 if step % 3 else [1.0, 0, 1, 0]) for c in cands]
                )

            batch = s.step(roll)
            out.append(([(c.dataset, c.id) for c in batch.candidates], state_hash(s)))
            if s.exhausted:
                break
        return out


@pytest.mark.parametrize("seed", range(80))
def test_the_leap_issues_and_keeps_exactly_what_the_walk_pass_by_pass_does(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _run(seed, True, monkeypatch) == _run(seed, False, monkeypatch)


def test_a_leap_is_taken_and_its_counters_are_the_walk_s() -> None:
    """Factor 10**7 on one prompt: a step counts it down 10**7 encounters at once (it took 10**7 passes)."""
    s = snooze.Scheduler(
        {"d": [{"id": 0}]},
        snooze.SchedulerConfig(
            batch_size=1, group_size=4, options=snooze.SnoozeOptions(factor=10**7), max_gen_rounds=1, audit=0.0
        ),
    )
    s.step(lambda c: np.ones((len(c), 4)))
    s.step(lambda c: np.ones((len(c), 4)))  # asleep: skipped 10**7 times, then rolled out again
    m = s.metrics()
    assert m["snooze/skipped"] == 10**7 and m["gen/groups"] == 1
    assert s._parts.memory.tables[0].counter.tolist() == [10**7] and s._parts.streams[0].epoch == 10**7 + 2


def test_a_failed_round_after_a_leap_is_undone() -> None:
    s = snooze.Scheduler(
        {"d": [{"id": i} for i in range(3)]},
        snooze.SchedulerConfig(batch_size=3, group_size=4, options=snooze.SnoozeOptions(factor=1000), audit=0.0),
    )
    s.step(lambda c: np.ones((len(c), 4)))
    before = state_hash(s)

    def fail(cands):
        raise RuntimeError("rollout failed")

    with pytest.raises(RuntimeError):
        s.step(fail)
    assert state_hash(s) == before


def test_skip_history_with_a_huge_factor_gives_up_a_round_instead_of_walking_for_ever() -> None:
    """skip='history', factor 10**7, every prompt solved: each encounter is skipped with probability
    1 - 1e-7, and a draw walked about 10**7 passes per prompt (it never gave up). Now it gives up on the
    dataset after PATIENCE passes of skips: the step is short, at once."""
    from snooze.core.policies.history import PATIENCE

    cfg = snooze.SchedulerConfig(
        batch_size=4,
        group_size=4,
        options=snooze.SnoozeOptions(skip="history", factor=10**7, rule=snooze.HistoryOptions(weight=1.0)),
        max_gen_rounds=3,
        audit=0.0,
    )
    s = snooze.Scheduler({"d": [{"id": i} for i in range(8)]}, cfg)
    s.step(lambda c: np.ones((len(c), 4)))
    s.step(lambda c: np.ones((len(c), 4)))  # every prompt's pass rate is 1 now
    batch = s.step(lambda c: np.ones((len(c), 4)))
    m = s.metrics()
    assert len(batch.candidates) == 0 and m["gen/groups"] == 0
    assert (
        m["snooze/skipped"] == PATIENCE * 8 and m["gen/rounds"] == 1
    )  # the round gave up after PATIENCE passes of 8; none followed


def test_the_leap_holds_under_the_audit_an_asleep_prompt_wakes_at_its_own_encounter() -> None:
    """With the audit on, a walk that meets nothing awake still leaps: the audit samples the encounters a walk
    looks at, never the ones it leaps over. The one prompt (counter 1000) is drawn at its waking encounter,
    as a drawn prompt, not an audit, its counter counted down by arithmetic."""
    cfg = snooze.SchedulerConfig(
        batch_size=1, group_size=4, options=snooze.SnoozeOptions(factor=1000), max_gen_rounds=1, audit=0.2
    )
    s = snooze.Scheduler({"d": [{"id": 0}]}, cfg, seed=3)
    s.step(lambda c: np.ones((len(c), 4)))
    assert s._parts.memory.tables[0].counter.tolist() == [1000]
    cands = s.propose()
    assert len(cands) == 1 and s._parts.pending.audit.tolist() == [False]
    assert s._parts.memory.tables[0].counter.tolist() == [0] and s._parts.streams[0].epoch == 1001 + 1


@pytest.mark.timeout(120)
@settings(max_examples=30, deadline=None)
@given(
    share=st.sampled_from([5e-324, 1e-300, 1e-12, 1e-4, 0.05, 0.5]) | st.floats(5e-324, 0.9),
    factor=st.integers(1, MAX_PERIOD),
    prompts=st.integers(1, 16),
    mix=st.sampled_from(["stream", "quota"]),
)
def test_a_step_s_cost_does_not_depend_on_the_counters_whatever_the_audit(
    share: float, factor: int, prompts: int, mix: str
) -> None:
    """Every group too easy, every prompt asleep for ``factor`` encounters (up to the most a counter holds), the
    audit at any share down to the smallest positive float: the next step skips ``factor`` encounters of each
    prompt before any wakes (pass by pass: up to 2**31 epochs; any share above 0 used to turn the leap off),
    and the audit takes at most its budget of each round (``audit_budget``)."""
    from snooze.core._audit import audit_budget

    names = ["a"] if mix == "stream" or prompts < 2 else ["a", "b"]
    data = {n: [{"id": i} for i in range(prompts // len(names))] for n in names}
    n = sum(len(v) for v in data.values())
    cfg = snooze.SchedulerConfig(
        batch_size=n, group_size=4, options=snooze.SnoozeOptions(factor=factor), mix=mix, max_gen_rounds=2, audit=share
    )
    s = snooze.Scheduler(data, cfg, seed=1)
    s.step(lambda c: np.ones((len(c), 4)))  # a round draws every prompt: each is snoozed for ``factor`` encounters
    assert sum(t.asleep() for t in s._parts.memory.tables) == n
    s.step(lambda c: np.ones((len(c), 4)))
    m = s.metrics()
    assert m["snooze/skipped"] >= factor and m["gen/groups"] >= 1  # each prompt sat out its encounters, then woke
    budget = sum(audit_budget(share, cfg.gen_size, 1, 1, r) for r in range(1, m["gen/rounds"] + 1))
    assert m["snooze/audit/groups"] <= budget

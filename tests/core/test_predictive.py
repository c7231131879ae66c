"""``policy="predictive"`` (docs/concepts.md, "Predictive skipping"): the decision rule against a plain
model of it (hypothesis), its codes worked out by hand, and what it promises: unseen prompts are never
skipped, a skipped prompt comes back within its period, both sides are skipped, forgetting is counted."""

from __future__ import annotations

# audit=0.0 throughout: these tests check the skip rule alone
# (audited encounters would add issued prompts; tests/core/test_audit.py)
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reliability.predictive_model import PredictiveModel

import snooze
from snooze.core.classify import SIGNAL, TOO_EASY, TOO_HARD
from snooze.core.policies.predictive import N_CODES, RUN_CAP, category, decay, next_code

G = 4


def _rewards(p: float, seed: int, row: int, k: int) -> list[float]:
    """The k-th group of prompt ``row``: G rollouts right with probability ``p``, from its own seeded generator."""
    rng = np.random.default_rng([seed, row, k])
    return (rng.random(G) < p).astype(float).tolist()


def _sched(n: int, seed: int, **options) -> snooze.Scheduler:
    """``options``: the fields of :class:`snooze.PredictiveOptions` (its defaults for the rest). The guard is off:
    these tests watch the policy's own decisions, and their relapsing prompts would turn it on."""
    cfg = snooze.SchedulerConfig(
        guard=False,
        audit=0.0,
        batch_size=1000,
        group_size=G,
        options=snooze.PredictiveOptions(**options),
        max_gen_rounds=1000,
    )
    return snooze.Scheduler({"d": [{"id": i} for i in range(n)]}, cfg, seed=seed)


@settings(max_examples=50, deadline=None)
@given(
    rates=st.lists(st.sampled_from([0.0, 0.0, 0.3, 0.6, 0.95, 1.0, 1.0]), min_size=2, max_size=24),
    margin=st.sampled_from([0.25, 0.5, 1.0, 2.0]),
    recheck=st.sampled_from([0.1, 0.5, 1.0, 3.0]),
    backoff=st.sampled_from([1.0, 2.0, 3.5]),
    hard=st.sampled_from([None, 0.0, 0.3]),
    rounds=st.lists(st.integers(1, 9), min_size=1, max_size=3),
    steps=st.integers(1, 14),
    seed=st.integers(0, 2**16),
)
def test_issued_prompts_match_the_plain_rule(rates, margin, recheck, backoff, hard, rounds, steps, seed):
    n = len(rates)
    kw = dict(margin=margin, recheck=recheck, backoff=backoff, hard_margin=hard)
    sched = _sched(n, seed, **kw)
    model = PredictiveModel(n, seed, margin, recheck, backoff, margin if hard is None else hard)
    times = [0] * n
    for _ in range(steps):
        for k in rounds:
            skipped_before = sched._parts.step_metrics.scalars["snooze/skipped"]
            cands = sched.propose(k)
            want, skipped = model.draw(k)
            assert [c.row for c in cands] == want
            assert sched._parts.step_metrics.scalars["snooze/skipped"] - skipped_before == skipped
            if not cands:
                continue
            rewards = []
            for c in cands:
                rewards.append(_rewards(rates[c.row], seed, c.row, times[c.row]))
                times[c.row] += 1
            sched.report(cands, np.array(rewards))
            model.report([c.row for c in cands], rewards)
        sched.finish_step()
        model.end_step()
        cols = sched._parts.memory.tables[0].columns
        assert cols["code"].tolist() == model.code and cols["looked"].tolist() == model.looked
        assert cols["streak"].tolist() == model.streak
        assert (
            sched._parts.policy.rate[0].tolist() == model.rate and sched._parts.policy.clock == model.clock
        )  # the same numbers, not close ones
        assert sched._parts.policy.codes[0].T.tolist() == model.codes


def test_codes_by_hand() -> None:
    outcomes = np.array([TOO_EASY, SIGNAL, SIGNAL, TOO_HARD])
    assert category(outcomes, np.array([1.0, 0.75, 0.25, 0.0])).tolist() == [0, 1, 2, 3]
    code = np.zeros(1, dtype=np.uint8)
    seen = []
    for cat in [0, 0, 0, 3, 3, 1] + [0] * 10:  # three easy, two hard, one S+, then ten easy
        code = next_code(code, np.array([cat]))
        seen.append(int(code[0]))
    assert seen[:6] == [1, 2, 3, 1 + 3 * RUN_CAP, 2 + 3 * RUN_CAP, 1 + RUN_CAP]
    assert seen[6:] == [1, 2, 3, 4, 5, 6, 7, 8, 8, 8]  # the run length stops at RUN_CAP
    assert max(seen) < N_CODES
    assert decay(np.array([0, 64]), 64).tolist() == [1.0, 0.5]


def test_unseen_prompts_are_never_skipped() -> None:
    """However low every code's rate: each prompt's first encounter is rolled out."""
    sched = _sched(30, seed=1, margin=50.0)
    seen: set[int] = set()
    for _ in range(12):
        cands = sched.propose(5)
        fresh = {c.row for c in cands} - seen
        assert len(fresh) == min(5, 30 - len(seen)) or seen == set(range(30))
        seen |= {c.row for c in cands}
        sched.report(cands, np.ones((len(cands), G)))
        sched.finish_step()
    assert seen == set(range(30))


def test_both_sides_are_skipped_and_come_back_within_their_period() -> None:
    """Solved and hopeless prompts beside ones that give signal: after a look, a solved or hopeless
    prompt sits out at least half its period and at most one and a half, plus the wait for the stream to
    meet it again. Periods are counted in the dataset's generated groups: 2 passes of 60 prompts, no backoff."""
    n, recheck = 60, 2.0
    rates = [1.0] * 20 + [0.0] * 20 + [0.5] * 20
    sched = _sched(n, seed=4, recheck=recheck, backoff=1.0)
    looks: dict[int, list[int]] = {i: [] for i in range(n)}  # the dataset's clock (groups reported) at each look
    for _ in range(80):
        for _ in range(2):
            cands = sched.propose(8)
            for c in cands:
                looks[c.row].append(sched._parts.policy.clock)
            sched.report(cands, np.array([_rewards(rates[c.row], 4, c.row, len(looks[c.row])) for c in cands]))
        sched.finish_step()
    m = sched.metrics()
    assert m["total/skipped"] > 0
    period = recheck * n
    for i in range(40):  # solved and hopeless ones: after the policy has learned their codes, periodic looks
        # distinct clocks: a round that crosses an epoch edge may issue a prompt twice (both draws see the same memory)
        gaps = np.diff(np.unique(looks[i][3:]))
        # at most 1.5 periods, plus the groups until the stream next meets it (here about an epoch a step, 16 groups)
        assert len(gaps) >= 3 and (gaps >= period / 2).all() and (gaps <= period * 3 / 2 + 40).all(), (i, looks[i])
    signal_looks = np.mean([len(looks[i]) for i in range(40, 60)])
    assert signal_looks > 3 * np.mean([len(looks[i]) for i in range(40)])  # signal prompts come up far more often


def test_backoff_grows_the_period_of_a_prompt_that_stays_solved() -> None:
    rates = [1.0] * 10 + [0.5] * 30
    sched = _sched(40, seed=2, recheck=0.5, backoff=2.0)  # first period 20 groups (~3 steps)
    looks: dict[int, list[int]] = {i: [] for i in range(40)}
    for step in range(120):
        cands = sched.propose(6)
        for c in cands:
            looks[c.row].append(step)
        sched.report(cands, np.array([_rewards(rates[c.row], 2, c.row, len(looks[c.row])) for c in cands]))
        sched.finish_step()
    for i in range(10):
        gaps = np.diff(looks[i])
        assert gaps[-1] > 0.75 * 40 / 6 and gaps[-1] > gaps[1], (i, looks[i])  # later periods are longer than the first


def test_forgetting_is_counted_as_regressed() -> None:
    """A prompt solved, then failing half its rollouts: one regression at each relapse."""
    sched = _sched(5, seed=1, recheck=0.2)
    k = {i: 0 for i in range(5)}
    relapses = regressed = 0
    for _ in range(60):
        cands = sched.propose(2)
        rewards = []
        for c in cands:
            rewards.append([1.0] * G if k[c.row] % 2 == 0 else [1.0, 0.0] * (G // 2))
            relapses += k[c.row] % 2
            k[c.row] += 1
        sched.report(cands, np.array(rewards))
        regressed += sched.finish_step().metrics["snooze/regressed"]
    assert relapses > 10 and regressed == relapses


def test_state_is_five_bytes_a_prompt_and_resumes(tmp_path) -> None:
    sched = _sched(50, seed=3)
    extra = {
        name: col.dtype.itemsize
        for name, col in sched._parts.memory.tables[0].columns.items()
        if name not in ("counter", "flags", "streak")
    }
    assert extra == {"code": 1, "looked": 4}
    for _ in range(6):
        cands = sched.propose(7)
        sched.report(cands, np.array([_rewards(0.9, 3, c.row, 0) for c in cands]))
        sched.finish_step()
    sched.save(tmp_path / "s")
    back = snooze.Scheduler.load(tmp_path / "s", {"d": [{"id": i} for i in range(50)]})
    assert back._parts.policy.state_dict() == sched._parts.policy.state_dict() and back._parts.policy.clock == 42
    assert [c.row for c in back.propose(9)] == [c.row for c in sched.propose(9)]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s["meta"]["policy"].pop("clock"), "must hold 'clock' and 'datasets'"),
        (lambda s: s["meta"]["policy"]["datasets"]["d"].pop("relaxed"), "must hold 'rate', 'codes' and 'relaxed'"),
        (lambda s: s["meta"]["policy"]["datasets"]["d"]["rate"].append(1.0), "policy.datasets['d'].rate must be (2,)"),
        (lambda s: s["meta"]["policy"]["datasets"]["d"]["codes"][0].__setitem__(3, -1.0), "finite weights >= 0"),
        (lambda s: s["meta"]["policy"]["datasets"]["d"]["codes"][0].__setitem__(3, 1e9), "signal <= groups"),
        (lambda s: s["meta"]["policy"]["datasets"].update(other={}), "names datasets ['other']"),
        (lambda s: s["meta"]["policy"].__setitem__("clock", -2), "policy.clock=-2 is out of range"),
        (
            lambda s: s["meta"]["policy"]["datasets"]["d"].__setitem__("relaxed", 9),
            "policy.datasets['d'].relaxed=9 is out of range",
        ),
        (lambda s: s["arrays"]["ds0.code"].__setitem__(0, N_CODES), f"ds0.code holds values above {N_CODES - 1}"),
        (lambda s: s["arrays"]["ds0.looked"].__setitem__(0, -1), "ds0.looked holds values below 0"),
    ],
)
def test_a_corrupt_policy_state_is_refused_and_changes_nothing(change, message) -> None:
    sched = _sched(8, seed=0)
    for _ in range(3):
        cands = sched.propose(3)
        sched.report(cands, np.array([_rewards(0.5, 0, c.row, 0) for c in cands]))
        sched.finish_step()
    state = sched.state_dict()
    change(state)
    other = _sched(8, seed=0)
    before = other.state_dict()
    with pytest.raises(snooze.StateError, match=re.escape(message)):
        other.load_state_dict(state)
    after = other.state_dict()
    assert after["meta"] == before["meta"] and all(
        np.array_equal(after["arrays"][k], before["arrays"][k]) for k in before["arrays"]
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("margin", 0.0, "margin=0.0: must be a finite number > 0"),
        ("margin", float("nan"), "margin=nan"),
        ("recheck", 0, "recheck=0: must be a finite number of passes > 0"),
        ("backoff", 0.5, "backoff=0.5: must be a finite number >= 1.0"),
        ("hard_margin", -0.1, "hard_margin=-0.1: must be a finite number >= 0"),
    ],
)
def test_bad_options_are_config_errors(field, value, message) -> None:
    with pytest.raises(snooze.ConfigError, match="^" + re.escape(message)):
        snooze.SchedulerConfig(audit=0.0, policy="predictive", options={field: value})


def test_a_pool_skipped_through_relaxes_instead_of_starving_the_step() -> None:
    """Every prompt seen and predicted below the bar: a round still gets its prompts. Each whole epoch
    skipped halves the margin; the RELAX_LIMIT-th one stops skipping until the step ends."""
    from snooze.core.policies.predictive import RELAX_LIMIT

    n = 12
    sched = _sched(n, seed=5, margin=50.0, recheck=1000)
    cands = sched.propose(n)  # every prompt seen once, with signal: r = 1 and every code is below 50 x r
    sched.report(cands, np.array([[1.0, 0.0] * (G // 2)] * n))
    sched.finish_step()
    assert sched._parts.policy.low[0, 1:].all()
    for _ in range(3):  # now: whole epochs skipped, relaxations, then DAPO-like draws for the step
        cands = sched.propose(5)
        assert len(cands) == 5 and sched._parts.policy.relaxed[0] == RELAX_LIMIT
        sched.report(cands, np.array([[1.0, 0.0] * (G // 2)] * 5))
        sched.finish_step()
        assert sched._parts.policy.relaxed[0] == 0  # reset at the end of the step
    assert sched.metrics()["total/skipped"] >= 3 * RELAX_LIMIT * n

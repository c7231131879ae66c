"""Partial groups (issue 52, item 2): ``screen_size`` asks k of a prompt's G rollouts first, then the rest or none.

Every expectation is computed by hand from rewards that are a function of the prompt's id, through the public face
(``propose`` / ``report`` / ``wants_round`` / ``finish_step``, and ``step(rollout_fn)``)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pytest

import snooze
from snooze import Scheduler, SchedulerConfig
from snooze.core.classify import SIGNAL, TOO_EASY, TOO_HARD
from snooze.core.errors import ConfigError, PolicyConformanceError, ReportError, RewardError

G, K = 5, 2


def _data(n: int = 12) -> dict[str, Any]:
    return {"d": [{"id": i} for i in range(n)]}


def _row(i: int) -> list[float]:
    """Prompt ``i``'s five rewards: id % 3 == 0 disagree in the first two (1, 0, 1, 1, 1); 1: all correct; 2: all
    wrong."""
    return [[1.0, 0.0, 1.0, 1.0, 1.0], [1.0] * 5, [0.0] * 5][i % 3]


def _rows(cands: snooze.Candidates) -> list[list[float]]:
    """Each candidate's ``n`` rewards: a screen's first k, a rest's last G - k."""
    return [_row(c.id)[:K] if c.n == K else _row(c.id)[K:] for c in cands]


def _cfg(**kw: Any) -> SchedulerConfig:
    """DAPO's (``dynamic_sampling``, the surplus discarded) unless a test names another policy: the expectations are
    computed by hand for it."""
    base: dict[str, Any] = dict(
        batch_size=2, gen_batch_size=3, group_size=G, screen_size=K, shuffle=False, audit=0.0, policy="dynamic_sampling"
    )
    return SchedulerConfig(**{**base, **kw})


def _hash(s: Scheduler) -> str:
    sd = s.state_dict()
    h = hashlib.sha256(json.dumps({k: v for k, v in sd["meta"].items() if k != "run_id"}, sort_keys=True).encode())
    for name in sorted(sd["arrays"]):
        a = np.ascontiguousarray(sd["arrays"][name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}".encode() + a.tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("k", [1, 4, 5, 0, -2, 2.0, "2", True])  # (group_size 4 here)
def test_screen_size_is_checked_naming_field_value_and_what_is_allowed(k: Any) -> None:
    with pytest.raises(ConfigError, match=r"screen_size=.*2 <= screen_size < group_size=4"):
        SchedulerConfig(group_size=4, screen_size=k)


def test_screening_refuses_grpo_which_trains_on_every_group() -> None:
    with pytest.raises(ConfigError, match="screen_size=2 with policy='grpo'"):
        SchedulerConfig(group_size=4, screen_size=2, policy="grpo")


def test_whole_groups_by_default_every_candidate_asks_for_g() -> None:
    s = Scheduler(_data(), SchedulerConfig(batch_size=2, group_size=G))
    cands = s.propose()
    assert cands.n.tolist() == [G, G] and cands.width == G and [c.n for c in cands] == [G, G]
    assert "gen/screened" not in s.step(lambda c: np.array([_row(x.id) for x in c])).metrics  # keys only when on


def test_one_step_by_hand() -> None:
    """ids 0..: 0 disagrees in its screen (continues), 1 all correct and 2 all wrong (stop), 3 continues, 4 stops."""
    s = Scheduler(_data(), _cfg(), seed=0)
    c1 = s.propose()
    assert [c.id for c in c1] == [0, 1, 2] and c1.n.tolist() == [K, K, K]
    out = s.report(c1, _rows(c1), tokens=[10, 20, 30])
    assert out.tolist() == [SIGNAL, TOO_EASY, TOO_HARD]
    assert s.wants_round() and not s.batch_full and s.round == 1
    c2 = s.propose()  # the rest of id 0 (same ticket, n = G - k) first, then two fresh screens (1 promised < room 2)
    assert [(c.id, c.n, c.ticket) for c in c2] == [(0, G - K, c1[0].ticket), (3, K, 3), (4, K, 4)]
    with pytest.raises(RewardError, match="mixes screens"):  # one array cannot hold rows of 3 and rows of 2
        s.report(c2, np.zeros((3, K)))
    out = s.report(c2, _rows(c2))  # without tokens: ids 0 (rest), 3 (screen) and 4 (stopped) count as missing
    assert out.tolist() == [SIGNAL, SIGNAL, TOO_EASY]  # id 0 classified on all G: [1, 0, 1, 1, 1]
    assert s.in_batch(c2).tolist() == [True, False, False]
    c3 = s.propose()  # id 3's rest only: the screens that passed (1) fill the room (1), no fresh screen is drawn
    assert [(c.id, c.n) for c in c3] == [(3, G - K)]
    s.report(c3, _rows(c3), tokens=[8])
    assert s.batch_full and not s.wants_round()
    b = s.finish_step()
    assert [c.id for c in b.candidates] == [0, 3]
    np.testing.assert_array_equal(b.rewards, [_row(0), _row(3)])
    m = b.metrics
    # screens: 0..4 (5), stopped: 1, 2, 4 (3); rollouts: 5 screens x 2 + 2 rests x 3
    assert (m["gen/screened"], m["gen/screen_stopped"], m["gen/screen_continued"]) == (5, 3, 2)
    assert m["gen/rollouts"] == 5 * K + 2 * (G - K) == 16
    assert m["gen/groups"] == 5 and m["train/groups"] == 2 and m["surplus/discarded"] == 0 and m["gen/rounds"] == 3
    assert m["gen/tokens"] == 10 + 20 + 30 + 8
    assert m["gen/tokens_missing"] == 3  # id 4 (stopped), id 0 (its rest), id 3 (its screen)
    assert m["groups/dropped"] == 3 and m["total/screened"] == 5
    assert m["groups/signal"] == 2 and m["groups/too_easy"] == 2 and m["groups/too_hard"] == 1


def test_a_step_finishes_what_it_screened_past_a_full_batch_and_the_round_limit() -> None:
    """Every screen that passed gets its rest in the step, in a round that draws no fresh prompt."""
    data = {"d": [{"id": 3 * i} for i in range(10)]}  # every screen disagrees: all pass
    s = Scheduler(data, _cfg(batch_size=1), seed=0)
    c1 = s.propose()
    s.report(c1, _rows(c1))
    c2 = s.propose(1)  # one rest handed out; two wait
    assert [(c.id, c.n) for c in c2] == [(0, G - K)]
    s.report(c2, _rows(c2))
    assert s.batch_full and s.wants_round()
    c3 = s.propose()
    assert [(c.id, c.n) for c in c3] == [(3, G - K), (6, G - K)]  # no fresh screen with the batch full
    s.report(c3, _rows(c3))
    assert not s.wants_round()
    m = s.finish_step().metrics
    assert m["surplus/discarded"] == 2 and m["gen/rollouts"] == 3 * G

    s = Scheduler(_data(), _cfg(max_gen_rounds=1), seed=0)
    c1 = s.propose()
    s.report(c1, _rows(c1))
    assert s.round == 1 and s.wants_round()  # past max_gen_rounds: id 0's rest is still asked
    c2 = s.propose()
    assert [(c.id, c.n) for c in c2] == [(0, G - K)]
    s.report(c2, _rows(c2))
    assert not s.wants_round()
    b = s.finish_step()
    assert [c.id for c in b.candidates] == [0] and b.metrics["gen/rounds"] == 2


def test_step_with_a_rollout_fn_and_the_policy_learns_from_screens() -> None:
    """A stopped all-correct screen is too-easy evidence on k rollouts: snooze snoozes the prompt."""
    cfg = _cfg(policy="snooze", options=snooze.SnoozeOptions(factor=3))
    s = Scheduler(_data(), cfg, seed=0)
    b = s.step(_rows)
    assert [c.id for c in b.candidates] == [0, 3]
    assert b.metrics["snooze/new"] == 2  # ids 1 and 4, stopped after 2 correct rollouts
    counter = s._parts.memory.columns["counter"]
    assert counter[[1, 4]].tolist() == [3, 3] and counter[[0, 2, 3, 5]].tolist() == [0, 0, 0, 0]


def test_a_refused_report_changes_nothing() -> None:
    s = Scheduler(_data(), _cfg(), seed=0)
    c1 = s.propose()
    s.report(c1, _rows(c1))
    c2 = s.propose()
    before = _hash(s)
    bad = _rows(c2)
    bad[2] = [0.5, 7.0]  # a screen's row (k = 2), out of range: the rest in row 0 is not recorded either
    with pytest.raises(RewardError):
        s.report(c2, bad)
    with pytest.raises(RewardError, match="rows, expected one per"):
        s.report(c2, bad[:2])
    assert _hash(s) == before
    s.report(c2, _rows(c2))  # and the same report, right, goes through
    assert _hash(s) != before


def test_a_rest_is_reported_only_once_handed_out() -> None:
    s = Scheduler(_data(), _cfg(), seed=0)
    c1 = s.propose()
    s.report(c1, _rows(c1))
    assert [(c.id, c.n) for c in s.pending_candidates()] == []  # id 0's rest waits for the next propose()
    with pytest.raises(ReportError, match="was not proposed yet"):
        s.report(c1[:1], [[1.0, 1.0, 1.0]])
    c2 = s.propose()
    assert [(c.id, c.n) for c in s.pending_candidates()] == [(0, G - K), (3, K), (4, K)]
    assert s.cancel(c2[:1]) == 1  # its rest will never come: the group is given up
    s.report(c2[1:], _rows(c2[1:]))
    assert [c.id for c in s.propose()][:1] == [3]  # id 3's rest; nothing left of id 0


def test_a_screen_rule_that_breaks_its_contract_is_refused_and_undone() -> None:
    s = Scheduler(_data(), _cfg(), seed=0)
    s._parts.policy.screen = lambda memory, report: [True] * len(report)  # a list, not a bool array
    c1 = s.propose()
    before = _hash(s)
    with pytest.raises(PolicyConformanceError, match="screen\\(\\) returned list"):
        s.report(c1, _rows(c1))
    assert _hash(s) == before


def test_a_screen_rule_decides_the_rest() -> None:
    """The hook point: a policy whose screen() continues every prompt screens nothing away."""
    s = Scheduler(_data(), _cfg(batch_size=1), seed=0)
    s._parts.policy.screen = lambda memory, report: np.ones(len(report), dtype=bool)
    b = s.step(_rows)
    assert b.metrics["gen/screen_stopped"] == 0 and b.metrics["gen/screened"] == 3
    assert b.metrics["gen/rollouts"] == 3 * G  # every screen got its rest: whole groups


def _drive(s: Scheduler, steps: int, log: list[Any], restart: Any = None) -> Scheduler:
    """The step loop one action at a time; ``restart(s)`` after each action may hand back a restored scheduler."""
    cands = None
    while s.step_index < steps:
        if cands is None and s.wants_round():
            cands = s.propose()
            log.append(("propose", s.step_index, [(c.id, c.n, c.ticket) for c in cands]))
        elif cands:
            log.append(("report", s.step_index, s.report(cands, _rows(cands), [c.n for c in cands]).tolist()))
            cands = None
        else:
            b = s.finish_step()
            log.append(("finish", b.step, [c.id for c in b.candidates], b.metrics["gen/rollouts"]))
        if restart is not None:
            s = restart(s)
    return s


@pytest.mark.parametrize("via", ["memory", "files"])
def test_save_and_load_mid_screening_resumes_exactly(tmp_path: Any, via: str) -> None:
    """A save/load after every action (screens waiting for their rest among them) is the uninterrupted run."""
    cfg = _cfg(
        batch_size=3, gen_batch_size=4, policy="snooze", options=snooze.SnoozeOptions(factor=2), carry_surplus=True
    )
    data = _data(30)
    ref_log: list[Any] = []
    ref = _drive(Scheduler(data, cfg, seed=3), 8, ref_log)
    waited = []

    def restart(s: Scheduler) -> Scheduler:
        waited.append(s._parts.screens.waiting())
        if via == "memory":
            new = Scheduler(data, cfg, seed=3)
            new.load_state_dict(s.state_dict())
            return new
        s.save(tmp_path / "ckpt")
        return Scheduler.load(tmp_path / "ckpt", data)

    log: list[Any] = []
    out = _drive(Scheduler(data, cfg, seed=3), 8, log, restart)
    assert any(waited)  # some saves held screens waiting for their rest
    assert log == ref_log and _hash(out) == _hash(ref)
    assert out.metrics()["total/screened"] == ref.metrics()["total/screened"] > 0


def test_a_state_saved_mid_screening_needs_the_same_screen_size() -> None:
    s = Scheduler(_data(), _cfg(), seed=0)
    c1 = s.propose()
    s.report(c1, _rows(c1))
    with pytest.raises(snooze.StateMismatchError, match="screen_size"):
        Scheduler(_data(), _cfg(screen_size=3), seed=0).load_state_dict(s.state_dict())
    with pytest.raises(snooze.StateMismatchError, match="screen_size"):
        Scheduler(_data(), _cfg(screen_size=None), seed=0).load_state_dict(s.state_dict())


def test_a_corrupt_screening_state_is_refused() -> None:
    s = Scheduler(_data(), _cfg(), seed=0)
    c1 = s.propose()
    s.report(c1, _rows(c1))
    sd = s.state_dict()
    assert np.isnan(sd["arrays"]["step.rewards"]).sum() == 2 * (G - K)  # the two stopped screens' missing rollouts
    bad = {**sd, "arrays": {**sd["arrays"], "screens.ticket": np.array([99])}}
    with pytest.raises(snooze.StateError, match="screens"):
        Scheduler(_data(), _cfg(), seed=0).load_state_dict(bad)
    rewards = sd["arrays"]["step.rewards"].copy()
    rewards[1, 0] = np.nan  # a NaN inside a stopped screen's first k
    with pytest.raises(snooze.StateError, match="NaN outside the tail"):
        Scheduler(_data(), _cfg(), seed=0).load_state_dict({**sd, "arrays": {**sd["arrays"], "step.rewards": rewards}})
    loaded = Scheduler(_data(), _cfg(), seed=0)
    loaded.load_state_dict(sd)
    assert _hash(loaded) == _hash(s)


def test_propose_with_nothing_to_hand_out_is_no_round() -> None:
    s = Scheduler({"d": [{"id": 3 * i} for i in range(4)]}, _cfg(batch_size=1, gen_batch_size=1), seed=0)
    c1 = s.propose()
    s.report(c1, _rows(c1))
    s.report(s.propose(), [_row(0)[K:]])
    assert s.batch_full and not s.wants_round()
    assert len(s.propose()) == 0 and s.round == 2  # nothing waits and the batch is full: no round is counted


def test_a_round_whose_rollout_fn_raises_is_withdrawn_rests_included() -> None:
    """step(): a round that raises puts the scheduler back (the rests it handed out wait again); step() again
    continues to the uninterrupted run's batch."""
    ref = Scheduler(_data(), _cfg(), seed=0).step(_rows)
    s = Scheduler(_data(), _cfg(), seed=0)
    one = Scheduler(_data(), _cfg(), seed=0)  # one round done by hand: where the withdrawn round must leave s
    c1 = one.propose()
    one.report(c1, _rows(c1))
    calls: list[int] = []

    def flaky(cands: snooze.Candidates) -> list[list[float]]:
        calls.append(len(cands))
        if len(calls) == 2:  # the round with id 0's rest
            raise KeyboardInterrupt
        return _rows(cands)

    with pytest.raises(KeyboardInterrupt):
        s.step(flaky)
    assert s._parts.screens.waiting() == 1 and s.round == 1  # id 0's rest waits again; the round is not counted
    assert _hash(s) == _hash(one)
    b = s.step(_rows)
    assert [c.ticket for c in b.candidates] == [c.ticket for c in ref.candidates]
    np.testing.assert_array_equal(b.rewards, ref.rewards)
    assert b.metrics["gen/rollouts"] == ref.metrics["gen/rollouts"]


@pytest.mark.parametrize(
    "batch,group,k,screens",
    [(8, 16, 4, 32), (16, 8, 4, 32), (16, 8, 2, 64), (16, 8, 3, 43), (2, 5, 2, 5)],
)
def test_rounds_hold_dapos_rollouts_when_gen_batch_size_is_unset(batch: int, group: int, k: int, screens: int) -> None:
    """Unset, a round of fresh screens holds DAPO's round of ``batch_size`` whole groups (rounded up): the first
    round asks ``screens`` screens of k, and ``snooze/saved/*`` still estimates DAPO with rounds of ``batch_size``."""
    cfg = SchedulerConfig(batch_size=batch, group_size=group, screen_size=k, policy="dynamic_sampling", audit=0.0)
    assert (cfg.gen_size, cfg.whole_gen_size) == (screens, batch)
    assert screens * k >= batch * group > (screens - 1) * k
    cands = Scheduler(_data(100), cfg, seed=0).propose()
    assert len(cands) == screens and set(cands.n.tolist()) == {k}
    # set by hand, gen_batch_size is the prompts a round asks for, as without screening; unscreened, unchanged
    assert _cfg(gen_batch_size=3).gen_size == 3 == _cfg(gen_batch_size=3).whole_gen_size
    assert SchedulerConfig(batch_size=batch, group_size=group).gen_size == batch

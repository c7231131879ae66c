"""Bad calls and bad values, one test (or a few) per case: each bad call gets the project's error,
saying what is wrong, and leaves the scheduler exactly as it was (its whole state compared). States and
files: ``test_bad_state_input.py``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers_core import MIXED_KINDS, records, rewards_for, small_scheduler, snapshot

import snooze
from snooze.core.advantages import grpo_advantages
from snooze.core.classify import classify_groups


# -- case 1: candidates of another scheduler, or from before a restore ---------------------------------
def test_candidates_of_another_scheduler_are_refused_even_over_the_same_data() -> None:
    x, y_other = small_scheduler("a"), small_scheduler("z")
    y_same = small_scheduler("a")  # same data, config and seed as x
    cands = x.propose()
    for y in (y_other, y_same):
        y.propose()  # y has pending tickets with the same numbers
        before = snapshot(y)
        for method, args in (
            (y.report, (cands, rewards_for(cands))),
            (y.report, (list(cands), rewards_for(cands))),
            (y.cancel, (cands,)),
        ):
            with pytest.raises(snooze.ReportError, match="issued by another scheduler.*Nothing was recorded"):
                method(*args)
            assert snapshot(y) == before
    x.report(cands, rewards_for(cands))  # x still takes its own


def test_the_run_id_survives_save_and_load_and_a_stale_candidate_is_refused(tmp_path: Path) -> None:
    s = small_scheduler()
    s.step(rewards_for)
    s.save(tmp_path / "ck")
    early = s.propose()
    resumed = snooze.Scheduler.load(
        tmp_path / "ck", {"a": records(MIXED_KINDS, "a"), "b": records(MIXED_KINDS[::-1], "ba")}
    )
    assert resumed.run_id == s.run_id and all(c.run_id == s.run_id for c in early)
    s.load_state_dict(resumed.state_dict())  # back to the checkpoint: early's tickets are no longer pending...
    s.set_excluded(early[0].dataset, [early[0].id])  # ...and once more draws differ, ticket numbers name other prompts
    s.propose()
    before = snapshot(s)
    with pytest.raises(snooze.ReportError, match="is stale"):
        s.report(early[:1], rewards_for(early[:1]))
    assert snapshot(s) == before
    fresh = resumed.propose()
    resumed.report(fresh, rewards_for(fresh))  # the resumed run reports what it issued


def test_a_state_without_a_run_id_or_with_a_bad_one_is_refused_and_changes_nothing() -> None:
    s = small_scheduler()
    state = s.state_dict()
    del state["meta"]["run_id"]  # every state of this release has one (a pre-release's may not)
    t = small_scheduler()
    before = snapshot(t)
    with pytest.raises(snooze.StateError, match="incomplete or malformed.*run_id"):
        t.load_state_dict(state)
    assert snapshot(t) == before
    bad = s.state_dict()
    bad["meta"]["run_id"] = "not-hex"
    with pytest.raises(snooze.StateError, match="run_id='not-hex' is not a run id"):
        t.load_state_dict(bad)
    assert snapshot(t) == before


# -- case 3: step() completes or leaves the scheduler as it was -------------------------------------------
@pytest.mark.parametrize("policy", ["snooze", "predictive"])
@pytest.mark.parametrize("mix", ["stream", "quota"])
def test_a_failed_round_of_step_is_withdrawn_and_a_retry_continues_the_step(mix: str, policy: str) -> None:
    ref, s = (small_scheduler(mix=mix, gen_batch_size=2, policy=policy) for _ in range(2))
    rounds = {"n": 0}

    def fails_in_round_2(cands):
        rounds["n"] += 1
        if rounds["n"] == 2:
            return np.full((len(cands), 4), np.nan)
        return rewards_for(cands)

    def interrupted(cands):
        raise KeyboardInterrupt

    for step in range(5):
        before = snapshot(s)
        with pytest.raises(KeyboardInterrupt):
            s.step(interrupted)  # fails in the step's first round: nothing moved
        assert snapshot(s) == before and len(s.pending_candidates()) == 0
        rounds["n"] = 0
        try:
            got = s.step(fails_in_round_2)
        except snooze.RewardError as exc:
            assert "nothing was recorded" in str(exc)
            assert len(s.pending_candidates()) == 0 and s.round == 1  # the first round stays done
            got = s.step(rewards_for)
        want = ref.step(rewards_for)
        assert [c.key for c in got.candidates] == [c.key for c in want.candidates] and got.metrics == want.metrics, step
    assert snapshot(s)[0] == snapshot(ref)[0]


def test_step_without_a_function_is_a_config_error_before_any_round() -> None:
    s = small_scheduler()
    before = snapshot(s)
    with pytest.raises(snooze.ConfigError, match="rollout_fn must be a function of the candidates.*got int"):
        s.step(3)  # type: ignore[arg-type]
    assert snapshot(s) == before


@pytest.mark.parametrize("policy", ["snooze", "predictive"])  # predictive: its own state (rates, clock) too
def test_a_policy_that_raises_in_a_report_inside_step_leaves_memory_as_it_was(policy: str) -> None:
    s = small_scheduler(policy=policy)
    s.step(rewards_for)
    before = snapshot(s)
    real = s._parts.policy.report

    def half_way(memory, report):
        real(memory, report)  # writes the memory, then fails
        raise RuntimeError("plug-in policy bug")

    s._parts.policy.report = half_way
    with pytest.raises(RuntimeError, match="plug-in policy bug"):
        s.step(rewards_for)
    assert snapshot(s) == before


# -- case 4: set_weights checks what the config checks -----------------------------------------------------
@pytest.mark.parametrize(
    "weights, match",
    [
        ({"a": -1.0}, "must be a finite number >= 0"),
        ({"a": float("nan")}, "must be a finite number >= 0"),
        ({"a": float("inf")}, "must be a finite number >= 0"),
        ({"a": 0, "b": 0}, "at least one dataset"),
        ({"c": 1}, "unknown dataset"),
        ({}, "non-empty mapping"),
        ([("a", 1)], "non-empty mapping"),
        ({"a": "1"}, "must be a finite number"),
        ({"a": True}, "must be a finite number"),
        ({"a": 1e308, "b": 1e308}, "sum must be finite"),
    ],
)
def test_set_weights_refuses_what_the_config_refuses(weights, match, tmp_path: Path) -> None:
    s = small_scheduler()
    s.step(rewards_for)
    before = snapshot(s)
    with pytest.raises(snooze.ConfigError, match=match):
        s.set_weights(weights)
    if "unknown" not in match:  # the config does not know the datasets' names yet
        with pytest.raises(snooze.ConfigError, match=match):
            snooze.SchedulerConfig(weights=weights)
    assert snapshot(s) == before
    s.save(tmp_path / "ck")  # the run can still be saved and resumed
    snooze.Scheduler.load(tmp_path / "ck", {"a": records(MIXED_KINDS, "a"), "b": records(MIXED_KINDS[::-1], "ba")})


def test_numpy_weights_are_numbers() -> None:
    s = small_scheduler()
    s.set_weights({"a": np.float32(3.0), "b": np.int64(1)})
    assert s.weights.tolist() == [3.0, 1.0]


# -- case 7: rewards are real numbers, and a reward range whose width overflows is refused -------------------
@pytest.mark.parametrize(
    "make, match",
    [
        (lambda n: [[10**400] * 4] * n, "Python objects"),
        (lambda n: [["1"] * 4] * n, "strings"),
        (lambda n: [[b"1"] * 4] * n, "bytes"),
        (lambda n: np.ones((n, 4)) * (1 + 0j), "complex"),
        (lambda n: [[None] * 4] * n, "Python objects"),
        (lambda n: [[1, 0, 1]] * n, "shape"),
        (lambda n: np.full((n, 4), np.inf), "not finite"),
        (lambda n: np.full((n, 4), 2.0), "outside"),
    ],
)
def test_rewards_that_are_not_real_numbers_are_refused(make, match) -> None:
    s = small_scheduler()
    cands = s.propose()
    before = snapshot(s)
    with pytest.raises(snooze.RewardError, match=match):
        s.report(cands, make(len(cands)))
    assert snapshot(s) == before


def test_a_torch_tensor_that_requires_grad_gets_a_reward_error_that_says_detach() -> None:
    torch = pytest.importorskip("torch")
    s = small_scheduler()
    cands = s.propose()
    before = snapshot(s)
    with pytest.raises(snooze.RewardError, match=r"detach\(\)"):
        s.report(cands, torch.ones(len(cands), 4, requires_grad=True))
    assert snapshot(s) == before
    s.report(cands, torch.ones(len(cands), 4).bool())  # booleans are 0/1 rewards


def test_a_reward_range_whose_width_overflows_is_refused() -> None:
    with pytest.raises(snooze.ConfigError, match="finite width"):
        snooze.SchedulerConfig(reward_range=(-1e308, 1e308))
    assert classify_groups(np.array([[1e307, 1e307]]), (-1e307, 1e307)).tolist() == [snooze.TOO_EASY]


# -- case 8: ids are kept as they are, or refused -----------------------------------------------------------
def test_ids_that_do_not_fit_int64_or_hold_nul_are_refused() -> None:
    for ids, match in [
        (np.array([1, 2**63], dtype=np.uint64), "does not fit in a signed 64-bit"),
        ([1, 2**63], "does not fit in a signed 64-bit"),
        (["a", "b\x00"], "NUL character"),
    ]:
        with pytest.raises(snooze.DataError, match=match):
            snooze.Source.from_records("d", [{"id": i} for i in ids])
    ok = snooze.Source.from_records("d", [{"id": i} for i in np.array([0, 2**63 - 1], dtype=np.uint64)])
    assert ok.id_of(1) == 2**63 - 1 and type(ok.id_of(1)) is int


def test_one_long_id_does_not_widen_the_others() -> None:
    src = snooze.Source.from_records("d", [{"id": "x" * 5000}] + [{"id": str(i)} for i in range(5000)])
    assert src.ids.nbytes < 100_000  # a numpy str array would take 5001 * 5000 * 4 bytes = 100 MB
    assert src.id_of(0) == "x" * 5000 and src.id_of(7) == "6" and type(src.id_of(7)) is str
    assert src.rows_of(["6", "x" * 5000, "nope", 6]).tolist() == [7, 0, -1, -1]


# -- case 10: public helpers and config helpers ----------------------------------------------------------------
def test_classify_groups_and_grpo_advantages_check_their_arguments() -> None:
    good = np.array([[1.0, 1.0, 1.0, 1.0]])
    assert classify_groups(good).tolist() == [snooze.TOO_EASY]
    for call, error, match in [
        (lambda: classify_groups(good, (1.0, 0.0)), snooze.ConfigError, "finite low < high"),
        (lambda: classify_groups(good, easy_threshold=0.1, hard_threshold=0.5), snooze.ConfigError, "must be below"),
        (lambda: classify_groups(good, signal_tol=-1), snooze.ConfigError, "signal_tol"),
        (lambda: classify_groups([["a"] * 4]), snooze.RewardError, "strings"),
        (lambda: classify_groups([1.0, 0.0]), snooze.RewardError, "expected \\[groups, group_size\\]"),
        (lambda: classify_groups(good * 2), snooze.RewardError, "outside"),
        (lambda: grpo_advantages(good, scale=["group"]), snooze.ConfigError, "advantage scale"),
        (lambda: grpo_advantages(good, eps=float("nan")), snooze.ConfigError, "eps"),
        (lambda: grpo_advantages([1.0, 0.0]), snooze.RewardError, "2-D"),
        (lambda: grpo_advantages([[1.0]]), snooze.RewardError, "group_size >= 2"),
        (lambda: grpo_advantages([[np.nan, 1.0]]), snooze.RewardError, "NaN"),
    ]:
        with pytest.raises(error, match=match):
            call()


def test_set_excluded_checks_its_arguments_and_counts_each_prompt_once() -> None:
    s = small_scheduler()
    before = snapshot(s)
    for args, error, match in [
        (("a", "a1"), snooze.DataError, "ids must be a list"),
        (("a", None), snooze.DataError, "ids must be a list"),
        (("a", ["a1", "zz"]), snooze.DataError, "no prompt\\(s\\) with id \\['zz'\\]"),
        (("a", [["a1"]]), snooze.DataError, "no prompt"),
        ((0, ["a1"]), snooze.DataError, "unknown dataset 0"),
        (("a", ["a1"], "yes"), snooze.ConfigError, "must be True or False"),
    ]:
        with pytest.raises(error, match=match):
            s.set_excluded(*args)
        assert snapshot(s) == before
    assert s.set_excluded("a", ["a1", "a1", "a2"]) == 2


def test_config_helpers_refuse_unknown_fields_and_take_numpy_numbers() -> None:
    cfg = snooze.SchedulerConfig()
    with pytest.raises(snooze.ConfigError, match="unknown SchedulerConfig field\\(s\\) 'nope'"):
        cfg.replace(nope=1)
    with pytest.raises(snooze.ConfigError, match="unknown SchedulerConfig field"):
        snooze.SchedulerConfig.from_dict({"batch_size": 2, 3: 4})
    with pytest.raises(snooze.ConfigError, match="takes a mapping"):
        snooze.SchedulerConfig.from_dict([("batch_size", 2)])
    got = snooze.SchedulerConfig(
        batch_size=np.int64(8), easy_threshold=np.float32(0.5), options=snooze.SnoozeOptions(hard=np.bool_(True))
    )
    assert (got.batch_size, type(got.batch_size), type(got.easy_threshold), got.options.hard) == (8, int, float, True)
    assert snooze.SchedulerConfig.from_dict(got.to_dict()) == got
    for bad, match in [
        ({"batch_size": np.bool_(True)}, "must be an integer"),
        ({"batch_size": 2.0}, "must be an integer"),
        ({"carry_surplus": 1}, "True or False"),
    ]:
        with pytest.raises(snooze.ConfigError, match=match):
            snooze.SchedulerConfig(**bad)


def test_report_keeps_its_own_copy_of_the_rewards() -> None:
    """``report()`` kept the caller's float64 array: a caller that reused its buffer after the report changed the
    state and the batch (rewards 0.5, advantages 0, yet ``signal`` True). The report is what was reported."""
    s = snooze.Scheduler(
        {"toy": [{"id": f"q{i}"} for i in range(20)]}, snooze.SchedulerConfig(batch_size=4, group_size=4)
    )
    cands = s.propose()
    rewards = np.zeros((len(cands), 4))
    rewards[::2, 0] = 1.0
    s.report(cands, rewards)
    before = snapshot(s)
    rewards[:] = 0.5  # the caller's buffer, reused
    assert snapshot(s) == before
    batch = s.finish_step()
    assert batch.signal.all() and (batch.rewards.max(axis=1) == 1.0).all() and (batch.advantages != 0).any(axis=1).all()


def test_propose_refuses_an_n_beyond_int64_as_a_config_error() -> None:
    """``propose(10**20)`` raised a StateError blaming the state ("not written by this scheduler's own run")."""
    s = small_scheduler()
    before = snapshot(s)
    for n in (10**20, 2**63):
        with pytest.raises(
            snooze.ConfigError, match=r"propose\(n=\d+\): n is too large; a round issues at most 2\*\*63"
        ):
            s.propose(n)
        assert snapshot(s) == before
    with pytest.raises(snooze.ConfigError, match="n must be an integer >= 0"):
        s.propose(-1)
    assert len(s.propose(2)) == 2

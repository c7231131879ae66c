"""Property tests of the invariants of docs/concepts.md, "Policies" and "The step loop" (hypothesis)."""

from __future__ import annotations

# audit=0.0 throughout: these tests check the skip rule alone
# (audited encounters would add issued prompts; tests/core/test_audit.py)
import numpy as np
from helpers_core import records, reference_issued, rewards_for, stream_order
from hypothesis import given, settings
from hypothesis import strategies as st

import snooze
from snooze.core._mixing import largest_remainder

KINDS = st.sampled_from(["signal", "easy", "hard", "flat"])


@settings(max_examples=60, deadline=None)
@given(
    kinds=st.lists(KINDS, min_size=1, max_size=25),
    policy=st.sampled_from(["dynamic_sampling", "filter", "snooze"]),
    factor=st.integers(0, 6),
    round_size=st.integers(1, 7),
    rounds=st.integers(1, 12),
    seed=st.integers(0, 2**16),
)
def test_issued_prompts_match_the_reference_semantics(kinds, policy, factor, round_size, rounds, seed):
    options = {"factor": factor} if policy == "snooze" else None
    cfg = snooze.SchedulerConfig(audit=0.0, batch_size=round_size, group_size=4, policy=policy, options=options)
    sched = snooze.Scheduler({"d": records(kinds)}, cfg, seed=seed)
    issued: list[int] = []
    for _ in range(rounds):
        cands = sched.propose(round_size)
        if not cands:
            break
        issued += [c.row for c in cands]
        sched.report(cands, rewards_for(cands))
    assert issued == reference_issued(kinds, policy, factor, round_size, rounds, seed)


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 6), n=st.integers(2, 12), seed=st.integers(0, 999))
def test_snoozed_prompt_skips_exactly_its_next_k_encounters(k, n, seed):
    """An always-easy prompt is rolled out at encounters 0, k+1, 2(k+1), ... and skipped at all others."""
    kinds = ["easy"] + ["signal"] * (n - 1)
    cfg = snooze.SchedulerConfig(audit=0.0, batch_size=1, group_size=4, options=snooze.SnoozeOptions(factor=k))
    sched = snooze.Scheduler({"d": records(kinds)}, cfg, seed=seed)
    epochs = 3 * (k + 1)
    rolled = 0
    for _ in range(epochs * n // 2):  # one prompt per round; enough rounds to pass every encounter
        cands = sched.propose(1)
        rolled += cands[0].row == 0
        sched.report(cands, rewards_for(cands))
    stream = sched._parts.streams[0]
    position = int(np.flatnonzero(np.array(stream_order("d", n, seed, epochs=stream.epoch + 1)[-n:]) == 0)[0])
    encounters = stream.epoch + (stream.cursor > position)  # prompt 0 comes up once per epoch
    assert rolled == -(-encounters // (k + 1))  # encounters 0, k+1, 2(k+1), ... are rolled out


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 15), seed=st.integers(0, 999), rounds=st.integers(1, 8))
def test_filter_never_rolls_out_a_too_easy_prompt_again(n, seed, rounds):
    kinds = ["easy"] * n + ["signal"] * 3
    cfg = snooze.SchedulerConfig(audit=0.0, batch_size=2, group_size=4, policy="filter")
    sched = snooze.Scheduler({"d": records(kinds)}, cfg, seed=seed)
    seen: set[int] = set()
    for _ in range(rounds):
        cands = sched.propose(2)
        easy_rows = [c.row for c in cands if c.record["kind"] == "easy"]
        assert not seen & set(
            easy_rows
        )  # (one round may hold a prompt twice across an epoch edge: drawn before any report)
        seen |= set(easy_rows)
        sched.report(cands, rewards_for(cands))


@settings(max_examples=30, deadline=None)
@given(kinds=st.lists(KINDS, min_size=1, max_size=20), seed=st.integers(0, 999), m=st.integers(1, 9))
def test_dynamic_sampling_rolls_out_every_encounter(kinds, seed, m):
    cfg = snooze.SchedulerConfig(audit=0.0, batch_size=m, group_size=4, policy="dynamic_sampling")
    sched = snooze.Scheduler({"d": records(kinds)}, cfg, seed=seed)
    issued: list[int] = []
    for _ in range(5):
        cands = sched.propose(m)
        issued += [c.row for c in cands]
        sched.report(cands, rewards_for(cands))
    assert issued == stream_order("d", len(kinds), seed, epochs=100)[: len(issued)]
    assert sched.last_metrics.get("snooze/skipped", 0) == 0


@settings(max_examples=40, deadline=None)
@given(
    n_signal=st.integers(1, 10),
    n_zero=st.integers(0, 30),
    batch_size=st.integers(1, 12),
    policy=st.sampled_from(["dynamic_sampling", "filter", "snooze"]),
    seed=st.integers(0, 999),
)
def test_batch_is_full_of_signal_whenever_data_allows(n_signal, n_zero, batch_size, policy, seed):
    kinds = ["signal"] * n_signal + ["easy", "hard", "flat"] * (n_zero // 3 + 1)
    # Endless data with some signal prompts: enough rounds always fill the batch.
    cfg = snooze.SchedulerConfig(audit=0.0, batch_size=batch_size, group_size=4, policy=policy, max_gen_rounds=10_000)
    sched = snooze.Scheduler({"d": records(kinds)}, cfg, seed=seed)
    for _ in range(3):
        batch = sched.step(rewards_for)
        assert len(batch) == batch_size
        assert batch.signal.all()
        assert np.all(batch.rewards.std(axis=1) > 0)


@settings(max_examples=40, deadline=None)
@given(
    weights=st.lists(st.integers(1, 5), min_size=2, max_size=3),
    batch_size=st.integers(2, 16),
    seed=st.integers(0, 999),
    easy_share=st.integers(0, 3),
)
def test_quota_shares_stay_within_one_group_of_target(weights, batch_size, seed, easy_share):
    names = [f"d{i}" for i in range(len(weights))]
    data = {
        name: records(["easy"] * (easy_share * (i + 1)) + ["signal"] * 5, prefix=name) for i, name in enumerate(names)
    }
    cfg = snooze.SchedulerConfig(
        audit=0.0,
        batch_size=batch_size,
        group_size=4,
        mix="quota",
        weights=dict(zip(names, weights)),
        max_gen_rounds=1000,
    )
    sched = snooze.Scheduler(data, cfg, seed=seed)
    w = np.array(weights, dtype=float)
    exact = batch_size * w / w.sum()
    for _ in range(4):
        batch = sched.step(rewards_for)
        counts = np.array([sum(c.dataset == n for c in batch.candidates) for n in names])
        assert counts.sum() == batch_size
        assert np.all(np.abs(counts - exact) < 1.0 + 1e-9)
        assert counts.tolist() == largest_remainder(batch_size, w).tolist()


@settings(max_examples=60, deadline=None)
@given(
    kinds_a=st.lists(KINDS, min_size=1, max_size=12),
    kinds_b=st.lists(KINDS, min_size=1, max_size=12),
    policy=st.sampled_from(["grpo", "dynamic_sampling", "filter", "snooze"]),
    mix=st.sampled_from(["stream", "quota"]),
    carry=st.booleans(),
    on_short=st.sampled_from(["partial", "pad"]),
    batch_size=st.integers(1, 8),
    gen=st.integers(1, 10),
    rounds=st.integers(1, 4),
    epochs=st.sampled_from([None, 1, 2]),
    seed=st.integers(0, 999),
)
def test_metrics_add_up(kinds_a, kinds_b, policy, mix, carry, on_short, batch_size, gen, rounds, epochs, seed):
    cfg = snooze.SchedulerConfig(
        audit=0.0,
        batch_size=batch_size,
        gen_batch_size=gen,
        group_size=4,
        policy=policy,
        mix=mix,
        carry_surplus=carry,
        on_short=on_short,
        max_gen_rounds=rounds,
        epochs=epochs,
        options={"factor": 2} if policy == "snooze" else None,
    )
    sched = snooze.Scheduler({"a": records(kinds_a, "a"), "b": records(kinds_b, "b")}, cfg, seed=seed)
    totals = {"gen": 0, "train": 0}

    for _ in range(5):
        m = sched.step(rewards_for).metrics
        assert m["train/size"] <= batch_size
        assert m["gen/rollouts"] == 4 * m["gen/groups"]
        lhs = m["gen/groups"] + m["surplus/carried_in"]
        rhs = m["train/size"] + m["groups/dropped"] + m["surplus/discarded"] + m["surplus/carried_out"]
        assert lhs == rhs
        for d in ("a", "b"):
            p = f"dataset/{d}/"
            assert m[p + "gen_groups"] + m[p + "carried_in"] == (
                m[p + "batch_groups"] + m[p + "dropped"] + m[p + "discarded"] + m[p + "carried_out"]
            )
        assert sum(m[f"dataset/{d}/gen_groups"] for d in ("a", "b")) == m["gen/groups"]
        assert sum(m[f"groups/{k}"] for k in ("signal", "too_easy", "too_hard", "flat")) == m["gen/groups"]
        totals["gen"] += m["gen/groups"]
        totals["train"] += m["train/groups"]

        assert m["total/gen_groups"] == totals["gen"]
        assert m["total/train_groups"] == totals["train"]


@settings(max_examples=30, deadline=None)
@given(wa=st.integers(1, 4), wb=st.integers(1, 4), seed=st.integers(0, 999), factor=st.integers(0, 5))
def test_stream_mix_holds_weights_over_encounters_and_gives_skipped_draws_away(wa, wb, seed, factor):
    """Stream mix interleaves *encounters* by weight; a snoozed prompt's encounter is replaced from the
    mixed stream, so time saved on a mastered dataset goes to the others (docs/concepts.md, "Mixing datasets")."""
    data = {"easy": records(["easy"] * 20, "e"), "sig": records(["signal"] * 20, "s")}
    cfg = snooze.SchedulerConfig(
        audit=0.0,
        batch_size=8,
        group_size=4,
        options=snooze.SnoozeOptions(factor=factor),
        weights={"easy": wa, "sig": wb},
    )
    sched = snooze.Scheduler(data, cfg, seed=seed)
    issued = {"easy": 0, "sig": 0}
    for _ in range(30):
        cands = sched.propose()
        for c in cands:
            issued[c.dataset] += 1
        sched.report(cands, rewards_for(cands))
    total = sched.drawn.sum()
    exact = total * np.array([wa, wb]) / (wa + wb)
    assert np.all(np.abs(sched.drawn - exact) <= 1.0 + 1e-9)  # stride scheduling: encounters within one of target
    if factor == 0:
        assert issued["easy"] == sched.drawn[0]  # DAPO: every encounter is rolled out
    else:
        assert issued["easy"] < sched.drawn[0]  # snoozed encounters were skipped...
        assert issued["sig"] / (issued["sig"] + issued["easy"]) > wb / (wa + wb)  # ...and their draws went to "sig"

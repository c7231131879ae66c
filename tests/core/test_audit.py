"""The audit of skipped encounters and the exhaustion diagnosis (snooze.core._audit, ._diagnosis; issue 24 items
4, 5)."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
from helpers_core import bernoulli_roller, id_pool
from hypothesis import given, settings
from hypothesis import strategies as st

import snooze
from snooze.core._audit import audit_budget
from snooze.core._diagnosis import EXHAUSTED_WINDOW
from snooze.core._hash import audit_uniform

G = 4


class _Recorder:
    """The plain reference model of the audit: wraps the scheduler's walk and replays the encounters it spent,
    one by one, under the snooze counter rule (an encounter of a prompt whose counter is above 0 is skipped and
    counts it down); for every walk it keeps the skipped encounters' rows, the ones the stateless hash picks,
    the round's budget (``audit_budget``) and the audits the scheduler issued."""

    def __init__(self, sched: snooze.Scheduler) -> None:
        self.skipped: list[np.ndarray] = []  # rows of skipped encounters
        self.hits: list[np.ndarray] = []  # rows the hash picks, in stream order
        self.budgets: list[int] = []
        self.issued_audits: list[np.ndarray] = []  # rows the scheduler issued as audits
        inner, stream, share = sched._walk, sched._parts.streams[0], sched.config.audit

        def walk(need: int, only: int | None = None):  # noqa: ANN202
            before, counter = (stream.epoch, stream.cursor), sched._parts.memory.tables[0].counter.copy()
            self.budgets.append(audit_budget(share, sched.config.gen_size, sched.seed, sched.step_index, sched.round))
            w = inner(need, only)
            rows, epochs = _skipped_encounters(stream, before, (stream.epoch, stream.cursor), counter)
            self.skipped.append(rows)
            u = np.array([audit_uniform(sched.seed, stream.key, e, np.array([r]))[0] for r, e in zip(rows, epochs)])
            self.hits.append(rows[u < share] if rows.size else rows)
            self.issued_audits.append(w.rows()[w.audit()])
            return w

        sched._walk = walk  # type: ignore[method-assign]


def _skipped_encounters(stream, before: tuple[int, int], after: tuple[int, int], counter: np.ndarray):  # noqa: ANN001, ANN202
    """Rows and epochs of the encounters from ``before`` to ``after`` (each ``(epoch, cursor)``) that the
    counter rule skips, ``counter`` the snooze counters at ``before`` (a plain re-walk of the permutations)."""
    rows, epochs, counter = [], [], counter.astype(np.int64)
    for epoch in range(before[0], after[0] + 1):
        perm = np.random.default_rng([stream.seed, stream.key, epoch]).permutation(stream.n)
        lo = before[1] if epoch == before[0] else 0
        hi = after[1] if epoch == after[0] else stream.n
        for r in perm[lo:hi].tolist():
            if counter[r] > 0:
                counter[r] -= 1
                rows.append(r)
                epochs.append(epoch)
    return np.array(rows, dtype=np.int64), epochs


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(60, 200),
    share=st.sampled_from([0.05, 0.2, 0.5]),
    easy=st.floats(0.3, 0.9),
    seed=st.integers(0, 2**16),
)
def test_the_audit_is_a_random_sample_of_the_skipped_encounters_within_its_budget(
    n: int, share: float, easy: float, seed: int
) -> None:
    """A pool with known pass rates (a share ``easy`` near-mastered, p in [0.85, 1]; the rest p in [0.2, 0.8];
    five never solved, so some prompt is always awake and no walk leaps). In every round the audits are exactly
    the first skipped encounters the hash picks (the reference model), as many as the round's budget allows
    (``share x`` its candidates, rounded at random), so the audit never costs more than its share of
    generation; the audited encounters' pass rates are those of the skipped ones (a random sample: their mean
    chance of a signal group, q = 1 - p^G - (1-p)^G, within 4.5 standard errors), and the audit's signal count
    is what their q say (within 4.5 standard deviations of the rollouts)."""
    rng = np.random.default_rng(seed)
    p = np.where(rng.random(n) < easy, rng.uniform(0.85, 1.0, n), rng.uniform(0.2, 0.8, n))
    p[rng.random(n) < 0.3] = 1.0  # some always pass: they are snoozed again and again
    p[:5] = 0.0  # never solved: never snoozed (the hard side is not), always awake
    cfg = snooze.SchedulerConfig(  # (the guard off: it would roll out every skip once near-mastered prompts relapse)
        batch_size=8, group_size=G, options=snooze.SnoozeOptions(factor=5), audit=share, guard=False
    )
    sched = snooze.Scheduler(id_pool(n), cfg, seed=seed)
    rec = _Recorder(sched)
    roll = bernoulli_roller(p, seed + 1)
    for _ in range(40):
        sched.step(roll)
    m = sched.metrics()
    for hits, budget, issued in zip(rec.hits, rec.budgets, rec.issued_audits):
        assert issued.tolist() == hits[:budget].tolist()  # the first hits, up to the budget, in stream order
    issued = np.concatenate(rec.issued_audits)
    assert (
        m["total/audit_groups"] == issued.size <= sum(rec.budgets) <= share * m["total/gen_groups"] + len(rec.budgets)
    )
    skipped = np.concatenate(rec.skipped)
    assert skipped.size >= issued.size and m["total/audit_given_up"] >= 0
    q_of = 1.0 - p**G - (1.0 - p) ** G
    if issued.size >= 20:
        q_skipped, q_audited = q_of[skipped], q_of[issued]
        assert abs(q_audited.mean() - q_skipped.mean()) <= 4.5 * q_skipped.std() / math.sqrt(issued.size) + 1e-9
    audit_signal = round(m["total/audit_signal_rate"] * m["total/audit_groups"])
    sd = math.sqrt(float(np.sum(q_of[issued] * (1 - q_of[issued])))) + 1e-9
    assert abs(audit_signal - q_of[issued].sum()) <= 4.5 * sd + 1e-9


def test_audit_groups_leave_the_policys_memory_as_if_skipped() -> None:
    """Every prompt always passes. After a round, a drawn prompt's too-easy group snoozes it (counter 5); an
    audited one's counter stays where the skip left it (never reported to the policy); no audit group is
    trained on or kept as padding (none has signal)."""
    cfg = snooze.SchedulerConfig(
        batch_size=10, group_size=G, policy="snooze", options={"factor": 5}, audit=0.3, on_short="pad", max_gen_rounds=1
    )
    sched = snooze.Scheduler(id_pool(10), cfg, seed=3)
    sched.step(bernoulli_roller(np.ones(10), 0))  # every prompt snoozed for 5
    assert (sched._parts.memory.tables[0].counter == 5).all()
    kinds = set()
    for _ in range(20):
        cands = sched.propose(4)
        audit = sched._parts.pending.audit.copy()
        kinds |= set(audit.tolist())
        before = sched._parts.memory.tables[0].counter[cands.row].copy()
        sched.report(cands, np.ones((len(cands), G)))
        after = sched._parts.memory.tables[0].counter[cands.row]
        once = (
            np.unique(cands.row, return_counts=True)[1][np.unique(cands.row, return_inverse=True)[1]] == 1
        )  # a row met twice in a round (two epochs) adds twice
        assert (after[audit & once] == before[audit & once]).all() and (
            after[~audit & once] == before[~audit & once] + 5
        ).all()
        batch = sched.finish_step()
        assert not batch.signal.any() and set(batch.candidates.ticket.tolist()).isdisjoint(cands.ticket[audit].tolist())
    m = sched.metrics()
    assert kinds == {True, False}  # both audited and drawn prompts were checked
    assert m["total/audit_signal_rate"] == 0.0 and m["total/audit_pass_rate"] == 1.0 and m["total/audit_groups"] > 0


def test_resume_with_the_audit_on_is_exact(tmp_path) -> None:  # noqa: ANN001
    rng = np.random.default_rng(0)
    p = np.where(rng.random(120) < 0.5, 0.97, 0.5)
    cfg = snooze.SchedulerConfig(batch_size=6, group_size=G, policy="snooze", audit=0.3)

    def rollout(c):  # noqa: ANN001, ANN202 - rewards a pure function of (prompt, ticket): the same after a resume
        return np.stack(
            [(np.random.default_rng([int(r), int(t)]).random(G) < p[r]).astype(float) for r, t in zip(c.row, c.ticket)]
        )

    whole = snooze.Scheduler(id_pool(120), cfg, seed=5)
    part = snooze.Scheduler(id_pool(120), cfg, seed=5)
    lines_whole = [whole.step(rollout).metrics for _ in range(30)]
    lines = [part.step(rollout).metrics for _ in range(12)]
    cands = part.propose()  # mid-step, candidates out (audits among them)
    part.save(tmp_path / "s")
    back = snooze.Scheduler.load(tmp_path / "s", id_pool(120))
    assert back.config.audit == 0.3
    assert np.array_equal(back._parts.pending.audit, part._parts.pending.audit)
    back.report(back.pending_candidates(), rollout(cands))
    lines += [back.step(rollout).metrics for _ in range(18)]  # the first continues the step in progress
    assert lines == lines_whole
    assert lines_whole[-1]["total/audit_groups"] > 0
    assert back.state_dict()["meta"]["metrics"] == whole.state_dict()["meta"]["metrics"]


@pytest.mark.parametrize("bad", [1.0, -0.1, float("nan"), float("inf"), True, "0.1", None])
def test_a_bad_audit_share_is_refused_and_changes_nothing(bad: object) -> None:
    cfg = snooze.SchedulerConfig(audit=0.1)
    before = cfg.to_dict()
    with pytest.raises(snooze.ConfigError, match=r"audit=.*must be a finite number in \[0, 1\)"):
        cfg.replace(audit=bad)
    assert cfg.to_dict() == before


def _run(p: np.ndarray, steps: int, caplog: pytest.LogCaptureFixture, **cfg) -> list[dict]:  # noqa: ANN003
    sched = snooze.Scheduler(id_pool(p.size), snooze.SchedulerConfig(batch_size=8, group_size=G, **cfg), seed=0)
    with caplog.at_level(logging.WARNING, logger="snooze"):
        return [sched.step(bernoulli_roller(p, 2)).metrics for _ in range(steps)]


@pytest.mark.parametrize("policy", ["dynamic_sampling", "snooze"])
def test_a_used_up_pool_warns_once_with_the_numbers(policy: str, caplog: pytest.LogCaptureFixture) -> None:
    lines = _run(np.ones(100), 40, caplog, policy=policy)
    warnings = [r.getMessage() for r in caplog.records if "the pool is used up" in r.getMessage()]
    assert len(warnings) == 1 and "lower max_gen_rounds" in warnings[0] and "trained on 0 of the" in warnings[0]
    assert [m["gen/exhausted"] for m in lines] == [0] * (EXHAUSTED_WINDOW - 1) + [1] * (40 - EXHAUSTED_WINDOW + 1)


def test_a_healthy_pool_does_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    lines = _run(np.full(100, 0.5), 40, caplog, policy="dynamic_sampling")
    assert not [r for r in caplog.records if "the pool is used up" in r.getMessage()]
    assert all(m["gen/exhausted"] == 0 for m in lines)


def test_the_exhaustion_warning_is_given_once_per_run_across_a_resume(tmp_path, caplog) -> None:  # noqa: ANN001
    cfg = snooze.SchedulerConfig(batch_size=8, group_size=G, policy="dynamic_sampling")
    sched = snooze.Scheduler(id_pool(50), cfg, seed=0)
    with caplog.at_level(logging.WARNING, logger="snooze"):
        for _ in range(EXHAUSTED_WINDOW + 2):
            sched.step(bernoulli_roller(np.ones(50), 0))
        sched.save(tmp_path / "s")
        back = snooze.Scheduler.load(tmp_path / "s", id_pool(50))
        for _ in range(5):
            assert back.step(bernoulli_roller(np.ones(50), 0)).metrics["gen/exhausted"] == 1
    assert sum("the pool is used up" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("policy", ["dynamic_sampling", "snooze", "filter"])
def test_a_cold_start_is_not_called_a_used_up_pool(policy: str, caplog: pytest.LogCaptureFixture) -> None:
    """Nothing solved yet (every group too hard) bounds every step at max_gen_rounds as a used-up pool does, but
    the advice is the opposite: the run is about to learn. ``gen/unsolved`` says so, ``gen/exhausted`` does not,
    and the one warning says to keep going (never "stop")."""
    lines = _run(np.zeros(100), 40, caplog, policy=policy)
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "the pool is used up" in m]
    unsolved = [m for m in messages if "beyond the model for now" in m]
    assert len(unsolved) == 1 and "keep going" in unsolved[0] and "stop" not in unsolved[0]
    assert [m["gen/unsolved"] for m in lines] == [0] * (EXHAUSTED_WINDOW - 1) + [1] * (40 - EXHAUSTED_WINDOW + 1)
    assert all(m["gen/exhausted"] == 0 for m in lines)


def test_which_side_the_round_limit_ran_out_on_follows_the_pool(caplog: pytest.LogCaptureFixture) -> None:
    """A pool of mostly solved prompts and a few unsolved ones is used up (too easy dominates); the same mix the
    other way round is unsolved. A pool that learns (half the rollouts right) is neither."""
    easy = np.where(np.arange(100) < 80, 1.0, 0.0)
    assert _run(easy, EXHAUSTED_WINDOW + 1, caplog, policy="dynamic_sampling")[-1]["gen/exhausted"] == 1
    hard = 1.0 - easy
    assert _run(hard, EXHAUSTED_WINDOW + 1, caplog, policy="dynamic_sampling")[-1]["gen/unsolved"] == 1
    healthy = _run(np.full(100, 0.5), EXHAUSTED_WINDOW + 1, caplog, policy="dynamic_sampling")[-1]
    assert healthy["gen/exhausted"] == healthy["gen/unsolved"] == 0


# -- the audit as one component (issue 49 build 1) -------------------------------------------------------------
def _snoozing(seed: int = 1) -> snooze.Scheduler:
    """A pool of always-passing prompts but five: after a few steps most encounters are skipped, so the audit has
    skipped encounters to sample and a budget to spend in every round."""
    p = np.ones(60)
    p[:5] = 0.5
    cfg = snooze.SchedulerConfig(batch_size=4, group_size=G, policy="snooze", options={"factor": 5}, audit=0.3)
    sched = snooze.Scheduler(id_pool(60), cfg, seed=seed)
    roll = bernoulli_roller(p, seed)
    for _ in range(6):
        sched.step(roll)
    return sched


def test_a_round_that_raises_leaves_the_audit_as_it_was() -> None:
    """The round's budget and its evidence are undone with the round: the audit's state after a rollout that
    raises is the state before it, though the round had set a budget and counted skips."""
    sched = _snoozing()
    audit = sched._parts.audit
    before = audit.state_dict()
    seen: list[dict] = []

    def boom(cands):  # noqa: ANN001, ANN202
        seen.append(audit.state_dict())
        raise RuntimeError("rollout failed")

    with pytest.raises(RuntimeError):
        sched.step(boom)
    assert seen and seen[0] != before  # the round had moved the audit (its budget, the skips it counted)
    assert seen[0]["step"]["skips"] > before["step"]["skips"]
    assert audit.state_dict() == before


def test_the_rounds_budget_is_saved_and_loaded_with_the_state() -> None:
    sched = _snoozing()
    sched.propose()  # mid-step: the round's budget partly spent
    state = sched.state_dict()
    saved = state["meta"]["metrics"]["diagnosis"]
    assert saved["budget_left"] == sched._parts.audit.left
    back = snooze.Scheduler(id_pool(60), sched.config, seed=1)
    back.load_state_dict(state)
    assert back._parts.audit.state_dict() == sched._parts.audit.state_dict()
    del saved["budget_left"]  # a state written before the field: nothing left to audit until the next round
    back.load_state_dict(state)
    assert back._parts.audit.left == 0


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3", None, 2**63])
def test_a_bad_budget_in_a_state_is_refused_and_changes_nothing(bad: object) -> None:
    sched = _snoozing()
    state = sched.state_dict()
    state["meta"]["metrics"]["diagnosis"]["budget_left"] = bad
    fresh = snooze.Scheduler(id_pool(60), sched.config, seed=1)
    before = fresh.state_dict()["meta"]
    with pytest.raises(snooze.StateError, match="budget_left"):
        fresh.load_state_dict(state)
    assert fresh.state_dict()["meta"] == before


def test_outside_core_nothing_imports_the_audit_or_memory_privates() -> None:
    """issue 50 part 2, the strays: what the analysis needs of the audit (the saved-groups estimator,
    ``snooze.core.saved``) and of the prompt memory (``snooze.core.memory``) is public; no module outside
    ``snooze/core`` imports the audit's, the diagnosis's, the hash's or the memory's private modules."""
    import ast
    from pathlib import Path

    root = Path(snooze.__file__).parent
    private = {f"snooze.core.{m}" for m in ("_audit", "_diagnosis", "_hash", "_memory")}
    found = []
    for path in root.rglob("*.py"):
        if path.is_relative_to(root / "core"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            found += [f"{path.relative_to(root)}: {n}" for n in names if n in private]
    assert not found, found


def test_the_public_memory_helpers_say_what_the_flags_say() -> None:
    """``snooze.core.memory`` (what a replay needs of the prompt memory): a fresh memory with the policy's columns,
    and which flags are passed over (retired or excluded; a snoozed-for-being-easy prompt is not)."""
    from snooze.core import memory
    from snooze.core._memory import EASY_SNOOZED, EXCLUDED, RETIRED
    from snooze.core.policies import Context, make_policy

    policy = make_policy("snooze", snooze.SnoozeOptions(skip="history"), Context(("d",), (3,), G, 0))
    mem = memory.policy_memory(3, policy)
    assert set(mem.columns) == {"counter", "flags", "streak", "history"}
    assert all(len(c) == 3 and not c.any() for c in mem.columns.values())
    flags = np.array([0, RETIRED, EXCLUDED, EASY_SNOOZED, RETIRED | EASY_SNOOZED], dtype=np.uint8)
    assert memory.passed_over(flags).tolist() == [False, True, True, False, True]
    assert [memory.passed_over(int(f)) for f in flags] == [False, True, True, False, True]
    assert memory.passed_over(np.uint8(EXCLUDED)) is True

"""Small, obviously-correct helpers shared by the core tests."""

from __future__ import annotations

import zlib

import numpy as np

import snooze

KIND_REWARDS = {
    "signal": [1.0, 0.0, 1.0, 0.0],
    "easy": [1.0, 1.0, 1.0, 1.0],
    "hard": [0.0, 0.0, 0.0, 0.0],
    "flat": [0.5, 0.5, 0.5, 0.5],
}


MIXED_KINDS = ["signal", "easy", "hard", "signal", "easy", "flat", "signal", "easy", "signal"]


def records(kinds: list[str], prefix: str = "p") -> list[dict]:
    return [{"id": f"{prefix}{i}", "kind": k} for i, k in enumerate(kinds)]


def rewards_for(cands: list[snooze.Candidate], group_size: int = 4) -> np.ndarray:
    """Deterministic rewards from each record's ``kind`` (repeated to ``group_size``)."""
    out = np.array([KIND_REWARDS[c.record["kind"]] for c in cands], dtype=float).reshape(-1, 4)
    return np.tile(out, (1, group_size // 4 + 1))[:, :group_size]


def stream_order(name: str, n: int, seed: int, epochs: int) -> list[int]:
    """The encounter order of a dataset: a seeded permutation per epoch.

    Straight from docs/concepts.md ("Streams and epochs").
    """
    key = zlib.crc32(name.encode())
    return [int(r) for e in range(epochs) for r in np.random.default_rng([seed, key, e]).permutation(n)]


def reference_issued(
    kinds: list[str], policy: str, factor: int, round_size: int, rounds: int, seed: int, name: str = "d"
) -> list[int]:
    """Rows a single-dataset scheduler issues, by the plain reading of docs/concepts.md ("Snoozing, exactly").

    Each round draws ``round_size`` awake prompts (skipping and decrementing snoozed ones, passing
    over retired ones), then all of the round's outcomes are applied.
    """
    order = iter(stream_order(name, len(kinds), seed, epochs=10_000))
    counter = [0] * len(kinds)
    retired = [False] * len(kinds)
    issued: list[int] = []
    for _ in range(rounds):
        drawn: list[int] = []
        if all(retired):
            break
        while len(drawn) < round_size:
            row = next(order)
            if retired[row]:
                continue
            if counter[row] > 0:
                counter[row] -= 1
                continue
            drawn.append(row)
        for row in drawn:
            if kinds[row] == "easy" and policy == "snooze":
                counter[row] += factor
            if kinds[row] == "easy" and policy == "filter":
                retired[row] = True
        issued += drawn
    return issued


def snapshot(sched: snooze.Scheduler) -> tuple[str, str, dict]:
    """Everything a rejected call must leave as it was: the whole state (its hash), the run id and the
    weights in use."""
    from _driver import state_hash

    return state_hash(sched), sched.run_id, {n: float(w) for n, w in zip(sched.names, sched.weights)}


def assert_report_refused(sched: snooze.Scheduler, cands: object, rewards: object, how: str) -> None:
    """``sched.report(cands, rewards)`` is refused with the project's report or reward error, and the
    scheduler's whole state is as it was (the state machines' invalid-report rules)."""
    from _driver import state_hash

    before = state_hash(sched)
    try:
        sched.report(cands, rewards)  # type: ignore[arg-type]
    except (snooze.ReportError, snooze.RewardError):
        pass
    else:
        raise AssertionError(f"invalid report ({how}) was accepted")
    assert state_hash(sched) == before


def small_scheduler(prefix: str = "a", seed: int = 2, **cfg) -> snooze.Scheduler:
    """Two datasets of :data:`MIXED_KINDS` (the second reversed), 3 groups of 4 a step, ``policy="snooze"`` with
    factor 2 unless ``cfg`` names another policy (which then takes its default options) or options of its own."""
    cfg = {"batch_size": 3, "group_size": 4, "policy": "snooze", **cfg}
    if cfg["policy"] == "snooze" and "options" not in cfg:
        cfg["options"] = snooze.SnoozeOptions(factor=2)
    config = snooze.SchedulerConfig(**cfg)
    data = {"a": records(MIXED_KINDS, prefix), "b": records(MIXED_KINDS[::-1], "b" + prefix)}
    return snooze.Scheduler(data, config, seed=seed)


def id_pool(n: int, name: str = "d") -> dict[str, list[dict]]:
    """One dataset ``name`` of ``n`` records with ids ``0 .. n - 1``."""
    return {name: [{"id": i} for i in range(n)]}


def bernoulli_roller(p: np.ndarray, seed: int, group_size: int = 4):  # noqa: ANN201
    """Rollouts of a pool whose prompt ``i`` passes each rollout with probability ``p[i]`` (1/0 rewards)."""
    rng = np.random.default_rng(seed)
    return lambda c: (rng.random((len(c), group_size)) < p[c.row][:, None]).astype(float)

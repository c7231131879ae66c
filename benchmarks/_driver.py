"""Deterministic workload shared by the reliability tests and ``benchmarks/kill9.py``.

Rewards are a pure function of ``(dataset, id, ticket)``: tickets are part of the scheduler's
state, so a resumed run sees exactly the rewards the uninterrupted run saw. About 40% of draws
are too easy (so snoozes are active), 10% too hard, 10% flat, the rest carry signal.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import snooze

LogRow = tuple[int, str, str, Any]  # (step, kind, dataset, id): kind "gen" (rolled out) or "train"


def datasets(sizes: Sequence[int] = (37, 53, 91)) -> dict[str, snooze.Source]:
    """Fresh sources (built anew on every call, as a restarted process would)."""
    names = ("add", "rev", "mul", "sub", "div")
    return {
        n: snooze.Source.from_ids(n, np.arange(1000 * i, 1000 * i + k)) for i, (n, k) in enumerate(zip(names, sizes))
    }


def config(**changes: Any) -> snooze.SchedulerConfig:
    """Quota mix of weighted datasets, snoozing on (factor 3), small batches so epochs turn over quickly. A
    ``policy`` of ``changes`` other than ``snooze`` takes its default options unless ``options`` is given."""
    base: dict[str, Any] = dict(
        batch_size=6,
        gen_batch_size=5,
        group_size=4,
        policy="snooze",
        options=snooze.SnoozeOptions(factor=3),
        mix="quota",
        weights={"add": 1.0, "rev": 2.0, "mul": 3.0},
        max_gen_rounds=4,
        carry_surplus=True,
    )
    if changes.get("policy", "snooze") != "snooze" and "options" not in changes:
        del base["options"]
    base.update(changes)
    return snooze.SchedulerConfig(**base)


def rewards(cands: Sequence[snooze.Candidate], group_size: int) -> np.ndarray:
    """``[len(cands), G]`` rewards in [0, 1], a pure function of each candidate's (dataset, id, ticket)."""
    out = np.empty((len(cands), group_size))
    for i, c in enumerate(cands):
        h = zlib.crc32(f"{c.dataset}/{c.id}/{c.ticket}".encode())
        kind = h % 10
        if kind < 4:
            out[i] = 1.0
        elif kind == 4:
            out[i] = 0.0
        elif kind == 5:
            out[i] = 0.5
        else:
            row = np.random.default_rng(h).integers(0, 2, group_size).astype(float)
            row[0], row[1] = 0.0, 1.0  # guaranteed spread
            out[i] = row
    return out


def state_hash(sched: snooze.Scheduler) -> str:
    """sha256 over the whole state (meta as canonical JSON, every array's name, dtype, shape, bytes), but
    ``meta.run_id``: a run's random identity, which two runs built apart differ in by design."""
    sd = sched.state_dict()
    meta = {k: v for k, v in sd["meta"].items() if k != "run_id"}
    h = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
    for name in sorted(sd["arrays"]):
        a = np.ascontiguousarray(sd["arrays"][name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def drive(
    sched: snooze.Scheduler,
    steps: int,
    log: list[LogRow],
    interrupt: Callable[[snooze.Scheduler, int], snooze.Scheduler] | None = None,
    action: int = 0,
    held: list[snooze.Candidate] | None = None,
) -> tuple[snooze.Scheduler, int]:
    """Run the step loop of ``Scheduler.step`` one action (propose / report / finish) at a time until
    ``sched.step_index == steps``. After each action, ``interrupt(sched, action)`` may hand back a
    different scheduler (e.g. one saved and loaded): candidates proposed but not yet reported are
    reported to that one. Returns the final scheduler and the action count."""
    G = sched.config.group_size
    cands = held
    while sched.step_index < steps:
        if cands is None and not sched.batch_full and sched.round < sched.config.max_gen_rounds:
            cands = sched.propose()
            kind = "propose"
        elif cands:
            sched.report(cands, rewards(cands, G))
            log.extend((sched.step_index, "gen", c.dataset, c.id) for c in cands)
            cands, kind = None, "report"
        else:
            batch = sched.finish_step()
            log.extend((batch.step, "train", c.dataset, c.id) for c in batch.candidates)
            cands, kind = None, "finish"
        action += 1
        if kind == "propose" and not cands:
            cands = []  # nothing left to draw: the next action closes the step
        if interrupt is not None:
            sched = interrupt(sched, action)
    return sched, action

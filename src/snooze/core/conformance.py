"""``check_policy``: the plug-in contract of a policy, checked by running it (docs/concepts.md, "Writing a policy").

A policy of your own is a class registered with :func:`~snooze.register_policy`. Run
``snooze.check_policy(MyPolicy, options=<the options your run uses>)`` in its tests: it runs schedulers over
two small datasets (20 prompts, some always solved, some never) with deterministic rewards, so that every
prompt comes up many times and a policy's options reach what they act on within a few steps, and checks,
step by step,

- **skip mask**: what ``skip_mask`` returns is a ``bool`` array of the encounters' shape, and a fresh run's
  first round draws a prompt (a mask that lets nothing through would leave every batch empty); a ``relax()``
  that never stops saying ``True`` is named within one draw;
- **counts**: each dataset's cached counts (asleep, retired, blocked) equal what its columns hold, after
  every step and after a failed round (the memory counts the rows of each report; a policy that writes rows
  outside its report desyncs them, and is caught here);
- **rejected calls**: a report with a NaN reward, or a round whose rollout raises, leaves the state as
  it was;
- **state round-trip**: ``state_dict``, saved to a checkpoint and loaded into a fresh scheduler, gives the
  same ``state_dict`` (a policy state that is not plain JSON fails here, not at a run's first save), a
  ``load_state_dict`` that refuses its own state fails here, and every public attribute of the policy (its
  run-level state: counters, clocks, tables) comes back equal, so a policy whose ``state_dict()`` forgets
  some of it (``{}``) fails here, naming the attribute;
- **exact resume**: a run saved half-way and resumed proposes, trains on and counts exactly what the
  uninterrupted run does.

The first rule broken is a :class:`~snooze.PolicyConformanceError` naming it and the step. The check runs the
policy at the options it is given (its defaults when none): state that only some options reach (a long
period, a late threshold) is checked only under them, so pass the options your runs use, one call each.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from snooze._kit.checks import is_int
from snooze.core._memory import BLOCKED, RETIRED
from snooze.core.checkpoint import load_state, save_state
from snooze.core.config import SchedulerConfig
from snooze.core.errors import ConfigError, PolicyConformanceError, RewardError, StateError
from snooze.core.options import POLICIES
from snooze.core.policies import Policy, SkipRule
from snooze.core.scheduler import Scheduler

__all__ = ["check_policy"]


def _datasets() -> dict[str, list[dict[str, Any]]]:
    """Small enough that each prompt comes up about twice a step: a policy's state is reached early. A quarter of
    the prompts always pass (a too-easy streak from their first group), a quarter never do."""
    return {
        "a": [{"id": f"a{i}", "p": (i % 4) / 3} for i in range(12)],
        "b": [{"id": i, "p": ((i + 1) % 4) / 3} for i in range(8)],
    }


def _rewards(cands: Any, group_size: int) -> np.ndarray:
    """Each candidate's group from its prompt's pass rate and its ticket: the same in any run that issues it."""
    out = np.empty((len(cands), group_size))
    for i, c in enumerate(cands):
        seed = int.from_bytes(hashlib.sha256(f"{c.dataset}/{c.id}/{c.ticket}".encode()).digest()[:8], "little")
        out[i] = np.random.default_rng(seed).random(group_size) < c.record["p"]
    return out


def _same_state(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The parts (``meta.<key>``, ``array <name>``) where states ``a`` and ``b`` differ."""
    arrays = [{k: (v.dtype.str, v.shape, v.tobytes()) for k, v in s["arrays"].items()} for s in (a, b)]
    parts = [("meta.", a["meta"], b["meta"]), ("array ", *arrays)]
    return [f"{p}{k}" for p, x, y in parts for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)]


def _fail(rule: str, where: str, detail: str) -> PolicyConformanceError:
    return PolicyConformanceError(f"check_policy: {rule} broken {where}: {detail}")


def _check_counts(sched: Scheduler, where: str) -> None:
    for d, t in enumerate(sched._parts.memory.tables):
        held = tuple(int(np.count_nonzero(x)) for x in (t.counter, t.flags & RETIRED, t.flags & BLOCKED))
        cached = (t.n_asleep, t.n_retired, t.n_blocked)
        if held != cached:
            raise _fail(
                "counts",
                where,
                f"dataset {sched.names[d]!r}: (asleep, retired, blocked) cached as {cached}, the columns "
                f"hold {held}; a policy writes the memory rows of its report's prompts only (report.group_rows), "
                "as the memory counts those",
            )


def _check_mask(sched: Scheduler, where: str) -> None:
    policy = sched._parts.policy
    if policy.skip_mask is None:
        return
    for d, t in enumerate(sched._parts.memory.tables):
        rows = np.arange(t.n, dtype=np.int64)
        awake = (t.counter == 0) & ((t.flags & BLOCKED) == 0)
        got = policy.skip_mask(t, sched._parts.streams[d], rows, awake)
        if not isinstance(got, np.ndarray) or got.dtype != np.bool_ or got.shape != rows.shape:
            shown = f"{type(got).__name__} {getattr(got, 'dtype', '')} {getattr(got, 'shape', '')}".strip()
            raise _fail(
                "skip mask",
                where,
                f"dataset {sched.names[d]!r}: returned {shown}, not a bool array of shape {rows.shape}",
            )


def _check_rejected(sched: Scheduler, where: str) -> None:
    """A bad report and a failing round leave the state unchanged."""
    cands = sched.propose()
    after_propose = sched.state_dict()
    bad = _rewards(cands, sched.config.group_size)
    bad[0, 0] = np.nan
    try:
        sched.report(cands, bad)
    except RewardError:
        pass
    else:
        raise _fail("rejected report", where, "a NaN reward was recorded")
    changed = _same_state(after_propose, sched.state_dict())
    if changed:
        raise _fail("rejected report", where, f"a report refused for a NaN reward changed {changed[:5]}")
    sched.report(cands, _rewards(cands, sched.config.group_size))
    sched.finish_step()  # the next step starts with a round: the failing rollout is its first
    before = sched.state_dict()
    called = []

    def broken(c: Any) -> Any:
        called.append(len(c))
        raise _Boom

    try:
        sched.step(broken)
    except _Boom:
        pass
    if not called:
        return  # nothing left to draw: no round to fail
    changed = _same_state(before, sched.state_dict())
    if changed:
        raise _fail("undo", where, f"a round whose rollout raised changed {changed[:5]}")
    _check_counts(sched, where + " (after a failed round)")


class _Boom(Exception):
    pass


_PLUGIN = (Policy, SkipRule)


def check_policy(
    policy_cls: type,
    options: Any = None,
    steps: int = 16,
    *,
    config: SchedulerConfig | None = None,
    seed: int = 0,
) -> None:
    """Check that registered policy ``policy_cls`` keeps the plug-in contract (module docstring); raise
    :class:`~snooze.PolicyConformanceError` at the first rule it breaks.

    ``options``: the policy's options to run it under (an instance of its options class or a mapping of its
    fields; default: its defaults). Pass the options your runs use: state that only they reach is checked only
    under them. ``steps``: steps of the uninterrupted run (at least 4; it is resumed at half). ``config``: a
    whole config to run under instead of the default one (small batches over two datasets, ``gen_batch_size``
    above ``batch_size``, partial batches); its ``policy`` must be the policy's name."""
    cfg = _config_for(policy_cls, options, steps, config)
    G = cfg.group_size

    def rollout(cands: Any) -> np.ndarray:
        return _rewards(cands, G)

    if not Scheduler(_datasets(), cfg.replace(audit=0.0), seed=seed).propose():
        raise _fail(
            "skip mask",
            "at the first round",
            "a run that knows nothing yet drew no prompt; a mask must let "
            "through the prompts it has no evidence about (patience bounds a walk, it does not feed it)",
        )
    whole = Scheduler(_datasets(), cfg, seed=seed)
    trace = []
    for k in range(steps):
        batch = whole.step(rollout)
        trace.append(([(c.dataset, c.id) for c in batch.candidates], batch.metrics))
        _check_counts(whole, f"after step {k + 1}")
        _check_mask(whole, f"after step {k + 1}")
    half = Scheduler(_datasets(), cfg, seed=seed)
    for _ in range(steps // 2):
        half.step(rollout)
    state, where = half.state_dict(), f"at step {steps // 2}"
    again = _reloaded(state, cfg, seed, where)
    changed = _same_state(state, again.state_dict())
    if changed:
        raise _fail("state round-trip", where, f"save -> load -> state_dict changed {changed[:5]}")
    _check_attributes(half._parts.policy, again._parts.policy, where)
    _check_rejected(_reloaded(state, cfg, seed, where), where)
    _check_resume(again, trace, steps, rollout)


def _config_for(policy_cls: type, options: Any, steps: Any, config: SchedulerConfig | None) -> SchedulerConfig:
    """The config ``check_policy`` runs ``policy_cls`` under, its arguments checked."""
    name = getattr(policy_cls, "name", "")
    if not name or POLICIES.get(name) is not policy_cls:
        raise ConfigError(
            f"check_policy({getattr(policy_cls, '__name__', policy_cls)!r}): register it first (@register_policy(name))"
        )
    if isinstance(options, SchedulerConfig):
        raise ConfigError("check_policy(cls, options=...): options are the policy's; pass a whole config as config=...")
    if not is_int(steps) or steps < 4:
        raise ConfigError(f"check_policy(steps={steps!r}): must be an integer >= 4 (the run is resumed at half)")
    cfg = (
        config
        if config is not None
        else SchedulerConfig(batch_size=4, gen_batch_size=6, group_size=4, max_gen_rounds=3, policy=name)
    )
    if cfg.policy != name:
        raise ConfigError(f"check_policy: config.policy={cfg.policy!r}, but the policy is registered as {name!r}")
    return cfg if options is None else cfg.replace(options=options)


def _check_resume(again: Scheduler, trace: list[Any], steps: int, rollout: Any) -> None:
    """The run resumed at half (``again``) proposes, trains on and counts what the uninterrupted one did."""
    for k in range(steps // 2, steps):
        batch = again.step(rollout)
        got = ([(c.dataset, c.id) for c in batch.candidates], batch.metrics)
        if got != trace[k]:
            what = (
                "the batch"
                if got[0] != trace[k][0]
                else sorted(m for m in got[1] if got[1][m] != trace[k][1].get(m))[:5]
            )
            raise _fail(
                "exact resume",
                f"at step {k + 1}",
                f"resumed at step {steps // 2}, {what} differs from the uninterrupted run's; everything the policy "
                "decides by must come back from a load: its columns, and its run-level state through state_dict() "
                "and load_state_dict() (the state round-trip rule)",
            )
        _check_counts(again, f"after step {k + 1} (resumed)")


def _check_attributes(saved: Any, loaded: Any, where: str) -> None:
    """The policy that saved and the one loaded from its state hold the same public attributes (the round-trip
    rule, for state that ``state_dict()`` forgot: it would pass the state comparison, ``{}`` against ``{}``)."""
    for name, a, b in _attribute_pairs(saved, loaded, "", 0):
        if not _equal(a, b):
            raise _fail(
                "state round-trip",
                where,
                f"policy attribute {name!r} is {_short(a)} in the run that saved and {_short(b)} after loading its "
                "state; everything a policy keeps beyond its columns must be in its state_dict() and come back from "
                "load_state_dict() (a cache it rebuilds may be named with a leading underscore)",
            )


def _attribute_pairs(a: Any, b: Any, prefix: str, depth: int) -> list[tuple[str, Any, Any]]:
    """``(name, value in a, value in b)`` of the public attributes of two plug-ins (a nested one's too: ``rule``)."""
    out = []
    for name in sorted(set(vars(a)) | set(vars(b))):
        if name.startswith("_") or name in ("options", "context"):
            continue
        x, y = vars(a).get(name), vars(b).get(name)
        if depth < 2 and isinstance(x, _PLUGIN) and isinstance(y, _PLUGIN):
            out += _attribute_pairs(x, y, f"{prefix}{name}.", depth + 1)
        else:
            out.append((prefix + name, x, y))
    return out


def _equal(a: Any, b: Any) -> bool:
    """Equal as data: arrays by dtype, shape and values (NaN equal to NaN), containers item by item; a value of
    another kind (a generator, a function) is not compared."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
        )
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return set(a) == set(b) and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float, complex, str, bytes, bool, np.generic, type(None))):
        return type(a) is type(b) and (a == b or (a != a and b != b))
    return True


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _reloaded(state: dict[str, Any], cfg: SchedulerConfig, seed: int, where: str) -> Scheduler:
    """A scheduler that loads ``state`` as a resumed run does: written to a checkpoint, read back, loaded."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            saved = load_state(save_state(tmp, state).parent)
        except StateError as exc:
            raise _fail("state round-trip", where, f"the state does not survive a save and a load: {exc}") from None
    sched = Scheduler(_datasets(), cfg, seed=seed)
    try:
        sched.load_state_dict(saved)
    except StateError as exc:
        raise _fail(
            "state round-trip", where, f"loading the state its own run saved failed ({type(exc).__name__}: {exc})"
        ) from None
    return sched

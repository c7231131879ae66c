"""The envelope of a scheduler's state: state format 1, its compatibility checks, and migration.

The scheduler composes its components' ``state_dict()``s (:class:`Parts`); this module lays them
out as format 1, ``{"meta": JSON-safe dict, "arrays": {name: ndarray}}``, and reads them back::

    meta.format, .version            "snooze.scheduler", 1
    meta.seed, .config               what the scheduler was built with (checked on load)
    meta.datasets[d]                 {"name", "size", "fingerprint"} + the stream's {"epoch", "cursor"}
    meta.weights, .drawn             the mix
    meta.next_ticket, arrays.pending the pending set; arrays.pending_step the step each was drawn at
    meta.pending_audit               tickets of pending candidates that audit a skipped encounter
    meta.run_id                      the run's id, which every candidate carries
    meta.metrics                     the step's counters and the cumulative totals (finished steps among them)
    meta.metrics.diagnosis           the audit's: its evidence (step and totals), alarms, round budget left
    meta.step_batch, arrays.step.*   the step being built: its rounds, and its groups (one row each: prompt,
                                     ticket, outcome, rewards, audit, carried_in, place, slot in the batch)
    meta.policy                      the policy's own state, only when it keeps any (predictive's)
    meta.screens, arrays.screens.*   screening's (only with screen_size set): the screens that passed and wait
                                     for their rest (ticket, first k rewards, tokens; which rests are out), counts
    arrays.ds<d>.<column>            the prompt memory (counter, flags, streak; history under skip="history")

Loading checks the format, the version and that the state belongs to this data and configuration;
``migrate=True`` carries prompt memory over by id instead (:func:`_migrate`). Errors of any kind in a
malformed state become :class:`~snooze.StateError` naming the file. A state of a pre-release of snooze
(no ``meta.step_batch``) is refused with a :class:`~snooze.StateError` that says so: this release reads the
states it writes, nothing older.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from snooze._kit.checks import is_int
from snooze._kit.json import same_version
from snooze._kit.state import state_int
from snooze.core._audit import carried_over
from snooze.core._groups import Groups
from snooze.core._memory import BASE_COLUMNS
from snooze.core._metrics import StepMetrics, with_cost_counts
from snooze.core.config import SchedulerConfig
from snooze.core.errors import ConfigError, StateError, StateMismatchError
from snooze.core.source import Source, as_source

__all__ = ["Parts", "pack", "unpack", "envelope", "reading", "STATE_FORMAT", "STATE_VERSION"]

log = logging.getLogger(__name__)
STATE_FORMAT = "snooze.scheduler"
STATE_VERSION = 1


@dataclass
class Parts:
    """A scheduler's state as its components' ``state_dict()``s."""

    streams: list[dict[str, Any]]
    memory: dict[str, Any]
    mix: dict[str, Any]
    pending: dict[str, Any]
    step: dict[str, Any]
    metrics: dict[str, Any]
    policy: dict[str, Any] = field(default_factory=dict)
    audit: dict[str, Any] = field(default_factory=dict)
    screens: dict[str, Any] = field(default_factory=dict)  # screening's (screen_size set): {"meta", "arrays"}


def pack(seed: int, config: SchedulerConfig, sources: Sequence[Source], parts: Parts) -> dict[str, Any]:
    """``parts`` laid out as format 1."""
    meta: dict[str, Any] = {
        "format": STATE_FORMAT,
        "version": STATE_VERSION,
        "seed": seed,
        "config": config.to_dict(),
        "weights": parts.mix["weights"],
        "next_ticket": parts.pending["next_ticket"],
        "run_id": parts.pending["run_id"],
        "drawn": parts.mix["drawn"],
        "metrics": {**parts.metrics, "diagnosis": parts.audit},
        "pending_audit": parts.pending["audit"],
        "step_batch": {"rounds": parts.step["rounds"]},
        "datasets": [
            {"name": src.name, "size": len(src), "fingerprint": src.fingerprint, **st}
            for src, st in zip(sources, parts.streams)
        ],
    }
    if parts.policy:
        meta["policy"] = parts.policy
    arrays: dict[str, np.ndarray] = {"pending": parts.pending["pending"], "pending_step": parts.pending["step"]}
    for d, columns in enumerate(parts.memory["datasets"]):
        arrays.update({f"ds{d}.{name}": a for name, a in columns.items()})
    arrays.update({f"step.{col}": a for col, a in parts.step["groups"].items()})
    if parts.screens:  # only with screening on: a state without it is laid out as before
        meta["screens"] = parts.screens["meta"]
        arrays.update({f"screens.{name}": a for name, a in parts.screens["arrays"].items()})
    return {"meta": meta, "arrays": arrays}


@contextmanager
def reading(state: Any) -> Iterator[None]:
    """Turn every error of reading ``state`` into a :class:`StateError` that names its file
    (``state["path"]``, set by :func:`snooze.load_state`)."""
    where = state.get("path") if isinstance(state, Mapping) else None
    try:
        yield
    except StateError as exc:
        if where and str(where) not in str(exc):
            raise type(exc)(f"{where}: {exc}") from None
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as exc:
        raise StateError(
            (f"{where}: " if where else "")
            + f"scheduler state is incomplete or malformed ({type(exc).__name__}: {exc})"
        ) from None


def unpack(
    state: Mapping[str, Any],
    seed: int,
    config: SchedulerConfig,
    sources: Sequence[Source],
    migrate: bool = False,
    previous: Mapping[str, Any] | None = None,
    fresh_policy: Mapping[str, Any] | None = None,
) -> Parts:
    """``state`` (format 1) as component states for a scheduler built with ``seed``, ``config`` and
    ``sources``. Call inside :func:`reading`. A state of other data, seed, group size, reward range or
    weights raises :class:`StateMismatchError` unless ``migrate``, and so does one saved under another
    policy when either policy keeps run-level state (``fresh_policy``: this config's policy's state at
    the start of a run; what a migration starts it with)."""
    meta, arrays = envelope(state)
    problems = _mismatches(meta, seed, config, sources) + _policy_mismatch(meta, config, fresh_policy or {})
    if problems and not migrate:
        raise StateMismatchError(
            "the saved state does not match this scheduler: "
            + "; ".join(problems)
            + ". Load with the same data, seed and config, or pass migrate=True to carry each prompt's memory over "
            "by (dataset, id) (see docs/guarantees.md)."
        )
    if problems:
        same_policy = meta["config"].get("policy") == config.policy
        parts = _migrate(meta, arrays, seed, config, sources, previous)
        parts.policy = dict(meta.get("policy", {})) if same_policy else dict(fresh_policy or {})
        return parts
    _check_out_of_range(meta["config"], config, arrays.get("step.rewards"))
    for info, src in zip(meta["datasets"], sources):  # same ids (fingerprint): the same number of them
        if info["size"] != len(src):
            raise StateError(
                f"dataset {src.name!r}: size={info['size']} in the state, but its ids match this data's "
                f"{len(src)}; the state is corrupt"
            )
    return Parts(
        streams=[{"epoch": info["epoch"], "cursor": info["cursor"]} for info in meta["datasets"]],
        memory={"datasets": [_columns(arrays, d) for d in range(len(sources))]},
        mix={
            "weights": meta["weights"] if meta["config"]["weights"] == config.to_dict()["weights"] else None,
            "drawn": meta["drawn"],
        },
        pending={
            "next_ticket": meta["next_ticket"],
            "pending": arrays["pending"],
            "step": arrays["pending_step"],
            "run_id": meta["run_id"],
            "audit": meta["pending_audit"],
        },
        step={"rounds": meta["step_batch"]["rounds"], "groups": _prefixed(arrays, "step")},
        metrics=dict(meta["metrics"]),
        policy=dict(meta.get("policy", {})),
        audit=meta["metrics"]["diagnosis"],
        screens={"meta": meta["screens"], "arrays": _prefixed(arrays, "screens")} if "screens" in meta else {},
    )


def envelope(state: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """``(meta, arrays)`` of a state of this format and version, or a :class:`StateError` saying what it is."""
    meta, arrays = state["meta"], state["arrays"]
    if not isinstance(meta, Mapping) or not isinstance(arrays, Mapping):
        raise StateError("scheduler state must hold a 'meta' mapping and an 'arrays' mapping")
    if meta.get("format") != STATE_FORMAT:
        raise StateError(f"not a snooze scheduler state (format={meta.get('format')!r})")
    if not same_version(meta.get("version"), STATE_VERSION):
        raise StateError(
            f"scheduler state version {meta.get('version')!r} is not supported (this snooze reads version "
            f"{STATE_VERSION}); load it with the snooze release that wrote it"
        )
    if "step_batch" not in meta:
        raise StateError(
            "this state was written by a pre-release of snooze, whose layout this release does not read (it reads "
            "the states it writes); finish that run with the release that wrote it, or start the run afresh"
        )
    if not isinstance(meta["config"], Mapping) or not all(isinstance(d, Mapping) for d in meta["datasets"]):
        raise StateError("scheduler state metadata is malformed (config or datasets are not objects)")
    _check_config(meta["config"])
    for i, info in enumerate(meta["datasets"]):
        if "size" not in info:
            raise StateError(f"datasets[{i}] lacks its size; the state is corrupt")
        state_int(info["size"], f"datasets[{i}].size")
    seed = meta.get("seed")
    if not is_int(seed) or seed < 0:  # (true read as seed 1, 0.0 as 0)
        raise StateError(f"seed={seed!r} is not a seed (an integer >= 0); the state is corrupt")
    return meta, arrays


_ADDED_FIELDS = frozenset({"screen_size", "guard"})
"""``SchedulerConfig`` fields added since states were first written: a saved config without one was written before
it existed, and it counts as the field's default (as :func:`~snooze.core.config.config_changes` reads it)."""


def _check_config(saved: Mapping[str, Any]) -> None:
    """``meta.config`` is a whole config, one :meth:`SchedulerConfig.from_dict` takes (the check
    ``Scheduler.load`` makes when it builds the scheduler from it), or a :class:`StateError` naming the field. A
    field added since states were first written (:data:`_ADDED_FIELDS`) may be missing."""
    fields = dataclasses.fields(SchedulerConfig)
    missing = [f.name for f in fields if f.name not in saved and f.name not in _ADDED_FIELDS]
    if missing:
        raise StateError(f"config lacks field(s) {missing}; the state is corrupt")
    try:
        SchedulerConfig.from_dict(saved)
    except ConfigError as exc:
        raise StateError(f"config: {exc}; the state is corrupt") from None


def _mismatches(meta: Mapping[str, Any], seed: int, config: SchedulerConfig, sources: Sequence[Source]) -> list[str]:
    """Every way the state does not belong to this scheduler (empty: it does)."""
    problems = []
    if meta.get("seed") != seed:
        problems.append(f"seed {meta.get('seed')} (saved) != {seed} (now)")
    saved_cfg, now_cfg = meta["config"], config.to_dict()
    for key in ("group_size", "reward_range", "screen_size"):  # screen_size: a pending screen's width
        if saved_cfg.get(key) != now_cfg[key]:
            problems.append(f"{key} {saved_cfg.get(key)} (saved) != {now_cfg[key]} (now)")
    if saved_cfg.get("weights") != now_cfg["weights"]:
        problems.append(f"weights {saved_cfg.get('weights')} (saved) != {config.weights} (now)")
    saved = [(d["name"], d["fingerprint"]) for d in meta["datasets"]]
    now = [(src.name, src.fingerprint) for src in sources]
    if [n for n, _ in saved] != [n for n, _ in now]:
        problems.append(f"datasets {[n for n, _ in saved]} (saved) != {[n for n, _ in now]} (now)")
    else:
        problems += [
            f"dataset {n!r} changed (ids differ from the saved state)" for (n, a), (_, b) in zip(saved, now) if a != b
        ]
    return problems


def _check_out_of_range(saved: Mapping[str, Any], config: SchedulerConfig, rewards: Any) -> None:
    """A step saved under ``out_of_range="accept"`` may hold rewards outside ``reward_range``: loaded under a config
    that refuses them, that is the config's change (a :class:`StateMismatchError` naming it), not a corrupt state."""
    if saved.get("out_of_range") != "accept" or config.out_of_range == "accept":
        return
    if isinstance(rewards, np.ndarray) and rewards.dtype.kind == "f":
        rewards = rewards[~np.isnan(rewards)]  # (a screen stopped after k rollouts holds NaN after them)
    if not isinstance(rewards, np.ndarray) or rewards.dtype.kind != "f" or not np.isfinite(rewards).all():
        return  # not rewards a step can hold: the step's own check says what is wrong
    low, high = config.reward_range
    if ((rewards < low) | (rewards > high)).any():
        raise StateMismatchError(
            f"the state's step in progress holds rewards outside reward_range={list(config.reward_range)}, recorded "
            f"under out_of_range='accept' (saved), which out_of_range={config.out_of_range!r} (now) refuses; load it "
            "with out_of_range='accept', finish that step, then change it"
        )


def _policy_mismatch(meta: Mapping[str, Any], config: SchedulerConfig, fresh_policy: Mapping[str, Any]) -> list[str]:
    """A policy's run-level state (``meta.policy``) is read only by the policy that wrote it: a change of
    policy is a mismatch when the saved policy or this one keeps such state (between the others, the
    per-prompt columns carry over as they are)."""
    saved = meta["config"].get("policy")
    if saved == config.policy or not (meta.get("policy") or fresh_policy):
        return []
    keeps = [repr(p) for p, state in ((saved, meta.get("policy")), (config.policy, fresh_policy)) if state]
    return [
        f"policy {saved!r} (saved) != {config.policy!r} (now), and {' and '.join(keeps)} keeps run-level state "
        "that only it can read (migrate=True starts the new policy's afresh)"
    ]


def _columns(arrays: Mapping[str, np.ndarray], d: int) -> dict[str, np.ndarray]:
    return _prefixed(arrays, f"ds{d}")


def _prefixed(arrays: Mapping[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    """``{name: array}`` of every ``<prefix>.<name>`` array."""
    start = prefix + "."
    return {k[len(start) :]: v for k, v in arrays.items() if k.startswith(start)}


# -- migration ----------------------------------------------------------------------------------
def _migrate(
    meta: Mapping[str, Any],
    arrays: Mapping[str, np.ndarray],
    seed: int,
    config: SchedulerConfig,
    sources: Sequence[Source],
    previous: Mapping[str, Any] | None,
) -> Parts:
    """A state saved with other data, seed, group size, reward range or weights, carried over.

    Defined as follows (docs/guarantees.md):

    - each prompt's memory (every column: snooze counter, flags, streak, and the policy's own) moves
      by ``(dataset, id)``; prompts new to the data start fresh, prompts gone from it are dropped,
      datasets gone from the mix are dropped (with a warning). A dataset whose ids changed needs
      ``previous[name]``, the data the state was saved with, to map saved rows to ids;
    - a dataset's stream keeps its position exactly when its ids and the seed are unchanged; otherwise
      it starts over at the beginning of the epoch it was in (the order of the rest of that epoch is
      not defined by the new data or seed);
    - the step number, ticket counter, encounters drawn per dataset and the cumulative totals carry on;
    - the step in progress is dropped (candidates out for rollout can no longer be reported; the
      groups gathered for the unfinished step are discarded) and the mix weights are the new config's.
    """
    names = [s.name for s in sources]
    memory = [{c.name: np.zeros(len(src), dtype=c.dtype) for c in BASE_COLUMNS} for src in sources]
    streams: list[dict[str, Any]] = [{"epoch": 0, "cursor": 0} for _ in sources]
    drawn = [0] * len(sources)
    moved = 0
    for i, info in enumerate(meta["datasets"]):
        if info["name"] not in names:
            log.warning("migration drops dataset %r: it is not in the new mix", info["name"])
            continue
        d = names.index(info["name"])
        moved += _move_memory(memory[d], _columns(arrays, i), i, info, sources[d], previous)
        exact = info["fingerprint"] == sources[d].fingerprint and meta.get("seed") == seed
        streams[d] = {"epoch": info["epoch"], "cursor": info["cursor"] if exact else 0}
        drawn[d] = state_int(meta["drawn"][i], f"drawn[{i}]")  # (never int(): 2.7 would be read as 2)
    metrics = StepMetrics(names, config.group_size)  # a fresh step; the totals carry on
    totals = with_cost_counts(meta["metrics"], config.group_size)["totals"]  # (a state saved before them too)
    metrics.totals = {k: state_int(totals[k], f"metrics totals[{k!r}]") for k in metrics.totals}
    audit = carried_over(meta["metrics"]["diagnosis"])  # the audit's totals carry on too
    log.info("migrated the memory of %d prompts by (dataset, id); the unfinished step was dropped", moved)
    return Parts(
        streams=streams,
        memory={"datasets": memory},
        mix={"weights": None, "drawn": drawn},
        pending={
            "next_ticket": meta["next_ticket"],
            "pending": np.empty((0, 3), dtype=np.int64),
            "step": np.empty(0, dtype=np.int64),
            "run_id": meta["run_id"],
            "audit": [],
        },
        step={"rounds": 0, "groups": Groups(config.group_size).state_dict()},
        metrics=metrics.state_dict(),
        audit=audit,
    )


def _move_memory(
    into: dict[str, np.ndarray],
    saved: Mapping[str, np.ndarray],
    i: int,
    info: Mapping[str, Any],
    new: Source,
    previous: Mapping[str, Any] | None,
) -> int:
    """Every saved column of dataset ``i`` moved by id into ``into`` (columns of the new data); how many prompts
    moved."""
    size = state_int(info["size"], f"datasets[{i}].size", 1)
    rows = _saved_rows_to_new(new, info, previous)
    keep = rows >= 0
    for name, column in saved.items():
        if column.shape != (size,):
            raise StateError(f"array ds{i}.{name} has shape {column.shape}, expected ({size},)")
        into[name] = np.zeros(len(new), dtype=column.dtype)
        into[name][rows[keep]] = column[keep]
    return int(keep.sum())


def _saved_rows_to_new(new: Source, info: Mapping[str, Any], previous: Mapping[str, Any] | None) -> np.ndarray:
    """For each saved row of a dataset, its row in the new data (``-1``: the prompt is gone)."""
    name = info["name"]
    if info["fingerprint"] == new.fingerprint:
        return np.arange(len(new), dtype=np.int64)
    if previous is None or name not in previous:
        raise StateMismatchError(
            f"dataset {name!r} changed since the state was saved; migrating needs the data it was saved with "
            f"(previous_datasets={{{name!r}: ...}}) to match its prompts by id"
        )
    old = as_source(name, previous[name])
    if old.fingerprint != info["fingerprint"]:
        raise StateMismatchError(
            f"previous_datasets[{name!r}] is not the data this state was saved with (fingerprint differs)"
        )
    return new.rows_of(old.ids.tolist())

"""The scheduler's state as ``{"meta": JSON-safe dict, "arrays": {name: ndarray}}``: seeds and counters.

Streams are stored as ``(epoch, cursor)`` (their order is re-derived from the seed), prompt tables
as three flat arrays, the step in progress as small group buffers. Loading checks that the state
belongs to this data and configuration; ``migrate=True`` carries prompt memory over by id instead.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from snooze.core.buffer import GroupBuffer
from snooze.core.errors import StateError, StateMismatchError

if TYPE_CHECKING:
    from snooze.core.scheduler import Scheduler

__all__ = ["scheduler_state", "load_scheduler_state", "STATE_FORMAT", "STATE_VERSION"]

log = logging.getLogger(__name__)
STATE_FORMAT = "snooze.scheduler"
STATE_VERSION = 1
_BUFFERS = ("batch", "surplus", "zero")


def scheduler_state(s: Scheduler) -> dict[str, Any]:
    meta = {
        "format": STATE_FORMAT,
        "version": STATE_VERSION,
        "seed": s.seed,
        "config": s.config.to_dict(),
        "weights": s.weights.tolist(),
        "step": s.step_index,
        "round": s.round,
        "next_ticket": s.next_ticket,
        "issued": s.issued.tolist(),
        "metrics": s.counts.state(),
        "last_metrics": s.last_metrics,
        "datasets": [
            {"name": src.name, "size": len(src), "fingerprint": src.fingerprint, **st.state()}
            for src, st in zip(s.sources, s.streams)
        ],
    }
    arrays: dict[str, np.ndarray] = {}
    for d, t in enumerate(s.tables):
        arrays[f"ds{d}.counter"], arrays[f"ds{d}.flags"], arrays[f"ds{d}.streak"] = t.counter, t.flags, t.streak
    pending = np.array([(t, d, r) for t, (d, r) in s.pending.items()], dtype=np.int64).reshape(-1, 3)
    arrays["pending"] = pending
    for name in _BUFFERS:
        arrays.update(getattr(s, name).to_arrays(name))
    return {"meta": meta, "arrays": {k: np.array(v, copy=True) for k, v in arrays.items()}}


def _check_compatible(s: Scheduler, meta: Mapping[str, Any], migrate: bool) -> None:
    problems = []
    if meta.get("seed") != s.seed:
        problems.append(f"seed {meta.get('seed')} (saved) != {s.seed} (now)")
    saved_cfg = meta.get("config", {})
    for key in ("group_size", "reward_range"):
        now = s.config.to_dict()[key]
        if saved_cfg.get(key) != now:
            problems.append(f"{key} {saved_cfg.get(key)} (saved) != {now} (now)")
    if saved_cfg.get("weights") != s.config.to_dict()["weights"]:
        problems.append(f"weights {saved_cfg.get('weights')} (saved) != {s.config.weights} (now)")
    saved = [(d["name"], d["fingerprint"]) for d in meta["datasets"]]
    now_ds = [(src.name, src.fingerprint) for src in s.sources]
    if [n for n, _ in saved] != [n for n, _ in now_ds]:
        problems.append(f"datasets {[n for n, _ in saved]} (saved) != {[n for n, _ in now_ds]} (now)")
    else:
        problems += [f"dataset {n!r} changed (ids differ from the saved state)" for (n, a), (_, b) in zip(saved, now_ds) if a != b]
    if problems and not migrate:
        raise StateMismatchError(
            "the saved state does not match this scheduler: " + "; ".join(problems)
            + ". Load with the same data, seed and config, or pass migrate=True to carry each prompt's memory over "
            "by (dataset, id) and start fresh streams (see docs/guarantees.md)."
        )


def load_scheduler_state(
    s: Scheduler, state: Mapping[str, Any], migrate: bool = False, previous: Mapping[str, Any] | None = None
) -> None:
    try:
        meta, arrays = state["meta"], state["arrays"]
        if meta.get("format") != STATE_FORMAT:
            raise StateError(f"not a snooze scheduler state (format={meta.get('format')!r})")
        if meta.get("version") != STATE_VERSION:
            raise StateError(
                f"scheduler state version {meta.get('version')!r} is not supported (this snooze reads version "
                f"{STATE_VERSION}); load it with the snooze release that wrote it"
            )
        _check_compatible(s, meta, migrate)
        if migrate and not _same_data(s, meta):
            _migrate(s, meta, arrays, previous)
            return
        _restore(s, meta, arrays)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        if isinstance(exc, StateError):
            raise
        raise StateError(f"scheduler state is incomplete or malformed ({type(exc).__name__}: {exc})") from None


def _same_data(s: Scheduler, meta: Mapping[str, Any]) -> bool:
    return [(d["name"], d["fingerprint"]) for d in meta["datasets"]] == [(x.name, x.fingerprint) for x in s.sources]


def _restore(s: Scheduler, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    G = s.config.group_size
    for d, (t, info) in enumerate(zip(s.tables, meta["datasets"])):
        n = len(s.sources[d])
        for name, dtype in (("counter", np.int32), ("flags", np.uint8), ("streak", np.uint8)):
            arr = np.asarray(arrays[f"ds{d}.{name}"])
            if arr.shape != (n,) or arr.dtype != dtype:
                raise StateError(f"array ds{d}.{name} has shape {arr.shape} / {arr.dtype}, expected ({n},) / {np.dtype(dtype)}")
            setattr(t, name, arr.copy())
        if (t.counter < 0).any():
            raise StateError(f"array ds{d}.counter holds negative snooze counters; the state is corrupt")
        t.recount()
        s.streams[d].load_state(info)
    if meta["config"]["weights"] == s.config.to_dict()["weights"]:
        s.weights = np.asarray(meta["weights"], dtype=np.float64)  # keeps curriculum changes
    s.step_index, s.round, s.next_ticket = int(meta["step"]), int(meta["round"]), int(meta["next_ticket"])
    s.issued = np.asarray(meta["issued"], dtype=np.int64)
    pending = np.asarray(arrays["pending"], dtype=np.int64).reshape(-1, 3)
    s.pending = {int(t): (int(d), int(r)) for t, d, r in pending.tolist()}
    for name in _BUFFERS:
        setattr(s, name, GroupBuffer.from_arrays(arrays, name, G))
    s.counts.load_state(meta["metrics"])
    s.last_metrics = dict(meta["last_metrics"])


def _migrate(
    s: Scheduler, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray], previous: Mapping[str, Any] | None
) -> None:
    """Carry each prompt's memory (snooze counter, flags, streak) over by ``(dataset, id)``.

    A state stores fingerprints, not ids, so the previous datasets must be given to map saved rows
    to ids. Prompts new to the data start fresh; prompts gone from it are dropped; streams restart
    at epoch 0 with the new data; totals and the step number carry on.
    """
    from snooze.data.source import as_source

    if previous is None:
        raise StateMismatchError(
            "migrating to changed data needs the previous datasets (previous_datasets=...) to map saved rows to ids"
        )
    moved = 0
    for info_i, info in enumerate(meta["datasets"]):
        name = info["name"]
        if name not in s.names or name not in previous:
            log.warning("migration drops dataset %r (not in the new data, or previous data not given)", name)
            continue
        old = as_source(name, previous[name])
        if old.fingerprint != info["fingerprint"]:
            raise StateMismatchError(f"previous_datasets[{name!r}] is not the data this state was saved with")
        d = s.names.index(name)
        rows = s.sources[d].rows_of(old.ids.tolist())
        keep = rows >= 0
        t = s.tables[d]
        for field in ("counter", "flags", "streak"):
            getattr(t, field)[rows[keep]] = np.asarray(arrays[f"ds{info_i}.{field}"])[keep]
        t.recount()
        moved += int(keep.sum())
    s.step_index = int(meta["step"])
    s.counts.totals = {k: int(v) for k, v in meta["metrics"]["totals"].items()}
    log.info("migrated the memory of %d prompts by id; streams restart at epoch 0", moved)

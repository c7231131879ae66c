"""The scheduler's state as ``{"meta": JSON-safe dict, "arrays": {name: ndarray}}``: seeds and counters.

Streams are stored as ``(epoch, cursor)`` (their order is re-derived from the seed), prompt tables
as three flat arrays, the step in progress as small group buffers. Loading checks that the state
belongs to this data and configuration; ``migrate=True`` carries prompt memory over by id instead.

Loading is all or nothing: everything is parsed and checked into new objects first, and only then
swapped in, so a refused state leaves the scheduler exactly as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from snooze.core.buffer import GroupBuffer
from snooze.core.errors import StateError, StateMismatchError
from snooze.core.metrics import StepMetrics
from snooze.core.pending import PendingSet
from snooze.core.prompts import PromptTable

if TYPE_CHECKING:
    from snooze.core.scheduler import Scheduler

__all__ = ["scheduler_state", "load_scheduler_state", "STATE_FORMAT", "STATE_VERSION"]

log = logging.getLogger(__name__)
STATE_FORMAT = "snooze.scheduler"
STATE_VERSION = 1
_BUFFERS = ("batch", "surplus", "zero")
_TABLE_FIELDS = (("counter", np.int32), ("flags", np.uint8), ("streak", np.uint8))


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
        "drawn": s.drawn.tolist(),
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
        if t.history.shape[0]:  # skip="history" only
            arrays[f"ds{d}.history"] = t.history
    arrays["pending"] = s.pending.to_array()
    for name in _BUFFERS:
        arrays.update(getattr(s, name).to_arrays(name))
    return {"meta": meta, "arrays": {k: np.array(v, copy=True) for k, v in arrays.items()}}


def _check_compatible(s: Scheduler, meta: Mapping[str, Any], migrate: bool) -> None:
    problems = []
    if meta.get("seed") != s.seed:
        problems.append(f"seed {meta.get('seed')} (saved) != {s.seed} (now)")
    saved_cfg = meta["config"]
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
        problems += [
            f"dataset {n!r} changed (ids differ from the saved state)"
            for (n, a), (_, b) in zip(saved, now_ds)
            if a != b
        ]
    if problems and not migrate:
        raise StateMismatchError(
            "the saved state does not match this scheduler: "
            + "; ".join(problems)
            + ". Load with the same data, seed and config, or pass migrate=True to carry each prompt's memory over "
            "by (dataset, id) (see docs/guarantees.md)."
        )
    return None


def load_scheduler_state(
    s: Scheduler, state: Mapping[str, Any], migrate: bool = False, previous: Mapping[str, Any] | None = None
) -> None:
    """Restore ``state`` into ``s`` (all or nothing). ``state["path"]``, when a checkpoint loader set
    it, is named in every error."""
    where = state.get("path") if isinstance(state, Mapping) else None
    try:
        _load(s, state, migrate, previous)
    except StateError as exc:
        if where and str(where) not in str(exc):
            raise type(exc)(f"{where}: {exc}") from None
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as exc:
        raise StateError(
            (f"{where}: " if where else "")
            + f"scheduler state is incomplete or malformed ({type(exc).__name__}: {exc})"
        ) from None


def _load(s: Scheduler, state: Mapping[str, Any], migrate: bool, previous: Mapping[str, Any] | None) -> None:
    meta, arrays = state["meta"], state["arrays"]
    if not isinstance(meta, Mapping) or not isinstance(arrays, Mapping):
        raise StateError("scheduler state must hold a 'meta' mapping and an 'arrays' mapping")
    if meta.get("format") != STATE_FORMAT:
        raise StateError(f"not a snooze scheduler state (format={meta.get('format')!r})")
    if meta.get("version") != STATE_VERSION:
        raise StateError(
            f"scheduler state version {meta.get('version')!r} is not supported (this snooze reads version "
            f"{STATE_VERSION}); load it with the snooze release that wrote it"
        )
    if not isinstance(meta["config"], Mapping) or not all(isinstance(d, Mapping) for d in meta["datasets"]):
        raise StateError("scheduler state metadata is malformed (config or datasets are not objects)")
    _check_compatible(s, meta, migrate)
    if migrate and not _matches(s, meta):
        _apply(s, _migrate(s, meta, arrays, previous))
        return
    _apply(s, _parse(s, meta, arrays))


def _matches(s: Scheduler, meta: Mapping[str, Any]) -> bool:
    """Whether ``meta`` passes every check of :func:`_check_compatible` (no migration needed)."""
    try:
        _check_compatible(s, meta, migrate=False)
    except StateMismatchError:
        return False
    return True


# -- exact restore ------------------------------------------------------------------------------
def _count(value: Any, what: str, low: int = 0, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        raise StateError(f"{what}={value!r} is out of range; the state is corrupt")
    return value


def _table(arrays: Mapping[str, np.ndarray], key: str, n: int) -> PromptTable:
    t = PromptTable(0)
    for name, dtype in _TABLE_FIELDS:
        arr = np.asarray(arrays[f"{key}.{name}"])
        if arr.shape != (n,) or arr.dtype != dtype:
            raise StateError(
                f"array {key}.{name} has shape {arr.shape} / {arr.dtype}, expected ({n},) / {np.dtype(dtype)}"
            )
        setattr(t, name, arr.copy())
    if (t.counter < 0).any():
        raise StateError(f"array {key}.counter holds negative snooze counters; the state is corrupt")
    if f"{key}.history" in arrays:  # pass-rate bytes of skip="history"; absent otherwise
        h = np.asarray(arrays[f"{key}.history"])
        if h.shape != (n,) or h.dtype != np.uint8:
            raise StateError(f"array {key}.history has shape {h.shape} / {h.dtype}, expected ({n},) / uint8")
        t.history = h.copy()
    t.recount()
    return t


def _parse(s: Scheduler, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Every attribute the state sets, checked, built into new objects (``s`` is not touched)."""
    sizes = [len(src) for src in s.sources]
    tables = [_table(arrays, f"ds{d}", n) for d, n in enumerate(sizes)]
    streams = []
    for d, (info, n) in enumerate(zip(meta["datasets"], sizes)):
        streams.append(
            {
                "epoch": _count(info["epoch"], f"datasets[{d}].epoch"),
                "cursor": _count(info["cursor"], f"datasets[{d}].cursor", 0, n - 1),
            }
        )
    out: dict[str, Any] = {"tables": tables, "streams": streams}
    out["step_index"] = _count(meta["step"], "step")
    out["round"] = _count(meta["round"], "round")
    out["next_ticket"] = _count(meta["next_ticket"], "next_ticket")
    out["drawn"] = np.asarray(meta["drawn"], dtype=np.int64)
    if out["drawn"].shape != (len(sizes),) or (out["drawn"] < 0).any():
        raise StateError(f"drawn={meta['drawn']!r} does not fit {len(sizes)} datasets")
    pending = np.asarray(arrays["pending"], dtype=np.int64).reshape(-1, 3)
    _check_rows(pending[:, 1], pending[:, 2], sizes, "pending")
    if pending.shape[0] and (
        pending[:, 0].min() < 0
        or pending[:, 0].max() >= out["next_ticket"]
        or np.unique(pending[:, 0]).shape[0] != pending.shape[0]
    ):
        raise StateError("array pending holds tickets that were never issued, or twice; the state is corrupt")
    out["pending"] = PendingSet.from_array(pending)
    for name in _BUFFERS:
        buf = GroupBuffer.from_arrays(dict(arrays), name, s.config.group_size)
        if not len(buf.row) == len(buf.ticket) == len(buf.outcome) == len(buf) == buf.rewards.shape[0]:
            raise StateError(f"buffer {name!r} has columns of different lengths; the state is corrupt")
        _check_rows(buf.ds, buf.row, sizes, name)
        out[name] = buf
    counts = StepMetrics(s.names)
    counts.load_state(meta["metrics"])
    out["counts"] = counts
    out["last_metrics"] = dict(meta["last_metrics"])
    if meta["config"]["weights"] == s.config.to_dict()["weights"]:
        out["weights"] = np.asarray(meta["weights"], dtype=np.float64)  # keeps curriculum changes
        if out["weights"].shape != (len(sizes),) or not np.isfinite(out["weights"]).all() or (out["weights"] < 0).any():
            raise StateError(f"weights={meta['weights']!r} do not fit {len(sizes)} datasets")
    return out


def _check_rows(ds: np.ndarray, rows: np.ndarray, sizes: list[int], what: str) -> None:
    if ds.shape[0] == 0:
        return
    if ds.min() < 0 or ds.max() >= len(sizes):
        raise StateError(f"{what} names a dataset index outside 0..{len(sizes) - 1}; the state is corrupt")
    if rows.min() < 0 or (rows >= np.asarray(sizes)[ds]).any():
        raise StateError(f"{what} names a row beyond its dataset; the state is corrupt")


def _apply(s: Scheduler, parsed: dict[str, Any]) -> None:
    """Swap the parsed state in (cannot fail)."""
    for d, info in enumerate(parsed.pop("streams")):
        s.streams[d].load_state(info)
    s.memory.install(parsed.pop("tables"))
    for key, value in parsed.items():
        setattr(s, key, value)


# -- migration ----------------------------------------------------------------------------------
def _migrate(
    s: Scheduler, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray], previous: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A state saved with other data, seed, group size, reward range or weights, carried over.

    Defined as follows (docs/guarantees.md):

    - each prompt's memory (snooze counter, flags, streak) moves by ``(dataset, id)``; prompts new to
      the data start fresh, prompts gone from it are dropped, datasets gone from the mix are dropped
      (with a warning). A dataset whose ids changed needs ``previous[name]``, the data the state was
      saved with, to map saved rows to ids;
    - a dataset's stream keeps its position exactly when its ids and the seed are unchanged; otherwise
      it starts over at the beginning of the epoch it was in (the order of the rest of that epoch is
      not defined by the new data or seed);
    - the step number, ticket counter, encounters drawn per dataset and the cumulative totals carry on;
    - the step in progress is dropped (candidates out for rollout can no longer be reported; the
      groups gathered for the unfinished step are discarded) and the mix weights are the new config's.
    """
    saved_seed = meta.get("seed")
    tables = [PromptTable(len(src)) for src in s.sources]
    streams = [{"epoch": 0, "cursor": 0} for _ in s.sources]
    drawn = np.zeros(len(s.sources), dtype=np.int64)
    moved = 0
    for i, info in enumerate(meta["datasets"]):
        name = info["name"]
        if name not in s.names:
            log.warning("migration drops dataset %r: it is not in the new mix", name)
            continue
        d = s.names.index(name)
        saved = _table(arrays, f"ds{i}", _count(info["size"], f"datasets[{i}].size", 1))
        rows = _saved_rows_to_new(s, d, info, previous)
        keep = rows >= 0
        for field, _ in _TABLE_FIELDS:
            getattr(tables[d], field)[rows[keep]] = getattr(saved, field)[keep]
        if saved.history.shape[0]:
            tables[d].history = np.zeros(len(s.sources[d]), dtype=np.uint8)
            tables[d].history[rows[keep]] = saved.history[keep]
        tables[d].recount()
        moved += int(keep.sum())
        epoch = _count(info["epoch"], f"datasets[{i}].epoch")
        exact = info["fingerprint"] == s.sources[d].fingerprint and saved_seed == s.seed
        streams[d] = {
            "epoch": epoch,
            "cursor": _count(info["cursor"], "cursor", 0, len(s.sources[d]) - 1) if exact else 0,
        }
        drawn[d] = _count(int(meta["drawn"][i]), f"drawn[{i}]")
    counts = StepMetrics(s.names)
    counts.totals = {k: int(meta["metrics"]["totals"][k]) for k in counts.totals}
    G = s.config.group_size
    log.info("migrated the memory of %d prompts by (dataset, id); the unfinished step was dropped", moved)
    return {
        "tables": tables,
        "streams": streams,
        "drawn": drawn,
        "counts": counts,
        "last_metrics": {},
        "step_index": _count(meta["step"], "step"),
        "round": 0,
        "next_ticket": _count(meta["next_ticket"], "next_ticket"),
        "pending": PendingSet(),
        "batch": GroupBuffer(G),
        "surplus": GroupBuffer(G),
        "zero": GroupBuffer(G),
    }


def _saved_rows_to_new(s: Scheduler, d: int, info: Mapping[str, Any], previous: Mapping[str, Any] | None) -> np.ndarray:
    """For each saved row of dataset ``d``, its row in the new data (``-1``: the prompt is gone)."""
    from snooze.data.source import as_source

    name, new = info["name"], s.sources[d]
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

"""`PromptMemory`: what the scheduler remembers about each prompt, as flat numpy columns.

Every run keeps three columns, six bytes a prompt (state format 1 always holds them):

- ``counter`` (int32): encounters left to skip. At an encounter a prompt whose counter is above 0 is
  skipped before any rollout and its counter goes down by one (the draw walk, :mod:`._draw`, does
  this for every policy); a policy that snoozes a prompt adds to it.
- ``flags`` (uint8): ``RETIRED`` (``filter`` saw it too easy: never rolled out again),
  ``EASY_SNOOZED`` (snoozed for being too easy and not rolled out since: its next group decides
  whether it *regressed*) and ``EXCLUDED`` (left out by a curriculum stage). Retired and excluded
  prompts are *blocked*: passed over at every encounter.
- ``streak`` (uint8): consecutive too-easy outcomes (for ``backoff``).

A policy or skip rule adds columns of its own by declaring them (:class:`Column`; ``skip="history"``
adds one byte, ``history``). All datasets live in one set of arrays: ``tables[d]`` is dataset ``d``'s
slice (views, with its cached counts), so a report that spans datasets is applied in one pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from snooze._kit.state import state_array
from snooze.core.errors import StateError

__all__ = ["Column", "BASE_COLUMNS", "PromptTable", "PromptMemory", "RETIRED", "EASY_SNOOZED", "EXCLUDED", "BLOCKED"]

RETIRED = np.uint8(1)
EASY_SNOOZED = np.uint8(2)
EXCLUDED = np.uint8(4)  # set by a curriculum stage: passed over like a retired prompt, but reversible
BLOCKED = np.uint8(RETIRED | EXCLUDED)
FLAG_BITS = np.uint8(RETIRED | EASY_SNOOZED | EXCLUDED)  # every flag a prompt may hold


class Column(NamedTuple):
    """One value per prompt, saved as the array ``ds<d>.<name>`` of each dataset."""

    name: str
    dtype: Any
    minimum: int | None = None
    """Smallest valid value (a state holding less is refused as corrupt); ``None``: any."""
    maximum: int | None = None
    """Largest valid value (a state holding more is refused as corrupt); ``None``: any."""


BASE_COLUMNS: tuple[Column, ...] = (
    Column("counter", np.int32, minimum=0),
    Column("flags", np.uint8, maximum=int(FLAG_BITS)),
    Column("streak", np.uint8),
)


class _Journal:
    """What the memory's columns held before each write since :meth:`PromptMemory.snapshot`, in order:
    ``(columns, rows, {name: values before})``. ``entries`` is ``None`` while no snapshot is open."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: list[tuple[dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray]]] | None = None

    def keep(self, columns: dict[str, np.ndarray], rows: np.ndarray, names: Sequence[str]) -> None:
        if self.entries is not None:
            self.entries.append((columns, rows, {name: columns[name][rows] for name in names}))


class PromptTable:
    """One dataset's prompts: views of its rows in every column, and its counts kept up to date."""

    def __init__(self, columns: dict[str, np.ndarray], journal: _Journal | None = None) -> None:
        self.columns = columns
        self.journal = journal if journal is not None else _Journal()
        self.counter, self.flags, self.streak = columns["counter"], columns["flags"], columns["streak"]
        self.n = int(self.counter.shape[0])  # prompts
        self.recount()

    def __len__(self) -> int:
        return self.n

    def recount(self) -> None:
        """Recompute the cached counts from the columns (after loading state)."""
        self.n_asleep = int(np.count_nonzero(self.counter))
        self.n_retired = int(np.count_nonzero(self.flags & RETIRED))
        self.n_blocked = int(np.count_nonzero(self.flags & BLOCKED))

    def count_down(self, rows: np.ndarray, before: np.ndarray, by: np.ndarray | int = 1) -> None:
        """Lower the snooze counters of ``rows`` (distinct, each counter ``before`` and above 0) by ``by``,
        keeping :attr:`n_asleep` and the open snapshot's journal."""
        if self.journal.entries is not None:
            self.journal.entries.append((self.columns, rows, {"counter": before}))
        after = before - by
        self.counter[rows] = after
        self.n_asleep -= int(np.count_nonzero(after == 0))

    def asleep(self) -> int:
        """Prompts with a snooze counter above 0 (kept up to date, O(1))."""
        return self.n_asleep

    def retired(self) -> int:
        """Prompts retired by ``filter`` (kept up to date, O(1))."""
        return self.n_retired


class PromptMemory:
    """Every dataset's columns in one set of arrays; ``tables[d]`` is dataset ``d``'s slice."""

    def __init__(self, sizes: Sequence[int], columns: Sequence[Column] = ()) -> None:
        """``columns``: the ones a policy or skip rule keeps beyond :data:`BASE_COLUMNS`."""
        self.sizes = [int(n) for n in sizes]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.spec = BASE_COLUMNS + tuple(c for c in columns if c.name not in {b.name for b in BASE_COLUMNS})
        total = int(self.offsets[-1])
        self.columns = {c.name: np.zeros(total, dtype=c.dtype) for c in self.spec}
        bounds = list(zip(self.offsets[:-1].tolist(), self.offsets[1:].tolist()))
        self.journal = _Journal()  # shared with the tables: one order of writes to undo
        self.tables = [PromptTable({k: v[lo:hi] for k, v in self.columns.items()}, self.journal) for lo, hi in bounds]

    # -- undo -------------------------------------------------------------------------------------
    def snapshot(self) -> list[tuple[int, int, int]]:
        """Start recording the rows written from now on (their values before); returns the cached counts.
        O(tables): :meth:`restore` costs what was written since, never a copy of the columns."""
        self.journal.entries = []
        return [(t.n_asleep, t.n_retired, t.n_blocked) for t in self.tables]

    def restore(self, snap: list[tuple[int, int, int]]) -> None:
        """Put every row written since :meth:`snapshot` back, and the cached counts with them."""
        for columns, rows, saved in reversed(self.journal.entries or []):
            for name, values in saved.items():
                columns[name][rows] = values
        for t, (asleep, retired, blocked) in zip(self.tables, snap):
            t.n_asleep, t.n_retired, t.n_blocked = asleep, retired, blocked
        self.journal.entries = None

    def release(self) -> None:
        """Stop recording (the round completed: nothing to undo)."""
        self.journal.entries = None

    def watch(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Before a policy writes ``rows`` (of the whole memory): what :meth:`settle` needs to keep the
        cached counts right from the columns themselves, whatever the policy says it did."""
        u = np.unique(rows)
        self.journal.keep(self.columns, u, list(self.columns))  # a policy may write any column of these rows
        return u, self.columns["counter"][u] > 0, self.columns["flags"][u].copy()

    def settle(self, watched: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """The cached counts of each table after a policy wrote the watched rows: asleep, retired and
        blocked prompts counted from the columns before and after (derived by the memory, its owner;
        a policy cannot desync them by what its ``Changes`` say)."""
        u, asleep0, flags0 = watched
        flags1 = self.columns["flags"][u]
        ds = np.searchsorted(self.offsets, u, side="right") - 1
        D = len(self.tables)
        pairs = (
            ("n_asleep", asleep0, self.columns["counter"][u] > 0),
            ("n_retired", (flags0 & RETIRED) != 0, (flags1 & RETIRED) != 0),
            ("n_blocked", (flags0 & BLOCKED) != 0, (flags1 & BLOCKED) != 0),
        )
        for name, before, after in pairs:
            delta = np.bincount(ds, weights=after.astype(np.int64) - before.astype(np.int64), minlength=D)
            if delta.any():
                for d, t in enumerate(self.tables):
                    setattr(t, name, getattr(t, name) + int(delta[d]))

    def set_excluded(self, d: int, rows: np.ndarray, excluded: bool) -> int:
        """Set or clear ``EXCLUDED`` on dataset ``d``'s ``rows``; how many changed."""
        table = self.tables[d]
        rows = np.unique(rows)  # an id named twice changes once
        self.journal.keep(table.columns, rows, ("flags",))
        before = (table.flags[rows] & EXCLUDED) != 0
        if excluded:
            table.flags[rows] |= EXCLUDED
        else:
            table.flags[rows] &= ~EXCLUDED
        table.recount()
        return int(np.count_nonzero(before != excluded))

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"datasets": [{column: array}]}``: each dataset's columns, copied."""
        return {"datasets": [{k: v.copy() for k, v in t.columns.items()} for t in self.tables]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Take each dataset's columns. The base columns must be there; a column of this run's policy
        that the state lacks starts at 0 (e.g. a state saved under ``skip="counter"`` loaded under
        ``"history"``: every prompt unseen); columns this run does not keep are ignored."""
        saved = state["datasets"]
        if len(saved) != len(self.tables):
            raise StateError(
                f"the state holds the memory of {len(saved)} datasets, this scheduler has {len(self.tables)}"
            )
        base = {c.name for c in BASE_COLUMNS}
        loaded: list[dict[str, np.ndarray]] = []
        for d, (cols, n) in enumerate(zip(saved, self.sizes)):
            mine: dict[str, np.ndarray] = {}
            for c in self.spec:
                if c.name not in cols and c.name not in base:
                    continue
                arr = state_array(cols[c.name], f"ds{d}.{c.name}", (n,), c.dtype, copy=False)
                if c.minimum is not None and n and int(arr.min()) < c.minimum:
                    raise StateError(f"array ds{d}.{c.name} holds values below {c.minimum}; the state is corrupt")
                if c.maximum is not None and n and int(arr.max()) > c.maximum:
                    raise StateError(f"array ds{d}.{c.name} holds values above {c.maximum}; the state is corrupt")
                mine[c.name] = arr
            loaded.append(mine)
        for t, mine in zip(self.tables, loaded):  # everything checked: take it over
            for name, column in t.columns.items():
                column[...] = mine.get(name, 0)
            t.recount()

"""`DatasetStream`: the order in which one dataset's prompts come up (its *encounters*).

Each epoch is a fresh permutation drawn from ``(seed, dataset key, epoch)`` (or the dataset's own
order, every epoch, with ``shuffle=False``): the state is two
integers, ``(epoch, cursor)``, not a stored order, so it is tiny to save and the same on every
machine (docs/concepts.md, "Streams and epochs").
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from snooze._kit.state import state_int

__all__ = ["DatasetStream", "dataset_key"]


def dataset_key(name: str) -> int:
    """A stable 32-bit key for a dataset name, so adding a dataset never reshuffles the others."""
    return zlib.crc32(name.encode("utf-8"))


class DatasetStream:
    """Rows ``0..n-1`` in a seeded permutation per epoch (in order when not ``shuffle``); finite (``epochs``) or
    endless."""

    def __init__(self, name: str, n: int, seed: int, epochs: int | None = None, shuffle: bool = True) -> None:
        self.name, self.n, self.seed, self.epochs, self.shuffle = name, n, seed, epochs, shuffle
        self.key = dataset_key(name)
        self.epoch = 0
        self.cursor = 0
        self._perm: np.ndarray | None = None
        self._perm_epoch = -1

    @property
    def exhausted(self) -> bool:
        return self.epochs is not None and self.epoch >= self.epochs

    def permutation(self) -> np.ndarray:
        """The current epoch's order (drawn once per epoch and cached: ``[n]`` int32, int64 past 2**31)."""
        if self._perm is None or self._perm_epoch != self.epoch:
            dtype = np.int64 if self.n >= 2**31 else np.int32
            if self.shuffle:
                self._perm = np.random.default_rng([self.seed, self.key, self.epoch]).permutation(self.n).astype(dtype)
            else:
                self._perm = np.arange(self.n, dtype=dtype)
            self._perm_epoch = self.epoch
        return self._perm

    def peek(self, k: int) -> np.ndarray:
        """Up to ``k`` next rows, all from the current epoch (never crossing into the next)."""
        if self.exhausted:
            return np.empty(0, dtype=np.int64)
        return self.permutation()[self.cursor : self.cursor + k]

    def advance(self, k: int) -> None:
        """Consume ``k`` rows of the current epoch; move to the next epoch when it is used up."""
        self.cursor += k
        if self.cursor >= self.n:
            self.epoch += 1
            self.cursor = 0

    def snapshot(self) -> tuple[int, int]:
        """The position, for :meth:`restore` (an undone round)."""
        return self.epoch, self.cursor

    def restore(self, snap: tuple[int, int]) -> None:
        self.epoch, self.cursor = snap

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "cursor": self.cursor}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        epoch = state_int(state["epoch"], f"stream of {self.name!r}: epoch")
        cursor = state_int(state["cursor"], f"stream of {self.name!r}: cursor", 0, self.n - 1)
        self.epoch, self.cursor = epoch, cursor

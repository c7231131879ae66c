"""`DatasetStream`: the order in which one dataset's prompts come up (its *encounters*).

Each epoch is a fresh permutation drawn from ``(seed, dataset key, epoch)``: state is three
integers, not a stored order, so it is tiny to save and the same on every machine.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

__all__ = ["DatasetStream", "dataset_key"]


def dataset_key(name: str) -> int:
    """A stable 32-bit key for a dataset name, so adding a dataset never reshuffles the others."""
    return zlib.crc32(name.encode("utf-8"))


class DatasetStream:
    """Rows ``0..n-1`` in a seeded permutation per epoch; finite (``epochs``) or endless."""

    def __init__(self, n: int, seed: int, key: int, epochs: int | None = None) -> None:
        self.n, self.seed, self.key, self.epochs = n, seed, key, epochs
        self.epoch = 0
        self.cursor = 0
        self._perm: np.ndarray | None = None
        self._perm_epoch = -1

    @property
    def exhausted(self) -> bool:
        return self.epochs is not None and self.epoch >= self.epochs

    def _permutation(self) -> np.ndarray:
        if self._perm_epoch != self.epoch:
            rng = np.random.default_rng([self.seed, self.key, self.epoch])
            self._perm = rng.permutation(self.n).astype(np.int64 if self.n >= 2**31 else np.int32)
            self._perm_epoch = self.epoch
        assert self._perm is not None
        return self._perm

    def peek(self, k: int) -> np.ndarray:
        """Up to ``k`` next rows, all from the current epoch (never crossing into the next)."""
        if self.exhausted:
            return np.empty(0, dtype=np.int64)
        return self._permutation()[self.cursor : self.cursor + k]

    def advance(self, k: int) -> None:
        """Consume ``k`` rows of the current epoch; move to the next epoch when it is used up."""
        self.cursor += k
        if self.cursor >= self.n:
            self.epoch += 1
            self.cursor = 0

    def state(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "cursor": self.cursor}

    def load_state(self, state: dict[str, Any]) -> None:
        self.epoch, self.cursor = int(state["epoch"]), int(state["cursor"])

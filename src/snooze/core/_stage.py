"""A curriculum stage's changes, checked before any is made (the rows of the ids it names:
:func:`snooze.core.source.dataset_rows`), and a plan of ``(dataset, rows, excluded)`` in which each prompt
appears once, at its last setting."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from snooze.core.errors import DataError

__all__ = ["named_ids", "last_wins"]


def named_ids(kind: str, ids_by_dataset: Mapping[str, Sequence[Any]]) -> list[tuple[str, Sequence[Any]]]:
    """``set_stage``'s ``exclude`` / ``include``: a mapping of dataset name to ids."""
    if not isinstance(ids_by_dataset, Mapping):
        raise DataError(
            f"set_stage: {kind} must map dataset names to lists of ids, got {type(ids_by_dataset).__name__}"
        )
    return list(ids_by_dataset.items())


def last_wins(plan: Sequence[tuple[int, np.ndarray, bool]]) -> list[tuple[int, np.ndarray, bool]]:
    """The plan with each (dataset, row) once, at its last setting: the count of changes is then net."""
    out = []
    for d in sorted({d for d, _, _ in plan}):
        rows = np.concatenate([r for dd, r, _ in plan if dd == d])
        flags = np.concatenate([np.full(len(r), e, dtype=bool) for dd, r, e in plan if dd == d])
        unique, first = np.unique(rows[::-1], return_index=True)  # first in reverse: the last setting
        last = flags[::-1][first]
        out += [(d, unique[~last], False), (d, unique[last], True)]
    return out

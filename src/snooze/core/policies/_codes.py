"""The predictive policy's prompt codes (the category of a prompt's last group and how many in a row) and the
decay weights its rates are measured with (docs/concepts.md, "Predictive skipping")."""

from __future__ import annotations

import numpy as np

from snooze.core.classify import SIGNAL, TOO_EASY, TOO_HARD

__all__ = [
    "CATEGORIES",
    "RUN_CAP",
    "N_CODES",
    "RATE_HALFLIFE",
    "CODE_HALFLIFE",
    "PRIOR_GROUPS",
    "RELAX_LIMIT",
    "category",
    "next_code",
    "decay",
]

CATEGORIES = ("E", "S+", "S-", "H", "F")
"""A group's outcome as a code sees it: too easy, signal with mean >= 1/2, signal below, too hard, flat."""
_C = len(CATEGORIES)
RUN_CAP = 8
"""Run lengths counted in a code: 1, 2, ..., ``RUN_CAP`` (and more) groups of the same category in a row."""
N_CODES = 1 + _C * RUN_CAP
"""0: unseen; ``1 + RUN_CAP * c + (k - 1)``: the last ``k`` groups (``RUN_CAP``: at least that many) were of
category ``c``."""

RATE_HALFLIFE = 256
"""Groups over which the stream's signal rate ``r`` halves its weight: about 8-16 steps of generation
in the reference experiment, short enough to follow learning, long enough to be more than noise."""
CODE_HALFLIFE = 64
"""Groups of one code over which its measured signal rate halves its weight (codes that are skipped
are measured only on their re-looks, so a longer window would lag far behind the model)."""
PRIOR_GROUPS = 4.0
"""Pseudo-groups at the stream's rate ``r`` added to every code's measurement: a code with few groups
is predicted as an average draw, and an average draw is never skipped (``q < margin * r`` fails at margin <= 1)."""
RELAX_LIMIT = 4
"""Relaxations a dataset may take in one step (:meth:`Predictive.relax`): the margin halves at each of
the first ``RELAX_LIMIT - 1``, and the last turns skipping off until the step ends."""
_MAX_CLOCK = 2**31 - 2  # the ``looked`` column holds clock + 1 in an int32
# the backoff exponent's cap: periods beyond 2**16 recheck periods are "never" in any run
# (PredictiveOptions.check refuses a longest period that overflows)
_MAX_DOUBLINGS = 16
_DECAY_SIZE = 1 << 14  # decay factors tabulated for up to this many groups in one report (more: old weight dropped)


def _decay_table(halflife: float) -> np.ndarray:
    table = 0.5 ** (np.arange(_DECAY_SIZE + 1) / halflife)
    table[-1] = 0.0
    return table


_DECAY = {RATE_HALFLIFE: _decay_table(RATE_HALFLIFE), CODE_HALFLIFE: _decay_table(CODE_HALFLIFE)}


def decay(groups: np.ndarray, halflife: int) -> np.ndarray:
    """The weight left to old groups after ``groups`` new ones, ``0.5 ** (groups / halflife)``, read from a
    table (the same numbers on every machine and in the tests' reference model)."""
    return _DECAY[halflife][np.minimum(groups, _DECAY_SIZE)]


def category(outcomes: np.ndarray, means: np.ndarray) -> np.ndarray:
    """Each group's category (index into :data:`CATEGORIES`) from its outcome and mean (a fraction of the range).
    ``[N]``"""
    cat = np.full(outcomes.shape, 4, dtype=np.int64)  # flat unless below
    cat[outcomes == TOO_EASY] = 0
    signal = outcomes == SIGNAL
    cat[signal & (means >= 0.5)] = 1
    cat[signal & (means < 0.5)] = 2
    cat[outcomes == TOO_HARD] = 3
    return cat


def next_code(code: np.ndarray, cat: np.ndarray) -> np.ndarray:
    """The code after a group of category ``cat``: the run of its category grows by one, or a new run starts."""
    code = code.astype(np.int64)
    last, run = (code - 1) // RUN_CAP, (code - 1) % RUN_CAP + 1  # category and run length of the code (unseen: -1, 0)
    grown = np.where((code > 0) & (last == cat), np.minimum(run + 1, RUN_CAP), 1)
    return (1 + RUN_CAP * cat + grown - 1).astype(np.uint8)

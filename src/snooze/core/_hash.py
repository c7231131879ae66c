"""The scheduler's one stateless hash: a uniform number in [0, 1) per encounter of a prompt.

An encounter is ``(seed, dataset key, epoch, row)`` (a prompt comes up once per epoch). Its number is a pure
function of those four and of a *stream* naming who asks, so nothing is saved for it: a decision made from it
is the same on every machine, after any resume, and whatever else the run has seen. Each stream is its own
independent sequence, so the audit's picks (``"audit"``) never follow the skip rules' coin flips
(``"skip"``: ``skip="history"``, ``predictive``'s jitter) or the rounds' budgets (``"budget"``).

The mixing is splitmix64's multiply-xorshift finaliser (:func:`_finalise`) on ``uint64``; the top 53 bits of
the result make the float. The ``skip`` stream combines its inputs in one linear step and finalises once with
shifts ``(31, 31, 29)``, the other streams chain a finalising step per input with splitmix64's ``(30, 27, 31)``:
both are kept as they were, bit for bit, so that every run replays exactly as before the two were made one.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

__all__ = ["stable_uniform", "encounter_uniform", "audit_uniform", "Stream"]

Stream = Literal["audit", "budget", "skip"]

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)  # splitmix64's multipliers
_SPLITMIX = (30, 27, 31)
_SKIP_SHIFTS = (31, 31, 29)
_AUDIT_SALT = 0x5A0D17A0D17C0FFE  # keeps the audit's numbers apart from the streams' permutations
_BUDGET_KEY = 2**40 + 0xB0D6E7  # the rounds' budgets: a "dataset key" no dataset has (crc32s of names: < 2**32)
_MASK = 2**64 - 1


def _finalise(x: np.ndarray, shifts: tuple[int, int, int] = _SPLITMIX) -> np.ndarray:
    """splitmix64's finaliser on ``uint64`` (arithmetic mod 2**64): every input bit reaches every output bit."""
    a, b, c = (np.uint64(s) for s in shifts)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> a)) * _M1
        x = (x ^ (x >> b)) * _M2
    return x ^ (x >> c)


def _to_unit(h: np.ndarray) -> np.ndarray:
    """The top 53 bits of each ``uint64`` as a float in [0, 1)."""
    return (h >> np.uint64(11)).astype(np.float64) * 2.0**-53


def stable_uniform(seed: int, key: int, epoch: int, rows: np.ndarray, stream: Stream) -> np.ndarray:
    """``[M]`` uniforms in [0, 1), one per encounter of rows ``rows`` of the dataset with stream key ``key``
    (:func:`~snooze.core._stream.dataset_key`) in ``epoch`` of a run seeded ``seed``, in the sequence of
    ``stream`` (the module doc). A pure function of its arguments. ``[M] -> [M]``"""
    rows = np.asarray(rows).astype(np.uint64)
    if stream == "skip":
        base = ((int(seed) * 0x9E3779B1 + int(key)) * 0x85EBCA77 + int(epoch) * 0xC2B2AE3D) & _MASK
        return _to_unit(_finalise(rows ^ np.uint64(base), _SKIP_SHIFTS))
    if stream == "budget":
        key = _BUDGET_KEY
    chained = np.array([int(seed) % 2**64], dtype=np.uint64) ^ np.uint64(_AUDIT_SALT)
    chained = _finalise(_finalise(chained) ^ np.uint64(int(key) % 2**64))
    chained = _finalise(chained ^ np.uint64(int(epoch) % 2**64))
    return _to_unit(_finalise(chained ^ rows))


def encounter_uniform(seed: int, key: int, epoch: int, rows: np.ndarray) -> np.ndarray:
    """The skip rules' numbers (``stream="skip"``): ``skip="history"`` skips an encounter when its number is below
    the prompt's skip probability; ``predictive`` jitters a period with it. ``[M] -> [M]``"""
    return stable_uniform(seed, key, epoch, rows, "skip")


def audit_uniform(seed: int, key: int, epoch: int, rows: np.ndarray) -> np.ndarray:
    """The audit's numbers (``stream="audit"``): an encounter is audited when its number is below the share.
    ``[M] -> [M]``"""
    return stable_uniform(seed, key, epoch, rows, "audit")

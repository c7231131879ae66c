"""``predictive``: skip an encounter when the prompt is predicted to be worth less than the draw that
would replace it (docs/concepts.md, "Predictive skipping").

The trade, explicitly. Rolling a prompt out costs one group. Skipping it costs nothing, and the
stream then draws another prompt in its place, whose group carries signal with probability ``r_d``:
the signal rate of the groups of the prompt's dataset generated lately (weighted over about its last
256 groups). A skip pays when the skipped prompt's own chance ``q`` of a signal group is below
``r_d``. So an encounter is skipped when ``q < margin * r_d``: margin 1 is exactly that trade;
below 1 skips only prompts that are clearly worse than a replacement, which keeps the batch closer to
DAPO's. The rate compared with is the prompt's own dataset's, in either mix: a dataset that is mostly
mastered is not emptied for another one's sake (the starvation that makes ``filter`` collapse on a
two-task mix).

``q`` is predicted from the prompt's past groups on both sides, by calibration rather than by a
model of pass rates. Each prompt keeps a one-byte *code*: the category of its last group (too easy
``E``, signal with mean at least 1/2 ``S+``, signal below 1/2 ``S-``, too hard ``H``, flat ``F``) and
how many groups in a row had it (1 to 8, and more; 41 codes with "unseen"). For every dataset and
code the policy measures how often a group of a prompt with that code had signal (weighted over
about the code's last 64 groups, shrunk by 4 pseudo-groups towards the code one group shorter in its
run, and a run of one towards ``r_d``: a code with little evidence is taken for its neighbour, or for an
average draw, which is never skipped). The run length is what predicts, on both sides: a prompt that
failed once is often being learned, one solved eight times in a row rarely gives signal again
(docs/results.md, "Predictive skipping: how its settings were chosen").

Nothing is known of an unseen prompt: it is never skipped. A skipped prompt is looked at again once
its *age* reaches a period drawn at its last group in ``[1/2, 3/2) * recheck`` *passes*,
times ``backoff ** (k - 1)`` after k too-easy groups in a row: forgetting (``snooze/regressed``)
is caught and the codes' rates stay measured. Ages are counted on the run's *clock*, the groups
generated so far (all datasets), and a pass is as many groups as the datasets have prompts (the
generation DAPO would spend to look at every prompt once): a period does not run out when most of the
pool is skipped and the stream races through it, as periods in encounters do; it means the same on a
pool visited 100 times as on one visited 10 times, which a period in training steps does not; and it
does not stall for a dataset that is mostly skipped, as a clock of each dataset's own groups does. The
random numbers are a hash of ``(seed, dataset, row, clock at the last group)``: nothing to save, the same
after a resume.

A skip pays only while a replacement is left: when a draw walks a whole epoch of a dataset and every
prompt is skipped, the policy relaxes (:meth:`Predictive.relax`) instead of ending the step short.

State: two columns, 5 bytes a prompt beside the base columns (``code`` uint8; ``looked`` int32: the
clock at the prompt's last group + 1, 0 for never: a run may generate up to 2**31 - 2 groups), the
clock, and per dataset its rate, its codes' rates (2 + 82 numbers) and the relaxations of the step in
progress, saved as ``meta.policy``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from snooze._kit.checks import as_real
from snooze._kit.state import state_int
from snooze.core._memory import EASY_SNOOZED, Column, PromptMemory, PromptTable
from snooze.core._stream import DatasetStream
from snooze.core.classify import SIGNAL
from snooze.core.errors import ConfigError, StateError
from snooze.core.options import Options
from snooze.core.policies._codes import (
    _C,
    _MAX_CLOCK,
    _MAX_DOUBLINGS,
    CATEGORIES,
    CODE_HALFLIFE,
    N_CODES,
    PRIOR_GROUPS,
    RATE_HALFLIFE,
    RELAX_LIMIT,
    RUN_CAP,
    category,
    decay,
    next_code,
)
from snooze.core.policies.base import Changes, Context, Policy, Report, register_policy
from snooze.core.policies.history import encounter_uniform

__all__ = [
    "Predictive",
    "PredictiveOptions",
    "CATEGORIES",
    "N_CODES",
    "category",
    "next_code",
    "decay",
    "RATE_HALFLIFE",
    "CODE_HALFLIFE",
    "PRIOR_GROUPS",
]


@dataclass(frozen=True)
class PredictiveOptions(Options):
    """The options of ``policy="predictive"``."""

    margin: float = 0.5
    """Skip an encounter when the prompt's predicted chance of a signal group is below this times the
    signal rate of the stream's recent draws (1.0: exactly when a replacement draw is expected to give
    more signal; smaller skips less)."""

    hard_margin: float | None = None
    """The margin of prompts whose last groups were too hard (all wrong); ``None``: ``margin``; 0: never
    skip a prompt for being too hard."""

    recheck: float = 2.0
    """Passes after which a skipped prompt is looked at again (drawn in [1/2, 3/2) of it at each group),
    so forgetting is seen and predictions stay measured. A pass is as many groups of the prompt's
    dataset as it has prompts (what DAPO generates to look at each once)."""

    backoff: float = 2.0
    """The re-look period grows by this factor per too-easy group in a row after the first (1.0: a fixed period)."""

    def check(self) -> None:
        self.set_checked(
            "backoff", as_real(self.backoff, "backoff", 1.0, allowed="a finite number >= 1.0 (1.0 disables it)")
        )
        m = as_real(
            self.margin, "margin", 0.0, allowed="a finite number > 0 (1.0: skip when a replacement draw is worth more)"
        )
        if m <= 0:
            raise ConfigError(
                f"margin={self.margin!r}: must be a finite number > 0 (1.0: skip when a replacement draw is worth more)"
            )
        self.set_checked("margin", m)
        if self.hard_margin is not None:
            self.set_checked(
                "hard_margin",
                as_real(
                    self.hard_margin,
                    "hard_margin",
                    0.0,
                    allowed="a finite number >= 0 (0: never skip too-hard prompts), or None",
                ),
            )
        r = as_real(self.recheck, "recheck", 0.0, allowed="a finite number of passes > 0")
        if r <= 0:
            raise ConfigError(f"recheck={self.recheck!r}: must be a finite number of passes > 0")
        self.set_checked("recheck", r)
        if not _finite_product(self.backoff, _MAX_DOUBLINGS, r):
            pair = [
                f"backoff={self.backoff!r}",
                f"recheck={r!r}",
            ]  # the larger factor first: the name an error leads with
            if math.log(r) > _MAX_DOUBLINGS * math.log(self.backoff):
                pair.reverse()
            raise ConfigError(
                f"{', '.join(pair)}: the longest re-look period, "
                f"recheck x backoff**{_MAX_DOUBLINGS}, must be a finite number; give smaller values"
            )


def _finite_product(base: float, power: int, times: float) -> bool:
    """Whether ``times * base**power`` is a finite float (``base**power`` alone raises ``OverflowError`` past
    1.8e308)."""
    try:
        return math.isfinite(float(times) * base**power)
    except OverflowError:
        return False


@register_policy("predictive")
class Predictive(Policy):
    """Skip an encounter when the prompt's code predicts less signal than ``margin`` times its dataset's rate."""

    Options = PredictiveOptions
    columns = (Column("code", np.uint8, maximum=N_CODES - 1), Column("looked", np.int32, minimum=0))

    def __init__(self, options: Options, context: Context) -> None:
        super().__init__(options, context)
        opts = self.options
        self.margin = float(opts.margin)
        hard = opts.margin if opts.hard_margin is None else opts.hard_margin
        # [N_CODES] margin of each code
        self.by_code = np.where((np.arange(N_CODES) - 1) // RUN_CAP == 3, float(hard), self.margin)
        self.by_code[0] = 0.0  # an unseen prompt is never skipped
        self.recheck = float(opts.recheck)
        self.growth = np.array([opts.backoff**d for d in range(_MAX_DOUBLINGS + 1)])  # [17] period factor per doubling
        names, sizes = context.names, context.sizes
        self.names = list(names)
        self.index = {name: d for d, name in enumerate(self.names)}
        D = len(self.names)
        self.rate = np.zeros((D, 2))  # per dataset [signal, groups], weighted over its groups (RATE_HALFLIFE)
        self.codes = np.zeros((D, 2, N_CODES))  # per dataset and code [signal, groups] (CODE_HALFLIFE)
        self.relaxed = np.zeros(D, dtype=np.int64)  # per dataset: relaxations taken in this step (relax)
        self.pass_size = max(int(sum(sizes)), 1)  # groups of a pass: every prompt of every dataset once
        self.clock = 0  # groups generated (reported) so far, all datasets: the clock of ages
        self._update_low()

    # -- the prediction ----------------------------------------------------------------------------
    def stream_rate(self) -> np.ndarray:
        """``r`` per dataset ``[D]``: the signal rate of its groups generated lately (0 before any)."""
        n = self.rate[:, 1]
        return np.divide(self.rate[:, 0], n, out=np.zeros_like(n), where=n > 0)

    def predicted(self) -> np.ndarray:
        """``q`` per dataset and code ``[D, N_CODES]``: the code's measured signal rate in that dataset,
        shrunk by :data:`PRIOR_GROUPS` towards the code one group shorter in its run (a run of one:
        towards the dataset's ``r``), so a longer run than any measured yet starts from what was measured."""
        D = len(self.names)
        r = self.stream_rate()
        sig = self.codes[:, 0, 1:].reshape(D, _C, RUN_CAP)  # [D, C, K] by category and run length
        groups = self.codes[:, 1, 1:].reshape(D, _C, RUN_CAP)
        q = np.empty((D, _C, RUN_CAP))
        prior = np.repeat(r[:, None], _C, axis=1)  # [D, C]
        for k in range(RUN_CAP):
            prior = q[:, :, k] = (sig[:, :, k] + PRIOR_GROUPS * prior) / (groups[:, :, k] + PRIOR_GROUPS)
        return np.concatenate([r[:, None], q.reshape(D, _C * RUN_CAP)], axis=1)

    def margins(self) -> np.ndarray:
        """The margin in force per dataset and code ``[D, N_CODES]``: ``margin`` (codes of a run
        of too-hard groups: ``hard_margin``; unseen: 0), halved at each relaxation of this step,
        0 (no code is low) after :data:`RELAX_LIMIT` of them."""
        scale = np.where(self.relaxed < RELAX_LIMIT, 0.5**self.relaxed, 0.0)
        return scale[:, None] * self.by_code[None, :]

    def _update_low(self) -> None:
        # [D, N_CODES] bool: a prompt with this code is skipped unless due for a re-look
        self.low = self.predicted() < self.margins() * self.stream_rate()[:, None]

    def periods(self, streak: np.ndarray) -> np.ndarray:
        """The re-look period in passes before its random factor, from the too-easy streak ``[K]``."""
        doublings = np.clip(streak.astype(np.int64) - 1, 0, _MAX_DOUBLINGS)
        return self.recheck * self.growth[doublings]

    def skip_mask(self, table: PromptTable, stream: DatasetStream, rows: np.ndarray, awake: np.ndarray) -> np.ndarray:
        skip = np.zeros(rows.shape[0], dtype=bool)
        d = self.index[stream.name]
        if self.relaxed[d] >= RELAX_LIMIT:
            return skip
        maybe = np.flatnonzero(awake & self.low[d][table.columns["code"][rows]])
        if maybe.shape[0] == 0:
            return skip
        r = rows[maybe].astype(np.int64)
        looked = table.columns["looked"][r].astype(np.int64)
        salted = r.astype(np.uint64) | (looked.astype(np.uint64) << np.uint64(32))  # a fresh random period each group
        passes = self.periods(table.streak[r]) * (0.5 + encounter_uniform(stream.seed, stream.key, 0, salted))
        skip[maybe] = self.clock - (looked - 1) < passes * self.pass_size  # age below the period: not due yet
        return skip

    # -- learning from a report --------------------------------------------------------------------
    def report(self, memory: PromptMemory, report: Report) -> Changes:
        """Each group moves its prompt's code on and is counted for the code it had; a prompt with
        several groups in one report (an epoch edge) takes them in report order, and regresses at most once."""
        cat = category(report.outcomes, report.means())
        signal = (report.outcomes == SIGNAL).astype(np.float64)
        ds, rows = report.group_ds.astype(np.int64), report.group_rows
        if not report.repeated:
            return Changes(regressed=self._apply(memory.columns, ds, rows, cat, signal))
        p = report.prompts()
        occurrence = _occurrence(rows)
        regressed = np.zeros(p.rows.shape[0], dtype=bool)
        for k in range(int(occurrence.max()) + 1):  # the k-th group of each prompt: distinct rows again
            sel = occurrence == k
            hit = self._apply(memory.columns, ds[sel], rows[sel], cat[sel], signal[sel])
            regressed |= np.isin(p.rows, rows[sel][hit])
        return Changes(regressed=regressed)

    def _apply(
        self, cols: dict[str, np.ndarray], ds: np.ndarray, rows: np.ndarray, cat: np.ndarray, signal: np.ndarray
    ) -> np.ndarray:
        """One group each for distinct ``rows``; which of them regressed (last group too easy, this one not)."""
        before = cols["code"][rows]
        self._learn(ds, before, signal)
        self.clock += int(ds.shape[0])
        flags = cols["flags"][rows]
        easy = cat == 0
        regressed = ((flags & EASY_SNOOZED) != 0) & ~easy
        cols["code"][rows] = next_code(before, cat)
        cols["looked"][rows] = self.clock + 1
        cols["streak"][rows] = np.where(easy, np.minimum(cols["streak"][rows].astype(np.int32) + 1, 255), 0)
        cols["flags"][rows] = np.where(easy, flags | EASY_SNOOZED, flags & ~EASY_SNOOZED)
        self._update_low()
        return regressed

    def _learn(self, ds: np.ndarray, before: np.ndarray, signal: np.ndarray) -> None:
        """Fold groups into their dataset's ``r`` and into their codes' rates (the groups of one report weigh alike)."""
        D = len(self.names)
        n = np.bincount(ds, minlength=D)
        self.rate *= decay(n, RATE_HALFLIFE)[:, None]
        self.rate += np.stack([np.bincount(ds, weights=signal, minlength=D), n], axis=1)
        at = ds * N_CODES + before.astype(np.int64)
        k = np.bincount(at, minlength=D * N_CODES).reshape(D, N_CODES)
        hits = np.bincount(at, weights=signal, minlength=D * N_CODES).reshape(D, N_CODES)
        self.codes *= decay(k, CODE_HALFLIFE)[:, None, :]
        self.codes += np.stack([hits, k], axis=1)

    def relax(self, d: int) -> bool:
        """A whole epoch of dataset ``d`` was skipped: no replacement draw is left this step, so a skip
        now saves a group but leaves a batch slot empty. Halve the margin (the prompts predicted best
        among the skipped come back first); after :data:`RELAX_LIMIT` relaxations skip nothing until the
        step ends (the rest of the step draws as DAPO does)."""
        if self.relaxed[d] >= RELAX_LIMIT:
            return False
        self.relaxed[d] += 1
        self._update_low()
        return True

    def end_step(self, steps: int) -> None:
        if self.relaxed.any():
            self.relaxed[:] = 0
            self._update_low()

    # -- state -------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """JSON-safe: the clock, and per dataset (by name) its rate, codes' rates and the relaxations of this step."""
        per = {
            name: {"rate": self.rate[d].tolist(), "codes": self.codes[d].tolist(), "relaxed": int(self.relaxed[d])}
            for d, name in enumerate(self.names)
        }
        return {"clock": self.clock, "datasets": per}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Checks all of it first. Datasets of this run that the state lacks (a migration to new data)
        start unmeasured; the state's datasets must all be this run's."""
        if (
            not isinstance(state, Mapping)
            or set(state) != {"clock", "datasets"}
            or not isinstance(state["datasets"], Mapping)
        ):
            raise StateError("the 'predictive' policy state must hold 'clock' and 'datasets'; the state is corrupt")
        clock = state_int(state["clock"], "policy.clock", 0, _MAX_CLOCK)
        unknown = sorted(set(state["datasets"]) - set(self.index))
        if unknown:
            raise StateError(
                f"the 'predictive' policy state names datasets {unknown} that this scheduler does not have"
            )
        rate, codes, relaxed = np.zeros_like(self.rate), np.zeros_like(self.codes), np.zeros_like(self.relaxed)
        for name, part in state["datasets"].items():
            if not isinstance(part, Mapping) or set(part) != {"rate", "codes", "relaxed"}:
                raise StateError(
                    f"policy.datasets[{name!r}] must hold 'rate', 'codes' and 'relaxed'; the state is corrupt"
                )
            d = self.index[name]
            rate[d] = _counts(part["rate"], (2,), f"policy.datasets[{name!r}].rate")
            codes[d] = _counts(part["codes"], (2, N_CODES), f"policy.datasets[{name!r}].codes")
            relaxed[d] = state_int(part["relaxed"], f"policy.datasets[{name!r}].relaxed", 0, RELAX_LIMIT)
        self.clock, self.rate, self.codes, self.relaxed = clock, rate, codes, relaxed
        self._update_low()


def _counts(value: Any, shape: tuple[int, ...], what: str) -> np.ndarray:
    """``[signal, groups]`` weights: finite, at least 0, signal at most groups."""
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise StateError(f"{what} is not a list of numbers; the state is corrupt") from None
    if (
        arr.shape != shape
        or not np.isfinite(arr).all()
        or (arr < 0).any()
        or (arr[0] > arr[1] * (1 + 1e-9) + 1e-12).any()
    ):
        raise StateError(f"{what} must be {shape} finite weights >= 0 with signal <= groups; the state is corrupt")
    return arr


def _occurrence(rows: np.ndarray) -> np.ndarray:
    """For each group, how many groups of the same prompt come before it in the report (0, 1, ...). ``[N]``"""
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    index = np.arange(rows.shape[0])
    starts = np.maximum.accumulate(np.where(np.r_[True, ordered[1:] != ordered[:-1]], index, 0))
    out = np.empty(rows.shape[0], dtype=np.int64)
    out[order] = index - starts
    return out

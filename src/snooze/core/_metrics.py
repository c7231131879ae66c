"""Per-step and cumulative metrics under the names docs/metrics.md lists (docs/concepts.md, "Metrics").

Every generated or carried-in group ends a step in exactly one place (the step's
:class:`~snooze.core.types.StepRecord`), so per dataset and in total::

    gen_groups + carried_in == batch_groups + dropped + discarded + carried_out

:class:`StepMetrics` counts draws and reports while the step runs; at its end the scheduler hands over a
:class:`StepEnd` (the step's record and a few levels of its state) and gets the flat metrics dict back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from snooze._kit.state import state_int, state_ints
from snooze.core._audit import Audit
from snooze.core._cost import cost_rollouts, cost_tokens
from snooze.core.classify import OUTCOME_NAMES, SIGNAL, TOO_EASY, TOO_HARD
from snooze.core.types import PLACES, StepRecord

__all__ = ["StepMetrics", "StepEnd", "TOTAL_KEYS"]

_DS_KEYS = ("gen_groups", "signal", "skipped")
_FROM_RECORD = {  # per-dataset count -> the places of the step's record it counts
    "dropped": ("dropped", "too_stale"),
    "discarded": ("discarded",),
    "carried_out": ("carried",),
    "batch": ("trained", "padded"),
    "padded": ("padded",),
}
_RECORD_COUNTS = np.array([[p in places for places in _FROM_RECORD.values()] for p in PLACES], dtype=np.int64)
"""``[places, keys]``: 1 where a place counts towards a key of :data:`_FROM_RECORD`."""
_SCALARS = (
    "gen/cancelled",
    "gen/rollouts",  # rollouts reported (each report's rewards, counted: audit and screening rollouts too)
    "gen/tokens",  # their completion tokens, as the trainer reported them
    "gen/tokens_missing",  # groups reported without a token count
    "gen/score_passes",  # scoring passes (Scheduler.report_scoring)
    "gen/score_tokens",  # the tokens they scored
    "snooze/skipped",
    "snooze/new",
    "snooze/regressed",
    "filter/new",
    "filter/skipped",
    "async/drawn",  # candidates drawn this step
    "async/out_at_draw",  # sum over them of the candidates out when each was drawn
    "async/redrawn",  # drawn while a candidate of the same prompt was out
    "async/age_sum",  # sum of their ages (steps since the step each was drawn at)
    "async/age_max",
    "async/too_stale",  # reported more than max_staleness steps late: not trained on
)
TOTAL_KEYS = (
    "gen_groups",
    "rollouts",
    "train_groups",
    "rounds",
    "skipped",
    "dropped",
    "discarded",
    "steps",
    "gen_tokens",
    "tokens_missing",
    "score_passes",
    "score_tokens",
)
_TOTAL_OF = {  # a total -> the step's count it sums (the rest: _advance_totals)
    "rollouts": "gen/rollouts",
    "gen_tokens": "gen/tokens",
    "tokens_missing": "gen/tokens_missing",
    "score_passes": "gen/score_passes",
    "score_tokens": "gen/score_tokens",
}


_COST_SINCE = ("gen_tokens", "tokens_missing", "score_passes", "score_tokens")
"""The totals a state saved before the cost counts (rollouts as reported, tokens, scoring passes) lacks."""


def with_cost_counts(state: Mapping[str, Any], group_size: int) -> dict[str, Any]:
    """``state`` (the metrics' part of a saved state) with the cost counts a state saved before them lacks: no
    tokens were reported then, so every group generated counts as ``tokens_missing``, no scoring pass was spent, and
    a step's rollouts were its groups x ``group_size`` (as they were counted then). A state holding some of these
    counts and not the others is left as it is, for the loader to refuse as corrupt."""
    totals, scalars = state.get("totals"), state.get("scalars")
    if not isinstance(totals, Mapping) or not isinstance(scalars, Mapping) or any(k in totals for k in _COST_SINCE):
        return dict(state)
    ds = state.get("ds")
    groups = np.asarray(ds.get("gen_groups", []) if isinstance(ds, Mapping) else [])
    step_groups = int(groups.sum()) if groups.dtype.kind in "iu" else 0  # (a corrupt one: the loader refuses it)
    added = {"gen_tokens": 0, "tokens_missing": totals.get("gen_groups", 0), "score_passes": 0, "score_tokens": 0}
    step = {"gen/rollouts": step_groups * group_size, "gen/tokens": 0, "gen/tokens_missing": step_groups}
    step |= {"gen/score_passes": 0, "gen/score_tokens": 0}
    return {**state, "totals": {**totals, **added}, "scalars": {**scalars, **step}}


class StepEnd(NamedTuple):
    """What the metrics of a finished step need from the scheduler."""

    record: StepRecord  # where every group of the step went
    trained: int  # signal groups in the batch
    rounds: int  # generation rounds of the step
    starved: np.ndarray  # [D] quota mode: the dataset could not fill its quota
    group_size: int
    asleep: Sequence[int]  # [D] prompts with a snooze counter above 0, per dataset
    retired: int  # prompts retired by filter, all datasets
    epochs: Sequence[int]  # [D] each dataset's current epoch
    bound: bool = False  # max_gen_rounds was reached with the batch not full
    in_flight: int = 0  # candidates issued and not reported at the step's end


class StepMetrics:
    """Counters for the step in progress, plus running totals. Its whole state is JSON-safe.

    It is the one place that counts finished steps: the scheduler's ``step_index`` is :attr:`steps`. The audit's
    metrics it asks of ``audit`` (:class:`~snooze.core._audit.Audit`, a component of its own: its own undo and
    state; a fresh one when none is given). ``group_size``: the rollouts of one of DAPO's groups
    (``snooze/saved/*`` in rollouts)."""

    def __init__(self, names: Sequence[str], group_size: int, audit: Audit | None = None) -> None:
        self.names = list(names)
        self.group_size = int(group_size)
        self.totals: dict[str, int] = {k: 0 for k in TOTAL_KEYS}
        self.audit = audit if audit is not None else Audit()
        self.start_step()

    @property
    def steps(self) -> int:
        """Steps finished."""
        return self.totals["steps"]

    def start_step(self) -> None:
        D = len(self.names)
        self.scalars: dict[str, int] = {k: 0 for k in _SCALARS}
        self.outcomes = np.zeros(len(OUTCOME_NAMES), dtype=np.int64)
        self.ds = {k: np.zeros(D, dtype=np.int64) for k in _DS_KEYS}

    def snapshot(self) -> tuple[Any, ...]:
        """A copy of every count, for :meth:`restore` (a withdrawn round; cheaper than ``state_dict``)."""
        return dict(self.totals), dict(self.scalars), self.outcomes.copy(), {k: v.copy() for k, v in self.ds.items()}

    def restore(self, snap: tuple[Any, ...]) -> None:
        self.totals, self.scalars, self.outcomes, self.ds = snap

    def add(self, key: str, value: int) -> None:
        self.scalars[key] += int(value)

    def _bincount(self, ds: np.ndarray) -> np.ndarray:
        return np.bincount(ds, minlength=len(self.names)).astype(np.int64)

    def add_skips(self, skipped: Sequence[int], blocked: Sequence[int]) -> None:
        """Encounters skipped (asleep) and passed over (retired or excluded), ``[D]`` each."""
        column = self.ds["skipped"]
        for d, (s, q) in enumerate(zip(skipped, blocked)):
            if s or q:
                column[d] += s + q
        self.scalars["snooze/skipped"] += sum(skipped)
        self.scalars["filter/skipped"] += sum(blocked)

    def add_changes(self, new: np.ndarray | None, regressed: np.ndarray | None, retired: np.ndarray | None) -> None:
        """A report's :class:`~snooze.core.policies.Changes` flags, counted (``None``: none of the kind)."""
        for key, flags in (("snooze/new", new), ("snooze/regressed", regressed), ("filter/new", retired)):
            if flags is not None:
                self.scalars[key] += int(np.count_nonzero(flags))

    def record_draw(self, drawn: int, out: int, redrawn: int) -> None:
        """``drawn`` candidates issued with ``out`` candidates out (:meth:`PendingSet.out_at_draw`), ``redrawn``
        of them of prompts with one out."""
        s = self.scalars
        s["async/drawn"] += drawn
        s["async/out_at_draw"] += drawn * out
        s["async/redrawn"] += redrawn

    def record_ages(self, age: np.ndarray, max_staleness: int | None) -> np.ndarray | None:
        """Reported groups of these ages (steps since the step each was drawn at; groups reported without one
        are of age 0); returns which are too stale to train on (older than ``max_staleness``), ``None`` when
        none is."""
        s = self.scalars
        s["async/age_sum"] += int(age.sum())
        s["async/age_max"] = max(s["async/age_max"], int(age.max()))
        if max_staleness is None:
            return None
        stale = age > max_staleness
        s["async/too_stale"] += int(stale.sum())
        return stale

    def record_generated(self, ds: np.ndarray, outcomes: np.ndarray, rollouts: int, tokens: np.ndarray | None) -> None:
        """A report's groups (``ds``, ``outcomes`` ``[N]``), their ``rollouts`` in all and each group's completion
        tokens (``[N]``; ``None``: not reported, the groups are counted in ``gen/tokens_missing``)."""
        s = self.scalars
        s["gen/rollouts"] += int(rollouts)
        if tokens is None:
            s["gen/tokens_missing"] += len(ds)
        else:
            s["gen/tokens"] += int(tokens.sum())
        self.ds["gen_groups"] += self._bincount(ds)
        self.ds["signal"] += self._bincount(ds[outcomes == SIGNAL])
        self.outcomes += np.bincount(outcomes, minlength=len(OUTCOME_NAMES))

    def record_groups(self, ds: np.ndarray, outcomes: np.ndarray, rollouts: int, tokens: int, missing: int) -> None:
        """Groups completed from parts (screening: the rests of screened groups): ``rollouts`` and ``tokens`` of
        this report alone (the screens' were counted when reported), ``missing`` groups some part of which came
        without a token count."""
        s = self.scalars
        s["gen/rollouts"] += int(rollouts)
        s["gen/tokens"] += int(tokens)
        s["gen/tokens_missing"] += int(missing)
        self.ds["gen_groups"] += self._bincount(ds)
        self.ds["signal"] += self._bincount(ds[outcomes == SIGNAL])
        self.outcomes += np.bincount(outcomes, minlength=len(OUTCOME_NAMES))

    def finish(self, end: StepEnd) -> dict[str, Any]:
        """The finished step's flat metrics dict; advances the totals (``steps`` among them) and starts the
        next step's counts."""
        placed = self._placed(end.record)
        gen, train = int(self.ds["gen_groups"].sum()), end.trained
        out: dict[str, Any] = {"step": self.steps}
        self._generation(out, gen, train, placed, end)
        self._advance_totals(gen, train, placed, end)
        easy_hard = (int(self.outcomes[TOO_EASY]), int(self.outcomes[TOO_HARD]))
        self.audit.finish(out, end.bound, (gen, train, *easy_hard))
        dapo = out["snooze/saved/dapo_groups"] * end.group_size  # DAPO generates whole groups
        out["snooze/saved/dapo_rollouts"], out["snooze/saved/rollouts"] = dapo, dapo - out["gen/cost_rollouts"]
        self._per_dataset(out, placed, end)
        self.start_step()
        return out | self.cumulative()

    def _placed(self, record: StepRecord) -> dict[str, np.ndarray]:
        """``[D]`` counts of the record: each of :data:`_FROM_RECORD`, ``batch``, ``padded``, ``carried_in``."""
        D, P = len(self.names), len(PLACES)
        by = np.bincount(record.ds * P + record.place, minlength=D * P).reshape(D, P) @ _RECORD_COUNTS  # [D, keys]
        out = dict(zip(_FROM_RECORD, by.T))
        out["carried_in"] = self._bincount(record.ds[record.carried_in])
        return out

    def cumulative(self) -> dict[str, Any]:
        """The running totals as metrics (``total/*``, the audit's among them), as :meth:`finish` gives them."""
        t = self.totals
        out: dict[str, Any] = self.audit.cumulative()
        out |= {f"total/{key}": int(value) for key, value in t.items()}
        out["total/efficiency"] = t["train_groups"] / t["gen_groups"] if t["gen_groups"] else 0.0
        dapo = self.audit.dapo_groups  # (an estimate: docs/metrics.md, snooze/saved/*)
        out["total/saved_dapo_groups"] = dapo
        out["total/saved_ratio"] = dapo / t["gen_groups"] if t["gen_groups"] else 1.0
        cost = cost_rollouts(t["rollouts"], t["score_passes"])
        out["total/cost_rollouts"] = cost
        out["total/cost_tokens"] = cost_tokens(t["gen_tokens"], t["score_tokens"])
        out["total/saved_dapo_rollouts"] = dapo * self.group_size
        out["total/saved_rollout_ratio"] = dapo * self.group_size / cost if cost else 1.0
        return out

    def _generation(
        self, out: dict[str, Any], gen: int, train: int, placed: dict[str, np.ndarray], end: StepEnd
    ) -> None:
        size = int(placed["batch"].sum())
        s = self.scalars
        out |= {
            "gen/groups": gen,
            "gen/rollouts": s["gen/rollouts"],
            "gen/rounds": end.rounds,
            "gen/cancelled": s["gen/cancelled"],
            "train/groups": train,
            "train/size": size,
            "train/padded": int(placed["padded"].sum()),
            "efficiency": train / gen if gen else 0.0,
        }
        for code, name in enumerate(OUTCOME_NAMES):
            out[f"groups/{name}"] = int(self.outcomes[code])
        out["groups/dropped"] = int(placed["dropped"].sum())
        for key in ("discarded", "carried_in", "carried_out"):
            out[f"surplus/{key}"] = int(placed[key].sum())
        out["snooze/skipped"] = s["snooze/skipped"]
        out["snooze/asleep"] = int(sum(end.asleep))
        out["snooze/new"] = s["snooze/new"]
        out["snooze/regressed"] = s["snooze/regressed"]
        out["filter/retired"] = int(end.retired)
        out["filter/new"] = s["filter/new"]
        out["filter/skipped"] = s["filter/skipped"]
        out["async/age_mean"] = s["async/age_sum"] / gen if gen else 0.0
        out["async/age_max"] = s["async/age_max"]
        out["async/too_stale"] = s["async/too_stale"]
        out["async/in_flight"] = int(end.in_flight)
        out["async/in_flight_at_draw"] = s["async/out_at_draw"] / s["async/drawn"] if s["async/drawn"] else 0.0
        out["async/redrawn"] = s["async/redrawn"]
        for key in ("gen/tokens", "gen/tokens_missing", "gen/score_passes", "gen/score_tokens"):
            out[key] = s[key]
        out["gen/cost_rollouts"] = cost_rollouts(s["gen/rollouts"], s["gen/score_passes"])
        out["gen/cost_tokens"] = cost_tokens(s["gen/tokens"], s["gen/score_tokens"])

    def _advance_totals(self, gen: int, train: int, placed: dict[str, np.ndarray], end: StepEnd) -> None:
        t, s = self.totals, self.scalars
        t["gen_groups"] += gen
        for total, step in _TOTAL_OF.items():
            t[total] += s[step]
        t["train_groups"] += train
        t["rounds"] += end.rounds
        t["skipped"] += s["snooze/skipped"] + s["filter/skipped"]
        t["dropped"] += int(placed["dropped"].sum())
        t["discarded"] += int(placed["discarded"].sum())
        t["steps"] += 1

    def _per_dataset(self, out: dict[str, Any], placed: dict[str, np.ndarray], end: StepEnd) -> None:
        groups = placed["batch"].tolist()
        size = sum(groups)
        ds = {k: v.tolist() for k, v in (self.ds | placed).items()}
        for d, name in enumerate(self.names):
            g = ds["gen_groups"][d]
            p = f"dataset/{name}/"
            out[p + "batch_frac"] = groups[d] / size if size else 0.0
            out[p + "batch_groups"] = groups[d]
            out[p + "gen_groups"] = g
            out[p + "signal_rate"] = ds["signal"][d] / g if g else 0.0
            out[p + "asleep"] = int(end.asleep[d])
            out[p + "starved"] = int(bool(end.starved[d]))
            for key in ("dropped", "skipped", "discarded", "carried_in", "carried_out"):
                out[p + key] = ds[key][d]
            out[p + "epoch"] = int(end.epochs[d])

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "totals": {k: int(v) for k, v in self.totals.items()},
            "scalars": dict(self.scalars),
            "outcomes": self.outcomes.tolist(),
            "ds": {k: v.tolist() for k, v in self.ds.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Every count an integer >= 0, every array of its shape (``[4]`` outcomes, ``[D]`` per dataset). The
        audit's part (``diagnosis``) is the audit's to load. A state saved before the cost counts loads with them
        filled in as :func:`with_cost_counts` says."""
        state = with_cost_counts(state, self.group_size)
        totals = {k: state_int(state["totals"][k], f"metrics totals[{k!r}]") for k in TOTAL_KEYS}
        scalars = {k: state_int(state["scalars"][k], f"metrics scalars[{k!r}]") for k in _SCALARS}
        outcomes = state_ints(state["outcomes"], "metrics outcomes", (len(OUTCOME_NAMES),))
        ds = {k: state_ints(state["ds"][k], f"metrics ds[{k!r}]", (len(self.names),)) for k in _DS_KEYS}
        self.totals, self.scalars, self.outcomes, self.ds = totals, scalars, outcomes, ds

"""Per-step and cumulative metrics under the names of SPEC section 5 (listed in docs/metrics.md).

Every generated or carried-in group ends a step in exactly one place, so per dataset and in total::

    gen_groups + carried_in == batch_groups + dropped + discarded + carried_out
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from snooze.core.classify import OUTCOME_NAMES, SIGNAL

if TYPE_CHECKING:
    from snooze.core.scheduler import Scheduler
    from snooze.core.types import Batch

__all__ = ["StepMetrics", "TOTAL_KEYS"]

_DS_KEYS = ("gen_groups", "signal", "dropped", "skipped", "discarded", "carried_out", "carried_in")
_SCALARS = ("gen/rounds", "gen/cancelled", "snooze/skipped", "snooze/new", "snooze/regressed", "filter/new", "filter/skipped")
TOTAL_KEYS = ("gen_groups", "rollouts", "train_groups", "rounds", "skipped", "dropped", "discarded", "steps")


class StepMetrics:
    """Counters for the step in progress, plus running totals. Its whole state is JSON-safe."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.totals: dict[str, float] = {k: 0 for k in TOTAL_KEYS}
        self.start_step(np.empty(0, dtype=np.int32))

    def start_step(self, carried_in: np.ndarray) -> None:
        D = len(self.names)
        self.scalars: dict[str, int] = {k: 0 for k in _SCALARS}
        self.outcomes = np.zeros(len(OUTCOME_NAMES), dtype=np.int64)
        self.ds = {k: np.zeros(D, dtype=np.int64) for k in _DS_KEYS}
        self.ds["carried_in"] += np.bincount(carried_in, minlength=D)

    def add(self, key: str, value: int) -> None:
        self.scalars[key] += int(value)

    def add_ds(self, d: int, key: str, value: int) -> None:
        self.ds[key][d] += int(value)

    def _bincount(self, ds: np.ndarray) -> np.ndarray:
        return np.bincount(ds, minlength=len(self.names)).astype(np.int64)

    def record_generated(self, ds: np.ndarray, outcomes: np.ndarray, group_size: int) -> None:
        self.ds["gen_groups"] += self._bincount(ds)
        self.ds["signal"] += self._bincount(ds[outcomes == SIGNAL])
        self.outcomes += np.bincount(outcomes, minlength=len(OUTCOME_NAMES))

    def add_dropped(self, ds: np.ndarray) -> None:
        self.ds["dropped"] += self._bincount(ds)

    def add_discarded(self, ds: np.ndarray) -> None:
        self.ds["discarded"] += self._bincount(ds)

    def close_surplus(self, ds: np.ndarray, carried: bool) -> None:
        self.ds["carried_out" if carried else "discarded"] += self._bincount(ds)

    def finish(self, sched: Scheduler, batch: Batch, padded: int, starved: np.ndarray) -> dict[str, Any]:
        """The finished step's flat metrics dict; also advances the totals."""
        b_ds = sched.batch.ds
        batch_groups = self._bincount(b_ds)
        if padded:  # padding came out of the dropped pile
            self.ds["dropped"] -= self._bincount(b_ds[~batch.signal])
        gen = int(self.ds["gen_groups"].sum())
        train = int(batch.signal.sum())
        G = sched.config.group_size
        t = self.totals
        t["gen_groups"] += gen
        t["rollouts"] += gen * G
        t["train_groups"] += train
        t["rounds"] += self.scalars["gen/rounds"]
        t["skipped"] += self.scalars["snooze/skipped"] + self.scalars["filter/skipped"]
        t["dropped"] += int(self.ds["dropped"].sum())
        t["discarded"] += int(self.ds["discarded"].sum())
        t["steps"] += 1
        out: dict[str, Any] = {
            "step": sched.step_index,
            "gen/groups": gen,
            "gen/rollouts": gen * G,
            "gen/rounds": self.scalars["gen/rounds"],
            "gen/cancelled": self.scalars["gen/cancelled"],
            "train/groups": train,
            "train/size": len(batch),
            "train/padded": int(padded),
            "efficiency": train / gen if gen else 0.0,
        }
        for code, name in enumerate(OUTCOME_NAMES):
            out[f"groups/{name}"] = int(self.outcomes[code])
        out["groups/dropped"] = int(self.ds["dropped"].sum())
        out["surplus/discarded"] = int(self.ds["discarded"].sum())
        out["surplus/carried_in"] = int(self.ds["carried_in"].sum())
        out["surplus/carried_out"] = int(self.ds["carried_out"].sum())
        out["snooze/skipped"] = self.scalars["snooze/skipped"]
        out["snooze/asleep"] = sum(tb.asleep() for tb in sched.tables)
        out["snooze/new"] = self.scalars["snooze/new"]
        out["snooze/regressed"] = self.scalars["snooze/regressed"]
        out["filter/retired"] = sum(tb.retired() for tb in sched.tables)
        out["filter/new"] = self.scalars["filter/new"]
        out["filter/skipped"] = self.scalars["filter/skipped"]
        size = max(len(batch), 1)
        ds = {k: v.tolist() for k, v in self.ds.items()}
        groups = batch_groups.tolist()
        for d, name in enumerate(self.names):
            g = ds["gen_groups"][d]
            p = f"dataset/{name}/"
            out[p + "batch_frac"] = groups[d] / size if len(batch) else 0.0
            out[p + "batch_groups"] = groups[d]
            out[p + "gen_groups"] = g
            out[p + "signal_rate"] = ds["signal"][d] / g if g else 0.0
            out[p + "asleep"] = sched.tables[d].asleep()
            out[p + "starved"] = int(bool(starved[d]))
            for key in ("dropped", "skipped", "discarded", "carried_in", "carried_out"):
                out[p + key] = ds[key][d]
            out[p + "epoch"] = sched.streams[d].epoch
        for key, value in t.items():
            out[f"total/{key}"] = int(value)
        out["total/efficiency"] = t["train_groups"] / t["gen_groups"] if t["gen_groups"] else 0.0
        return out

    # -- state ---------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "totals": {k: int(v) for k, v in self.totals.items()},
            "scalars": dict(self.scalars),
            "outcomes": self.outcomes.tolist(),
            "ds": {k: v.tolist() for k, v in self.ds.items()},
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.totals = {k: int(state["totals"][k]) for k in TOTAL_KEYS}
        self.scalars = {k: int(state["scalars"].get(k, 0)) for k in _SCALARS}
        self.outcomes = np.asarray(state["outcomes"], dtype=np.int64)
        self.ds = {k: np.asarray(state["ds"][k], dtype=np.int64) for k in _DS_KEYS}

"""A policy of your own, in one file, written from docs/concepts.md ("Writing a policy"): nothing in snooze is
edited and nothing private is imported.

``rest``: drop zero-signal groups (as DAPO), and after ``streak`` too-easy groups in a row rest the prompt for
``steps`` optimizer steps: its encounters are skipped before any rollout until then. The optimizer steps are
run-level state (the policy hears of each in ``end_step``), saved with the scheduler's state. Run it from the
root of a clone of snooze (not on PyPI yet):

    pip install .
    python examples/custom_policy.py
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

import snooze
from snooze.core.policies import (
    Changes,
    Column,
    DatasetStream,
    Options,
    Policy,
    PromptMemory,
    PromptTable,
    Report,
    as_int,
    register_policy,
)


@dataclass(frozen=True)
class RestOptions(Options):
    """The options of ``policy="rest"`` (the CLI's ``--rest-streak``, ``--rest-steps``)."""

    streak: int = 3
    """Too-easy groups in a row after which a prompt rests."""
    steps: int = 2
    """Optimizer steps a prompt rests for."""

    def check(self) -> None:
        self.set_checked("streak", as_int(self.streak, "streak", 1, 255))
        self.set_checked("steps", as_int(self.steps, "steps", 1, 2**30))


@register_policy("rest")
class Rest(Policy):
    """Rest a prompt for ``steps`` optimizer steps after ``streak`` too-easy groups in a row."""

    Options = RestOptions
    columns = (Column("easy_run", np.uint8), Column("until", np.int32, minimum=0))  # saved as ds<d>.easy_run, ...

    def __init__(self, options: Options, context: Any) -> None:
        super().__init__(options, context)
        self.steps_done = 0  # run-level state: optimizer steps finished

    def skip_mask(self, table: PromptTable, stream: DatasetStream, rows: np.ndarray, awake: np.ndarray) -> np.ndarray:
        # rows: the dataset's own rows (index table.columns)
        return awake & (table.columns["until"][rows] > self.steps_done)

    def report(self, memory: PromptMemory, report: Report) -> Changes:
        p = report.prompts()  # each prompt once; p.rows index the whole memory (memory.columns)
        run, until = memory.columns["easy_run"], memory.columns["until"]
        grown = np.where(p.other, 0, np.minimum(run[p.rows].astype(np.int64) + p.easy, 255))
        rests = grown >= self.options.streak
        run[p.rows] = np.where(rests, 0, grown)
        until[p.rows[rests]] = self.steps_done + self.options.steps
        return Changes()  # nothing of the kinds it counts (put to sleep by the counter, regressed, retired)

    def end_step(self, steps: int) -> None:
        self.steps_done = steps

    def state_dict(self) -> dict[str, Any]:
        return {"steps_done": self.steps_done}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        steps = state.get("steps_done") if set(state) == {"steps_done"} else None
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            raise snooze.StateError(f"policy 'rest': state {dict(state)!r} is not {{'steps_done': <steps >= 0>}}")
        self.steps_done = steps


def main() -> dict[str, int]:
    """Train-free run: every prompt is always solved, so each rests after its ``streak``-th group (the audit off, so
    that no skipped prompt is rolled out anyway: the numbers are then worked out by hand in the tests)."""
    options = RestOptions(streak=2, steps=3)
    config = snooze.SchedulerConfig(batch_size=2, group_size=4, audit=0.0, policy="rest", options=options)
    assert config == config.replace(options={"streak": 2, "steps": 3})  # the options as a mapping: the same config
    sched = snooze.Scheduler({"math": [{"id": f"q{i}"} for i in range(4)]}, config, seed=0)
    skipped = 0
    for _ in range(6):
        skipped += sched.step(lambda cands: [[1.0] * 4 for _ in cands]).metrics["snooze/skipped"]
    snooze.check_policy(Rest, options=options)  # the plug-in contract, checked by running it at the run's options
    return {"skipped": skipped, "generated": sched.metrics()["total/gen_groups"]}


if __name__ == "__main__":
    print(main())

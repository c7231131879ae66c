"""A policy of your own with a knob of its own, in one file: nothing in snooze is edited.

``patience``: drop zero-signal groups (as DAPO) and retire a prompt once it has been too easy
``patience`` times (``filter`` is ``patience=1``). Run it from the root of a clone of snooze (not on PyPI yet):

    pip install .
    python examples/custom_policy.py
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import snooze
from snooze.core.policies import EXCLUDED, RETIRED, Changes, Column, Options, Policy, as_int, register_policy


@dataclass(frozen=True)
class PatienceOptions(Options):
    """The options of ``policy="patience"``."""

    times: int = 2
    """Too-easy groups a prompt may have before it is retired for good."""

    def check(self) -> None:
        self._set("times", as_int(self.times, "times", 1, 255))


@register_policy("patience")
class Patience(Policy):
    """Retire a prompt at its ``times``-th too-easy group (a one-byte count per prompt, saved with the state)."""

    Options = PatienceOptions
    columns = (Column("easy_seen", np.uint8),)

    def report(self, memory, report):
        p = report.prompts()
        seen = memory.columns["easy_seen"]
        flags = memory.columns["flags"]
        count = np.minimum(seen[p.rows].astype(np.int64) + p.easy, 255)
        seen[p.rows] = count
        before = flags[p.rows]
        fresh = (count >= self.options.times) & ((before & RETIRED) == 0)
        flags[p.rows[fresh]] |= RETIRED
        return Changes(p.ds, retired=fresh, blocked=fresh & ((before & EXCLUDED) == 0))


def main() -> dict[str, int]:
    """Train-free run: every prompt is always solved, so each is retired at its ``times``-th group."""
    config = snooze.SchedulerConfig(batch_size=2, group_size=4, policy="patience", options=PatienceOptions(times=3))
    assert snooze.SchedulerConfig(batch_size=2, group_size=4, policy="patience", options={"times": 3}) == config
    sched = snooze.Scheduler({"math": [{"id": f"q{i}"} for i in range(4)]}, config, seed=0)
    for _ in range(6):
        sched.step(lambda cands: [[1.0] * 4 for _ in cands])
    snooze.check_policy(Patience, config)  # the plug-in contract, checked by running it
    return {"retired": sched.metrics()["filter/retired"], "generated": sched.metrics()["total/gen_groups"]}


if __name__ == "__main__":
    print(main())

"""Design a skip rule on development regimes and seeds only: the family and seeds 0-4 stay for the report.

    .venv/bin/python research/retention_dev.py --out runs/dev --regimes dev-mix,dev-rev --arms dynamic_sampling,spaced
    .venv/bin/python research/retention_dev.py --list

The development regimes vary what the family varies (task mix, pool size, learning rate, model size,
temperature) at values the family does not use, and the seeds start at 100. Each arm is a scheduler
config under test (``ARMS``); the table is the family's (DAPO's groups over the arm's, late avg@8 gap
in points, paired by seed), with the pooled mean gap over every regime and seed, its 90% interval, and
the geometric mean of the ratios: the numbers a candidate default is held to.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import spaced_policy

from snooze.experiments.compare import Arm, run_compare
from snooze.experiments.family import FAMILY
from snooze.experiments.family_table import family_markdown, family_rows, pooled

spaced_policy.register()  # policy="spaced", which the arms below use

_BASE = FAMILY["default"]
DEV_REGIMES = {
    # two tasks at other levels, a larger pool, a learning rate and temperature between the family's
    "dev-mix": replace(_BASE, tasks="rev:3-7,sort:3-6", fig3_task="rev:3-7", fig3_split=5, pool_size=1200, lr=2e-4,
                       temperature=0.5),
    # one task of the other family's kind, a mid-size pool
    "dev-rev": replace(_BASE, tasks="rev:3-8", fig3_task="rev:3-8", fig3_split=None, pool_size=800),
    # a small pool per task: prompts met often
    "dev-small": replace(_BASE, pool_size=500),
    # a model 4x larger (3 layers x 96) at a learning rate between the family's
    "dev-big": replace(_BASE, n_layer=3, d_model=96, lr=2e-4),
}  # fmt: skip
"""Development regimes: not in the family, never reported as its result."""


def _arm(name: str, policy: str, options: dict[str, Any] | None = None, **settings: Any) -> Arm:
    return Arm(name, policy, {**({"options": options} if options else {}), **settings}, cost=5)


ARMS = {
    a.name: a
    for a in (
        _arm("dynamic_sampling", "dynamic_sampling"),
        _arm("snooze-f1", "snooze", {"factor": 1}),
        _arm("spaced", "spaced", audit=0.05),
        _arm("spaced-c1", "spaced", {"confirm": 1}, audit=0.05),
        _arm("spaced-g1", "spaced", {"growth": 1.0}, audit=0.05),
        _arm("spaced-i50", "spaced", {"interval": 50}, audit=0.05),
        _arm("spaced-hard", "spaced", {"hard": True}, audit=0.05),
        _arm("spaced-noaudit", "spaced"),
        # round 2: the surplus of a step's last round kept for the next (no prompt kept away), alone and
        # under the short encounter-counted snooze and the fixed-span review that lost least in round 1
        _arm("carry", "dynamic_sampling", carry_surplus=True),
        _arm("f1-carry", "snooze", {"factor": 1}, carry_surplus=True),
        _arm("f1-hard-carry", "snooze", {"factor": 1, "hard": True}, carry_surplus=True),
        _arm("g1-carry", "spaced", {"growth": 1.0}, audit=0.05, carry_surplus=True),
        # round 3: the too-hard side kept away longer (round 1: spacing it cost little where most groups fail)
        _arm("f1-h3-carry", "snooze", {"factor": 1, "hard": True, "hard_factor": 3}, carry_surplus=True),
        _arm("f1-h8-carry", "snooze", {"factor": 1, "hard": True, "hard_factor": 8}, carry_surplus=True),
        # after the family: the recommended setting with the audit on, for designing snooze/saved/* on dev runs
        _arm("f1-carry-audit", "snooze", {"factor": 1}, carry_surplus=True, audit=0.05),
    )
}
"""Arms under test, by name (``dynamic_sampling``: DAPO, the reference of every ratio and gap)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/dev"))
    parser.add_argument("--regimes", default=",".join(DEV_REGIMES))
    parser.add_argument("--arms", default="dynamic_sampling,spaced")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--table-only", action="store_true")
    parser.add_argument("--list", action="store_true", help="print the regimes and arms and exit")
    args = parser.parse_args()
    if args.list:
        for name in DEV_REGIMES:
            print(f"regime {name}")
        for name, arm in ARMS.items():
            print(f"arm {name}: {arm.policy} {arm.settings}")
        return
    if args.first_seed < 100:
        parser.error("--first-seed must be at least 100: seeds 0-4 are the report's, never the design's")
    regimes, arms = args.regimes.split(","), args.arms.split(",")
    # every table pairs with DAPO; its finished runs are kept, not rerun
    arms = ["dynamic_sampling", *(a for a in arms if a != "dynamic_sampling")]
    unknown = sorted((set(regimes) - set(DEV_REGIMES)) | (set(arms) - set(ARMS)))
    if unknown:
        parser.error(f"unknown regime(s) or arm(s): {unknown}")
    if not args.table_only:
        for name in regimes:
            profile = replace(DEV_REGIMES[name], first_seed=args.first_seed)
            run_compare(args.out / name, profile, [ARMS[a] for a in arms], args.seeds, jobs=args.jobs, threads=1)
    rows = family_rows(args.out, regimes)
    print(family_markdown(rows))
    print(json.dumps(pooled(rows), indent=1))


if __name__ == "__main__":
    main()

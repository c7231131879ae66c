"""Labelled development runs for issue 49's alarm: arms that hold DAPO's accuracy and arms that lose it, with the
audit on, in development regimes (never the family's) on seeds 100 and up.

    nice -n 19 .venv/bin/python research/alarm_runs.py --out /work/runs/alarm --regimes al-rev,al-sort --seeds 3
    .venv/bin/python research/alarm_runs.py --list

Every skipping arm runs with the audit at its default share (0.05), as a user gets it, so its logs hold the
evidence an alarm could read during the run (``snooze/audit/*``, ``snooze/drawn/*``, ``snooze/regressed``, the
reward log). The work is ordered seed by seed over the regimes (seed 100 of every arm in every regime chosen, then
101, ...), so the cells that label an arm in a regime fill evenly and a killed invocation leaves the most useful
runs finished; a rerun resumes (finished runs are read back, killed ones continue from their checkpoints).
``research/alarm_dev.py`` labels the cells and measures candidate alarms on these runs.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from snooze.experiments.compare import ARMS as COMPARE_ARMS
from snooze.experiments.compare import Arm, run_compare
from snooze.experiments.family import FAMILY

sys.path.insert(0, str(Path(__file__).resolve().parent))
from retention_dev import DEV_REGIMES  # noqa: E402  (research/ is not a package)

_SMALL = FAMILY["small-pool"]  # one task, 8 groups a step for 120 steps, evaluated every 10: the cheapest shape
_BASE = FAMILY["default"]
ALARM_REGIMES = {
    # neighbours of small-pool: other level ranges and pool sizes of one task, the other task family
    "al-rev": replace(_SMALL, tasks="rev:3-7", fig3_task="rev:3-7", fig3_split=None, pool_size=400, steps=150),
    "al-sort": replace(_SMALL, tasks="sort:3-7", fig3_task="sort:3-7", fig3_split=None, pool_size=500, steps=150),
    # a two-task mix at the small shape (the recommended setting lost most on other task mixes)
    "al-mix": replace(_SMALL, tasks="rev:3-7,sort:3-6", fig3_task="rev:3-7", fig3_split=None, pool_size=300,
                      steps=150),
    # a small pool visited often, other levels
    "al-rev-tiny": replace(_SMALL, tasks="rev:4-8", fig3_task="rev:4-8", fig3_split=None, pool_size=200, steps=150),
    # the small shapes at another temperature, learning rate and round limit (the out-of-sample regimes varied these)
    "al-mix-t7": replace(_SMALL, tasks="rev:3-7,sort:3-6", fig3_task="rev:3-7", fig3_split=None, pool_size=300,
                         steps=150, temperature=0.7),
    "al-sort-lr": replace(_SMALL, tasks="sort:3-7", fig3_task="sort:3-7", fig3_split=None, pool_size=500, steps=150,
                          lr=1e-4),
    "al-rev-lr": replace(_SMALL, tasks="rev:3-7", fig3_task="rev:3-7", fig3_split=None, pool_size=400, steps=150,
                         lr=1e-4),
    "al-mix-lr": replace(_SMALL, tasks="rev:3-7,sort:3-6", fig3_task="rev:3-7", fig3_split=None, pool_size=300,
                         steps=150, lr=1e-4),
    "al-sort-pool": replace(_SMALL, tasks="sort:3-7", fig3_task="sort:3-7", fig3_split=None, pool_size=1000,
                            steps=150),
    "al-rev-r4": replace(_SMALL, tasks="rev:3-7", fig3_task="rev:3-7", fig3_split=None, pool_size=400, steps=150,
                         max_gen_rounds=4),
    # one task of the sort family at the family's full shape, another pool size than one-task's
    "al-sort-full": replace(_BASE, tasks="sort:3-7", fig3_task="sort:3-7", fig3_split=None, pool_size=1000),
    **DEV_REGIMES,  # dev-mix, dev-rev, dev-small, dev-big (research/retention_dev.py)
}  # fmt: skip
"""Development regimes: none is in the family; each varies what the family varies at values it does not use."""

_AUDIT = {"audit": 0.05}  # SchedulerConfig's default share, which compare's arms turn off
ARMS = {
    a.name: a
    for a in (
        COMPARE_ARMS["dynamic_sampling"],
        COMPARE_ARMS["snooze-f1-carry"],  # snooze.RECOMMENDED, the audit at its default
        Arm("filter", "filter", _AUDIT, cost=3),
        Arm("snooze-f5", "snooze", {"options": {"factor": 5}, **_AUDIT}, cost=4),
        Arm("predictive", "predictive", _AUDIT, cost=2),
        Arm("snooze-f1", "snooze", {"options": {"factor": 1}, **_AUDIT}, cost=6),
    )
}
"""Arms, by name: DAPO (every gap's reference), the recommended setting, and arms known to lose accuracy somewhere,
each with the audit at 0.05."""
DEFAULT_ARMS = ("dynamic_sampling", "snooze-f1-carry", "filter", "snooze-f5", "predictive")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/work/runs/alarm"))
    parser.add_argument("--regimes", default="al-rev,al-sort,al-mix,al-rev-tiny")
    parser.add_argument("--arms", default=",".join(DEFAULT_ARMS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--list", action="store_true", help="print the regimes and arms and exit")
    args = parser.parse_args()
    if args.list:
        for name, p in ALARM_REGIMES.items():
            print(f"regime {name}: {p.tasks} pool {p.pool_size} batch {p.batch_size} steps {p.steps} lr {p.lr} "
                  f"T {p.temperature} rounds {p.max_gen_rounds} model {p.n_layer}x{p.d_model}")  # fmt: skip
        for name, arm in ARMS.items():
            print(f"arm {name}: {arm.policy} {dict(arm.settings)}")
        return
    if args.first_seed < 100:
        parser.error("--first-seed must be at least 100: seeds 0-4 are the report's, never the design's")
    regimes, arms = args.regimes.split(","), args.arms.split(",")
    arms = ["dynamic_sampling", *(a for a in arms if a != "dynamic_sampling")]  # every gap pairs with DAPO
    unknown = sorted((set(regimes) - set(ALARM_REGIMES)) | (set(arms) - set(ARMS)))
    if unknown:
        parser.error(f"unknown regime(s) or arm(s): {unknown}")
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for name in regimes:
            profile = replace(ALARM_REGIMES[name], first_seed=seed)
            print(f"== {name} seed {seed}", flush=True)
            run_compare(args.out / name, profile, [ARMS[a] for a in arms], 1, jobs=args.jobs, threads=args.threads)


if __name__ == "__main__":
    main()

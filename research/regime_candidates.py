"""Rerun a candidate regime of docs/reference-experiment.md ("How the regime was chosen"), DAPO and GRPO only.

    .venv/bin/python research/regime_candidates.py R8            # one candidate -> runs/regime/R8/
    .venv/bin/python research/regime_candidates.py --list

Each candidate is the default profile with the fields it changed; the criteria are printed from its
``regime.json``. Never run with filter or snooze arms: the regime is chosen on DAPO and GRPO alone.
R0 is main's old default (see the doc's changelog) and R1 used a warm-up rule that no longer exists;
R2-R5b were measured with a sampled evaluation in 1,024-sample chunks (now 4,096), which draws other
random numbers, so their reruns differ from the table by evaluation noise.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from snooze.experiments.compare import run_compare
from snooze.experiments.profiles import PROFILES
from snooze.experiments.regime import regime_table
from snooze.experiments.summary import summary_table

_R2 = {
    "tasks": "rev:3-9,sort:3-7",
    "fig3_task": "sort:3-7",
    "fig3_split": None,
    "pool_size": 1000,
    "steps": 250,
    "temperature": 0.7,
    "lr": 1e-4,
    "eval_samples": 8,
    "warmup_per_task": True,
    "warmup_target": 0.3,
    "warmup_eval_every": 25,
}
_R4 = {**_R2, "tasks": "rev:3-8,sort:3-7", "temperature": 0.5, "lr": 3e-4}
_R6 = {**_R4, "temperature": 0.4}
_R8 = {**_R6, "steps": 300, "fig3_task": "rev:3-8", "fig3_split": 6}
DAPO, BOTH = ("dynamic_sampling",), ("dynamic_sampling", "grpo")
CANDIDATES: dict[str, tuple[dict[str, Any], tuple[str, ...], int]] = {
    "R2": (_R2, BOTH, 1),
    "R3a": ({**_R2, "lr": 3e-4}, DAPO, 1),
    "R3b": ({**_R2, "lr": 1e-3}, DAPO, 1),
    "R4a": (_R4, DAPO, 1),
    "R4b": ({**_R4, "lr": 1e-4}, DAPO, 1),
    "R5a": ({**_R4, "lr": 5e-4}, DAPO, 1),
    "R5b": (_R6, DAPO, 1),
    "R6": (_R6, BOTH, 3),
    "R7": ({**_R6, "pool_size": 2000, "fig3_task": "rev:3-8", "fig3_split": 6}, DAPO, 1),
    "R8": (_R8, DAPO, 1),
    "R9": ({**_R8, "warmup_lr": 1e-3}, DAPO, 1),
    "R9b": ({**_R8, "warmup_lr": 1e-3, "pool_size": 1500}, DAPO, 1),
    "R10": ({}, BOTH, 3),  # the frozen default profile
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidate", nargs="?", choices=sorted(CANDIDATES))
    parser.add_argument("--list", action="store_true", help="print every candidate's changes and exit")
    parser.add_argument("--out", type=Path, default=Path("runs/regime"))
    parser.add_argument("--cache", type=Path, default=None, help="warm-up cache folder")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    if args.list or args.candidate is None:
        for name, (changes, arms, seeds) in CANDIDATES.items():
            print(f"{name}: {', '.join(arms)} x {seeds} seed(s); {changes or 'the default profile'}")
        return
    changes, arms, seeds = CANDIDATES[args.candidate]
    profile = replace(PROFILES["default"], **changes)
    out = args.out / args.candidate
    summary = run_compare(out, profile, list(arms), seeds, cache_dir=args.cache, jobs=args.jobs)
    print(summary_table(summary, optimal_groups=profile.steps * profile.batch_size))
    print(regime_table(json.loads((out / "regime.json").read_text())))


if __name__ == "__main__":
    main()

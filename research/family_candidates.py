"""Candidate regimes for widening the family towards forgetting, run with DAPO and GRPO only.

    .venv/bin/python research/family_candidates.py --out runs/family-candidates            # every candidate
    .venv/bin/python research/family_candidates.py --out runs/family-candidates lr-1e-4 4x128
    .venv/bin/python research/family_candidates.py --list

The family (``snooze.experiments.family``) holds regimes chosen by the criteria of docs/results.md
("How the regimes were chosen") on DAPO (``dynamic_sampling``) and plain ``grpo`` alone. These candidates
move what makes a skipped prompt forgotten: a lower learning rate (smaller updates, as an LLM's) and a
model 8x larger (more to lose on prompts it stops seeing); and the group size (G=16, DAPO's own, issue 52), with
half the groups a step (a step's rollouts as in the family) or the same groups (twice the rollouts). Each is a
family regime with the fields it changes; seeds 0-2 as the family's. The script prints each candidate's criteria
from its ``regime.json``.
Never run a skipping arm here: a candidate enters the family, or not, before any skipping arm runs in it.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from snooze.experiments.compare import run_compare
from snooze.experiments.family import FAMILY
from snooze.experiments.regime import regime_table

_BIG = {"n_layer": 4, "d_model": 128}
CANDIDATES: dict[str, tuple[str, dict[str, Any]]] = {
    "lr-1e-4": ("default", {"lr": 1e-4}),
    "large-pool-lr-1e-4": ("large-pool", {"lr": 1e-4}),
    "one-task-lr-1e-4": ("one-task", {"lr": 1e-4}),
    "temp-0.7-lr-1e-4": ("temp-0.7", {"lr": 1e-4}),
    "4x128": ("default", _BIG),
    "4x128-lr-1e-4": ("default", {**_BIG, "lr": 1e-4}),
    # G=16 (issue 52; DAPO's own recipe): half the groups a step, so the rollouts a step stay the family's.
    "small-pool-g16": ("small-pool", {"group_size": 16, "batch_size": 4}),
    "default-g16": ("default", {"group_size": 16, "batch_size": 8}),
    # G=16 at the family's groups a step: twice the rollouts a step.
    "small-pool-g16-b8": ("small-pool", {"group_size": 16}),
    "default-g16-b16": ("default", {"group_size": 16}),
}
"""Candidate name -> (the family regime it starts from, the fields it changes)."""

ARMS = ("dynamic_sampling", "grpo")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidates", nargs="*", help=f"candidates to run (default: all of {', '.join(CANDIDATES)})")
    parser.add_argument("--list", action="store_true", help="print every candidate's changes and exit")
    parser.add_argument("--out", type=Path, default=Path("runs/family-candidates"))
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3, as the family)")
    args = parser.parse_args()
    if args.list:
        for name, (base, changes) in CANDIDATES.items():
            print(f"{name}: {base} with {changes}")
        return
    unknown = sorted(set(args.candidates) - set(CANDIDATES))
    if unknown:
        parser.error(f"unknown candidate(s) {unknown}: choose from {', '.join(CANDIDATES)}")
    for name in args.candidates or list(CANDIDATES):
        base, changes = CANDIDATES[name]
        out = args.out / name
        run_compare(out, replace(FAMILY[base], **changes), list(ARMS), args.seeds, jobs=args.jobs, threads=1)
        print(f"## {name}\n{regime_table(json.loads((out / 'regime.json').read_text()))}", flush=True)


if __name__ == "__main__":
    main()

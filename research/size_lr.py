"""How the cost of skipping moves with model size and learning rate, in one regime of the family.

    .venv/bin/python research/size_lr.py --out runs/size-lr --regime small-pool \
        --variants as-family,lr-1e-4,4x128 --arms dynamic_sampling,snooze,predictive,filter

Runs DAPO (``dynamic_sampling``) and the skipping arms in the regime as the family has it and with
each change below (a lower learning rate; a model 8x larger, 4 layers x 128; both), 3 paired seeds, and
prints each variant's family-style table: DAPO's groups over the arm's and the late avg@k gap, paired
by seed. A smaller learning rate and a larger model both move the tiny policy towards what an LLM run
looks like (small updates relative to what the model knows), so a gap that shrinks along them is a
gap the tiny model exaggerates.
"""

from __future__ import annotations

import argparse
import shutil
from dataclasses import replace
from pathlib import Path

from snooze.experiments.compare import run_compare
from snooze.experiments.family import FAMILY
from snooze.experiments.family_table import family_markdown, family_rows

VARIANTS = {
    "as-family": {},
    "lr-1e-4": {"lr": 1e-4},
    "4x128": {"n_layer": 4, "d_model": 128},
    "4x128-lr-1e-4": {"n_layer": 4, "d_model": 128, "lr": 1e-4},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/size-lr"))
    parser.add_argument("--regime", default="small-pool", choices=sorted(FAMILY))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--arms", default="dynamic_sampling,snooze-f1,snooze,filter")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--family-out", type=Path, default=None, help="reuse the family's runs of the regime for as-family"
    )
    args = parser.parse_args()
    names = args.variants.split(",")
    for name in names:
        out = args.out / name
        if (
            name == "as-family" and args.family_out is not None
        ):  # the family's finished runs are read back, not retrained
            for arm in args.arms.split(","):
                src = args.family_out / args.regime / arm
                if src.is_dir() and not (out / arm).exists():
                    shutil.copytree(src, out / arm)
        profile = replace(FAMILY[args.regime], **VARIANTS[name])
        run_compare(out, profile, args.arms.split(","), args.seeds, jobs=args.jobs, threads=1)
    print(family_markdown(family_rows(args.out, names)))


if __name__ == "__main__":
    main()

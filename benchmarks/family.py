"""Run the regime family (snooze.experiments.family) and write its table and frontier figures.

    .venv/bin/python benchmarks/family.py --out runs/family              # every regime, seeds 0-2
    .venv/bin/python benchmarks/family.py --out runs/family --regimes default,saturated
    .venv/bin/python benchmarks/family.py --out runs/family --table-only  # rebuild family.md/json, figures

The reported numbers are one run on seeds 0-2; develop on other seeds (``--first-seed 10``).
A killed run resumes when the same command is run again.
"""

from __future__ import annotations

import sys
import time

from _runs import run_parser

from snooze.experiments.family import FAMILY, FAMILY_ARMS, run_family


def main() -> int:
    parser = run_parser(__doc__, "runs/family", FAMILY_ARMS)
    parser.add_argument("--regimes", default=",".join(FAMILY), help="comma-separated regimes (default: all)")
    args = parser.parse_args()
    regimes = [r for r in args.regimes.split(",") if r]
    t0 = time.perf_counter()
    if not args.table_only:

        def done(name: str, _summary: dict) -> None:
            print(f"[family] {name} done at {(time.perf_counter() - t0) / 60:.1f} min", flush=True)

        run_family(
            args.out,
            regimes,
            args.arms.split(","),
            args.seeds,
            args.first_seed,
            args.jobs,
            args.threads,
            args.cache,
            on_regime=done,
        )
    try:
        from snooze.experiments.family_table import write_family
    except ImportError:
        return 0
    print(write_family(args.out, regimes))
    print(f"[family] {(time.perf_counter() - t0) / 60:.1f} min in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Run the regime family (snooze.experiments.family) and write its table and frontier figures.

    .venv/bin/python benchmarks/family.py --out runs/family              # every regime, seeds 0-2
    .venv/bin/python benchmarks/family.py --out runs/family --regimes default,saturated
    .venv/bin/python benchmarks/family.py --out runs/family --table-only  # rebuild family.md/json, figures

The reported numbers are one run on seeds 0-2; develop on other seeds (``--first-seed 10``).
A killed run resumes when the same command is run again.
"""

from __future__ import annotations

import argparse
import sys
import time

from _runs import guarded, run_parser

from snooze.experiments.family import FAMILY, FAMILY_ARMS, run_family
from snooze.experiments.family_table import write_family


def _regimes(text: str) -> list[str]:
    """``--regimes``: known regime names, comma-separated (a typo is refused, never an empty table)."""
    names = [r for r in text.split(",") if r]
    unknown = sorted(set(names) - set(FAMILY))
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"{text!r}: unknown regime(s) {unknown}; choose from {', '.join(FAMILY)}")
    return names


def main() -> int:
    parser = run_parser(__doc__, "runs/family", FAMILY_ARMS)
    parser.add_argument("--regimes", type=_regimes, default=list(FAMILY), help="comma-separated regimes (default: all)")
    args = parser.parse_args()
    return guarded(parser, lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    if not args.table_only:

        def done(name: str, _summary: dict) -> None:
            print(f"[family] {name} done at {(time.perf_counter() - t0) / 60:.1f} min", flush=True)

        run_family(
            args.out,
            args.regimes,
            args.arms.split(","),
            args.seeds,
            args.first_seed,
            args.jobs,
            args.threads,
            args.cache,
            on_regime=done,
        )
    print(write_family(args.out, args.regimes))
    print(f"[family] {(time.perf_counter() - t0) / 60:.1f} min in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())

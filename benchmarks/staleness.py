"""Run DAPO and snoozing with generation k steps ahead of training (snooze.experiments.staleness) and write its table.

    .venv/bin/python benchmarks/staleness.py --out runs/staleness               # k = 0, 1, 2; seeds 0-2
    .venv/bin/python benchmarks/staleness.py --out runs/staleness --ks 1,2
    .venv/bin/python benchmarks/staleness.py --out runs/staleness --table-only  # rebuild staleness.md/json

The reported numbers are one run on seeds 0-2; develop on other seeds (``--first-seed 10``).
A killed run resumes when the same command is run again.
"""

from __future__ import annotations

import argparse
import sys
import time

from _runs import guarded, run_parser

from snooze.experiments.staleness import KS, STALENESS_ARMS, run_staleness, write_staleness


def _ks(text: str) -> list[int]:
    """``--ks``: staleness values, comma-separated integers >= 0."""
    try:
        ks = [int(k) for k in text.split(",") if k.strip()]
    except ValueError:
        ks = []
    if not ks or min(ks) < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers >= 0, e.g. 0,1,2")
    return ks


def main() -> int:
    parser = run_parser(__doc__, "runs/staleness", STALENESS_ARMS)
    parser.add_argument("--ks", type=_ks, default=list(KS), help="comma-separated staleness values (default 0,1,2)")
    args = parser.parse_args()
    return guarded(parser, lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    if not args.table_only:

        def done(k: int, _summary: dict) -> None:
            print(f"[staleness] k={k} done at {(time.perf_counter() - t0) / 60:.1f} min", flush=True)

        run_staleness(
            args.out,
            args.ks,
            args.arms.split(","),
            args.seeds,
            args.first_seed,
            args.jobs,
            args.threads,
            args.cache,
            on_k=done,
        )
    print(write_staleness(args.out, sorted(set(args.ks) | set(KS))))
    print(f"[staleness] {(time.perf_counter() - t0) / 60:.1f} min in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())

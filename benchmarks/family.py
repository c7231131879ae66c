"""Run the regime family (snooze.experiments.family) and write its table and frontier figures.

    .venv/bin/python benchmarks/family.py --out runs/family   # every regime; DAPO and the candidate on seeds 0-4
    .venv/bin/python benchmarks/family.py --out runs/family --regimes default,saturated
    .venv/bin/python benchmarks/family.py --out runs/family --table-only  # rebuild family.md/json, figures

The reported numbers are one run: DAPO and issue 40's candidate on seeds 0-4, the other arms on 0-2
(``--seeds-of``, ``--seeds``); develop on other seeds (``--first-seed 100``).
A killed run resumes when the same command is run again.
"""

from __future__ import annotations

import argparse
import sys
import time

from _runs import guarded, run_parser

from snooze.experiments.family import FAMILY, FAMILY_ARMS, FAMILY_SEEDS_OF, run_family
from snooze.experiments.family_table import write_family


def _regimes(text: str) -> list[str]:
    """``--regimes``: known regime names, comma-separated (a typo is refused, never an empty table)."""
    names = [r for r in text.split(",") if r]
    unknown = sorted(set(names) - set(FAMILY))
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"{text!r}: unknown regime(s) {unknown}; choose from {', '.join(FAMILY)}")
    return names


def _seeds_of(text: str) -> dict[str, int]:
    """``--seeds-of``: ``arm=N`` pairs, comma-separated, each N an integer >= 1."""
    out: dict[str, int] = {}
    for item in filter(None, text.split(",")):
        name, sep, n = item.partition("=")
        if not sep or not n.strip().isdigit() or int(n) < 1 or name in out:
            raise argparse.ArgumentTypeError(f"{item!r}: give each arm once, as ARM=N with N an integer >= 1")
        out[name.strip()] = int(n)
    return out


def _chosen_seeds(given: dict[str, int] | None, arms: list[str]) -> dict[str, int]:
    """``--seeds-of`` as given (an arm not run is an error), or the report's for the arms run."""
    return given if given is not None else {a: n for a, n in FAMILY_SEEDS_OF.items() if a in arms}


def main() -> int:
    parser = run_parser(__doc__, "runs/family", FAMILY_ARMS)
    parser.add_argument("--regimes", type=_regimes, default=list(FAMILY), help="comma-separated regimes (default: all)")
    parser.add_argument(
        "--seeds-of",
        type=_seeds_of,
        default=None,
        metavar="ARM=N,...",
        help="some arms' own number of seeds, in place of --seeds (default: "
        + ",".join(f"{a}={n}" for a, n in FAMILY_SEEDS_OF.items())
        + "; '' for none)",
    )
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
            seeds_of=_chosen_seeds(args.seeds_of, args.arms.split(",")),
        )
    print(write_family(args.out, args.regimes))
    print(f"[family] {(time.perf_counter() - t0) / 60:.1f} min in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())

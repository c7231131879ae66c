"""Two source trees side by side: ``benchmarks/scale.py`` run alternately with each, medians and ratios.

    python benchmarks/versus.py --before /tmp/snooze-before --after . --runs 7 -- --prompts 10000000
    python benchmarks/versus.py --script benchmarks/sync_overhead.py --before /tmp/before --after . -- --steps 400

Each run starts ``<tree>/benchmarks/scale.py ARGS`` (or, with ``--script``, that one script for both trees:
only the library differs) in a fresh process with ``PYTHONPATH=<tree>/src``
(the same interpreter, so the same numpy), in turn: before, after, after, before, before, after...
(pairs in alternating order, so a drift of the machine's speed does not favour either tree). Each
scale run prints its own figures (ms per 1,000 candidates is already a median over steps); this
prints every run, the median of each figure per tree, and the median over pairs of after/before.
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

FIGURES = ("ms_per_1k_candidates", "bytes_per_prompt", "memory_bytes_per_prompt", "save_s", "load_s")


def _run(tree: Path, args: list[str], script: Path | None = None) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    proc = subprocess.run(
        [sys.executable, str(script or tree / "benchmarks" / "scale.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: {script or 'scale.py'} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--before", type=Path, required=True, help="source tree measured as the baseline (holds src/ and benchmarks/)"
    )
    p.add_argument("--after", type=Path, required=True, help="source tree measured against it")
    p.add_argument("--runs", type=int, default=5, help="runs per tree (pairs)")
    p.add_argument(
        "--script", type=Path, default=None, help="benchmark run with each tree's src (default: each tree's scale.py)"
    )
    p.add_argument("scale_args", nargs="*", help="arguments for scale.py (after --)")
    args = p.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    script = args.script.resolve() if args.script else None
    results: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    figures: tuple[str, ...] = FIGURES
    for i in range(args.runs):
        for name in ("before", "after") if i % 2 == 0 else ("after", "before"):
            out = _run(trees[name], args.scale_args, script)
            if script is not None:  # its own figures: every number it prints
                figures = tuple(k for k, v in out.items() if isinstance(v, float))
            results[name].append(out)
            print(f"run {i + 1} {name:>6}: " + "  ".join(f"{k} {out[k]:.4g}" for k in figures), flush=True)
    summary: dict[str, Any] = {"runs": args.runs, "scale_args": args.scale_args}
    for key in figures:
        before = [r[key] for r in results["before"]]
        after = [r[key] for r in results["after"]]
        ratios = [a / b for a, b in zip(after, before) if b]
        summary[key] = {
            "before_median": statistics.median(before),
            "after_median": statistics.median(after),
            "after_over_before_median": round(statistics.median(ratios), 4) if ratios else None,
        }
        print(
            f"{key:>24}: before {summary[key]['before_median']:.4g}  after {summary[key]['after_median']:.4g}  "
            f"after/before {summary[key]['after_over_before_median']}"
        )
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

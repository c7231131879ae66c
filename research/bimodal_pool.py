"""A bimodal pool for ``snooze compare``: only prompts the base model solves and prompts it cannot solve.

Reads ``snooze baseline`` rows (pass rates at the rollout temperature; several files are read as one)
and writes a curriculum file (docs/offline-analysis.md) of one stage whose ``drop`` list holds every
other prompt: what is left is a pool split between prompts the base solves (pass rate >= ``--solved``
and, with ``--solved-below``, below that: solved but not mastered; taken from the datasets in
``--solved-from``) and prompts it cannot solve (pass rate <= ``--unsolved`` under every model in the
files, taken from ``--unsolved-from``). docs/reference-experiment.md ("A bimodal pool") builds the
first one from the solved half of ``rev`` and the unsolved prompts of ``count`` (a task this model does
not learn from other tasks), and measures snoozing there::

    snooze compare --out runs/bimodal/probe --tasks rev:3-8,count:3-6 --arms grpo \
        --steps 1 --seeds 1                               # the warm-up, cached
    snooze baseline --profile default --tasks rev:3-8,count:3-6 --model base=$HOME/.cache/snooze/warmup-<key>/model.pt \
        --samples 16 --out runs/bimodal/base.jsonl        # <key>: runs/bimodal/probe/run_meta.json, warmup.key
    python research/bimodal_pool.py runs/bimodal/base.jsonl --solved 0.75 --solved-from rev:3-8 \
        --unsolved-from count:3-6 --out runs/bimodal/curriculum.json
    snooze compare --out runs/bimodal/main --tasks rev:3-8,count:3-6 --curriculum runs/bimodal/curriculum.json \
        --arms dynamic_sampling,snooze,predictive

The setting in which snoozing generates more than DAPO (same section, "A bimodal setting in which
snoozing generates more than DAPO") keeps ``rev`` prompts at 12/16 to 14/16 and ``count`` prompts at
0 of 64 samples (a second ``snooze baseline --tasks count:3-6 --samples 64``, same model)::

    grep '"rev:3-8"' runs/bimodal/base-t04.jsonl > runs/bimodal/rev-t04.jsonl
    python research/bimodal_pool.py runs/bimodal/rev-t04.jsonl runs/bimodal/count-t04-64.jsonl \
        --solved 0.75 --solved-below 0.9 --unsolved 0 --solved-from rev:3-8 --unsolved-from count:3-6 \
        --out runs/bimodal/curriculum-c64.json
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def _rate(row: dict) -> float:
    return sum(row["rewards"]) / len(row["rewards"]) if "rewards" in row else row["n_correct"] / row["n"]


def split(
    rows: list[dict],
    solved: float,
    unsolved: float,
    base: str = "base",
    solved_from: set[str] | None = None,
    unsolved_from: set[str] | None = None,
    solved_below: float | None = None,
) -> tuple[dict[str, list], dict[str, dict[str, int]]]:
    """``(drop, counts)``: per dataset the ids to drop, and how many prompts fell where. A prompt is
    *solved* when model ``base`` passes at least ``solved`` of its samples (and, with ``solved_below``,
    fewer than that share: solved but not mastered) and its dataset is in ``solved_from`` (``None``:
    any); *not solvable* when every model in the rows passes at most ``unsolved`` (and its dataset is
    in ``unsolved_from``); everything else is dropped."""
    rates: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for r in rows:
        rates[(r["dataset"], r["id"])][r.get("model", "baseline")] = _rate(r)
    drop: dict[str, list] = defaultdict(list)
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"solved": 0, "unsolved": 0, "dropped": 0})
    for (dataset, pid), by_model in rates.items():
        rate = by_model.get(base, 0.0)
        below = solved_below is None or rate < solved_below
        if rate >= solved and below and (solved_from is None or dataset in solved_from):
            kind = "solved"
        elif max(by_model.values()) <= unsolved and (unsolved_from is None or dataset in unsolved_from):
            kind = "unsolved"
        else:
            kind = "dropped"
            drop[dataset].append(pid)
        counts[dataset][kind] += 1
    return dict(drop), dict(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "baseline",
        type=Path,
        nargs="+",
        help="snooze baseline's JSONL (one model; several files: their rows together, e.g. one per task)",
    )
    parser.add_argument("--out", type=Path, required=True, help="the curriculum file to write")
    parser.add_argument(
        "--solved", type=float, default=15 / 16, help="pass rate at or above which a prompt counts as solved"
    )
    parser.add_argument(
        "--solved-below",
        type=float,
        default=None,
        help="pass rate from which a prompt counts as mastered and is dropped (default: none is)",
    )
    parser.add_argument(
        "--unsolved", type=float, default=1 / 16, help="pass rate at or below which it counts as not solved yet"
    )
    parser.add_argument(
        "--base",
        default="base",
        help="the model whose pass rate decides 'solved' (snooze baseline --warmup names it base)",
    )
    parser.add_argument(
        "--solved-from", default=None, help="comma-separated datasets the solved prompts come from (default: all)"
    )
    parser.add_argument(
        "--unsolved-from", default=None, help="comma-separated datasets the unsolved prompts come from (default: all)"
    )
    args = parser.parse_args()
    rows = [json.loads(line) for path in args.baseline for line in path.read_text().splitlines() if line.strip()]
    sets = [set(x.split(",")) if x else None for x in (args.solved_from, args.unsolved_from)]
    drop, counts = split(rows, args.solved, args.unsolved, args.base, *sets, solved_below=args.solved_below)
    curriculum = {"version": 1, "drop": drop, "stages": [{"name": "bimodal", "weights": None, "exclude": {}}]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(curriculum, indent=1))
    for name, c in sorted(counts.items()):
        print(f"{name}: {c['solved']} solved, {c['unsolved']} not solved yet, {c['dropped']} in between (dropped)")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

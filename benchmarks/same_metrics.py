"""Whether two `snooze compare` output folders logged the same metrics: the check that a refactor changed no run.

    .venv/bin/snooze compare --profile quick --out runs/before --jobs 1 --threads 1   # on the old code
    .venv/bin/snooze compare --profile quick --out runs/after --jobs 1 --threads 1    # on the new code
    .venv/bin/python benchmarks/same_metrics.py runs/before runs/after

Every ``metrics.jsonl`` under the two folders is compared line by line, each value as its JSON text, all keys but
the wall-clock ``time/*`` ones. A key only the new run logs is listed apart (a new metric changes no old one);
a key the new run lost, or any value that differs, is a difference. Exit status 0 when every file matches.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _lines(path: Path) -> list[dict[str, Any]]:
    """Each line's metrics but the wall-clock ones, values as their JSON text (bit for bit, not approximately)."""
    out = []
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        out.append({k: json.dumps(v) for k, v in obj.items() if not k.startswith("time/")})
    return out


def compare(before: Path, after: Path) -> tuple[list[str], set[str]]:
    """``(differences, keys only the new run logs)`` over every ``metrics.jsonl`` of the two folders."""
    files_a = sorted(p.relative_to(before) for p in before.rglob("metrics.jsonl"))
    files_b = sorted(p.relative_to(after) for p in after.rglob("metrics.jsonl"))
    if not files_a:
        return [f"{before}: no metrics.jsonl"], set()
    problems = [f"{f}: only in one folder" for f in sorted(set(files_a) ^ set(files_b))]
    added: set[str] = set()
    for f in sorted(set(files_a) & set(files_b)):
        a, b = _lines(before / f), _lines(after / f)
        if len(a) != len(b):
            problems.append(f"{f}: {len(a)} lines before, {len(b)} after")
            continue
        for i, (x, y) in enumerate(zip(a, b)):
            added |= set(y) - set(x)
            lost = sorted(set(x) - set(y))
            diff = sorted(k for k in set(x) & set(y) if x[k] != y[k])
            if lost or diff:
                problems.append(f"{f}, line {i + 1}: lost {lost[:5]}, differ {[(k, x[k], y[k]) for k in diff[:5]]}")
                break
    return problems, added


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path, help="the old code's compare folder")
    parser.add_argument("after", type=Path, help="the new code's compare folder")
    args = parser.parse_args()
    problems, added = compare(args.before, args.after)
    for p in problems:
        print("DIFFERENT", p)
    if added:
        print("new keys (not compared):", ", ".join(sorted(added)))
    n = len(list(args.before.rglob("metrics.jsonl")))
    print(f"{n} metrics files: {'identical' if not problems else f'{len(problems)} differences'} (time/* aside)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

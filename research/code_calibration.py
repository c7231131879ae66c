"""What a prompt's recent groups say about its next one: the evidence behind ``policy="predictive"``'s codes.

For each reward log (``rewards.jsonl`` of a ``snooze compare`` run; DAPO's, so every encounter was
rolled out) and each dataset, the share of groups with signal among the groups that followed a run
of ``k`` too-easy (``E``) or too-hard (``H``) groups in a row of the same prompt, with how many
groups that share is over. docs/concepts.md ("Predictive skipping") quotes it for the dev seeds::

    python research/code_calibration.py runs/dev/default-s10/dynamic_sampling/seed1*/rewards.jsonl
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from snooze.core.classify import SIGNAL, TOO_EASY, TOO_HARD, classify_groups
from snooze.logs import read_reward_log

RUNS = (1, 2, 4, 8)
"""Run lengths reported (8: eight or more)."""


def calibration(path: Path) -> dict[str, dict[str, tuple[float, int]]]:
    """Per dataset: ``{"E1": (signal share of the next group, groups), ...}`` for the runs in :data:`RUNS`."""
    log = read_reward_log(path)
    index, keys = log.prompt_index()
    outcomes = classify_groups(log.rewards, (0.0, 1.0))
    signal = outcomes == SIGNAL
    kind = np.where(outcomes == TOO_EASY, "E", np.where(outcomes == TOO_HARD, "H", "S"))
    counts: dict[str, dict[tuple[str, int], list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    last: dict[int, tuple[str, int]] = {}
    for i, p in enumerate(index.tolist()):  # groups in log order: each prompt's groups in the order they came
        if p in last:
            c, k = last[p]
            cell = counts[keys[p][0]][(c, min(k, RUNS[-1]))]
            cell[0] += int(signal[i])
            cell[1] += 1
        run = last[p][1] + 1 if p in last and last[p][0] == kind[i] else 1
        last[p] = (str(kind[i]), run)
    return {
        ds: {
            f"{c}{k}": (cell[0] / cell[1], cell[1]) for (c, k), cell in sorted(table.items()) if c in "EH" and k in RUNS
        }
        for ds, table in counts.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", type=Path, nargs="+", help="rewards.jsonl files of DAPO runs")
    for path in parser.parse_args().logs:
        for ds, row in calibration(path).items():
            cells = "  ".join(f"{code} {share:.3f} ({n})" for code, (share, n) in row.items())
            print(f"{path.parent.name} {ds}: {cells}")


if __name__ == "__main__":
    main()

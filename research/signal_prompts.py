"""How many distinct prompts a run drew its signal from: per window of training steps, the prompts with
at least one signal group generated, from a run's reward log. docs/reference-experiment.md quotes it
for the 300-prompt pool (predictive skipping draws its signal from about 57 prompts per 20 steps,
DAPO and snoozing from 93-115)::

    python research/signal_prompts.py runs/final-small/{dynamic_sampling,snooze,predictive}/seed*/rewards.jsonl
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from snooze.core.classify import SIGNAL, classify_groups
from snooze.logs import read_reward_log


def distinct_signal_prompts(path: Path, start: int, stop: int, window: int) -> list[int]:
    """Per window ``[a, a + window)`` of steps in ``[start, stop)``: prompts with a signal group generated."""
    log = read_reward_log(path)
    index, _ = log.prompt_index()
    signal = classify_groups(log.rewards, (0.0, 1.0)) == SIGNAL
    return [
        int(np.unique(index[signal & (log.steps >= a) & (log.steps < a + window)]).shape[0])
        for a in range(start, stop, window)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", type=Path, nargs="+", help="rewards.jsonl files")
    parser.add_argument("--start", type=int, default=100, help="first step (default 100: past the first pass)")
    parser.add_argument("--stop", type=int, default=300, help="end step (exclusive)")
    parser.add_argument("--window", type=int, default=20, help="steps per window")
    args = parser.parse_args()
    for path in args.logs:
        counts = distinct_signal_prompts(path, args.start, args.stop, args.window)
        print(
            f"{path.parent.parent.name}/{path.parent.name}: "
            f"mean {np.mean(counts):.0f} prompts per {args.window} steps {counts}"
        )


if __name__ == "__main__":
    main()

"""How much of DAPO's generation a skipping policy could save at best: the oracle floor of ``snooze compare``.

A policy that skips before rolling out knows nothing of a prompt it has never seen, so it must
generate each prompt's first group, and a first group without signal is spent. Past that, an oracle
that knew every later outcome would roll out only groups that carry signal and land in the batch.
So, for DAPO's logged run,

    oracle groups = groups DAPO trained on + first groups of each prompt that had no signal

It is an estimate from DAPO's run, not a bound on every run: another policy trains another model and
meets its prompts in another order. The table's *oracle share* of an arm is
``(DAPO - arm) / (DAPO - oracle)``, the part of that saving it got (docs/results.md).
A real policy pays more: generation comes in whole rounds of ``gen_batch_size``, a step ends only when
its batch is full, and the surplus of the last round is discarded.
"""

from __future__ import annotations

import numpy as np

from snooze.core.classify import SIGNAL, classify_groups
from snooze.logs import RewardLog

__all__ = ["oracle_groups", "zero_signal_first_looks"]


def zero_signal_first_looks(log: RewardLog, reward_range: tuple[float, float] = (0.0, 1.0)) -> int:
    """Prompts whose first group in the log had no signal (outcomes as the scheduler classifies them)."""
    index, _ = log.prompt_index()
    first = np.unique(index, return_index=True)[1]  # [P] line of each prompt's first group
    outcomes = classify_groups(log.rewards[first], reward_range)
    return int(np.count_nonzero(outcomes != SIGNAL))


def oracle_groups(log: RewardLog, train_groups: int, reward_range: tuple[float, float] = (0.0, 1.0)) -> int:
    """The oracle floor of the run ``log`` came from: ``train_groups`` + its zero-signal first looks."""
    return int(train_groups) + zero_signal_first_looks(log, reward_range)

"""A plain model of ``policy="predictive"`` (docs/concepts.md, "Predictive skipping"), one encounter and
one group at a time, for one dataset: nothing vectorised.

It reads the rule as written: a prompt is skipped when it has been seen, its code's predicted signal
rate ``q = (signal + 4 q') / (groups + 4)`` (``q'``: the code one group shorter in its run; ``r`` for a
run of one) is below ``margin * r`` (``hard_margin`` after too-hard groups) and it is not due for a
re-look (age, in groups generated since its last one, below ``recheck * backoff**(k-1) * (1/2 + u) * n``).
After a whole epoch of encounters that issued nothing the margin halves, for the rest of the step; the
``RELAX_LIMIT``-th time nothing is skipped until the step ends. ``r`` and the codes' rates are weighted
sums that lose ``0.5 ** (n / halflife)`` of their weight to ``n`` new groups (the policy's
:func:`decay` table; the groups of one report count together). The draw gives up on the round after a
whole epoch's worth of encounters that issued nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from snooze.core._stream import dataset_key
from snooze.core.policies.history import encounter_uniform
from snooze.core.policies.predictive import (
    CODE_HALFLIFE,
    N_CODES,
    PRIOR_GROUPS,
    RATE_HALFLIFE,
    RELAX_LIMIT,
    RUN_CAP,
    decay,
)


def category(rewards: list[float]) -> int:
    """E 0, S+ 1, S- 2, H 3, F 4 (binary rewards in [0, 1]: no flat groups unless every reward is equal in between)."""
    m = sum(rewards) / len(rewards)
    if max(rewards) - min(rewards) > 1e-6:
        return 1 if m >= 0.5 else 2
    return 0 if m >= 0.99 else 3 if m <= 0.01 else 4


def step_code(code: int, cat: int) -> int:
    if code and (code - 1) // RUN_CAP == cat:
        return code + 1 if (code - 1) % RUN_CAP + 1 < RUN_CAP else code
    return 1 + RUN_CAP * cat


@dataclass
class PredictiveModel:
    n: int
    seed: int
    margin: float
    recheck: int
    backoff: float
    hard_margin: float
    name: str = "d"
    code: list[int] = field(default_factory=list)
    looked: list[int] = field(default_factory=list)  # step of the last group + 1; 0: never
    streak: list[int] = field(default_factory=list)
    rate: list[float] = field(default_factory=lambda: [0.0, 0.0])
    codes: list[list[float]] = field(default_factory=lambda: [[0.0, 0.0] for _ in range(N_CODES)])
    clock: int = 0  # groups reported so far
    relaxed: int = 0  # relaxations taken in this step
    epoch: int = 0
    cursor: int = 0

    def __post_init__(self) -> None:
        self.code, self.looked, self.streak = [0] * self.n, [0] * self.n, [0] * self.n

    # -- the rule --------------------------------------------------------------------------------
    def r(self) -> float:
        return self.rate[0] / self.rate[1] if self.rate[1] > 0 else 0.0

    def q(self, code: int) -> float:
        """The code's rate, shrunk towards the code one shorter in its run (a run of one: towards r)."""
        run = (code - 1) % RUN_CAP + 1
        prior = self.r() if run == 1 else self.q(code - 1)
        s, g = self.codes[code]
        return (s + PRIOR_GROUPS * prior) / (g + PRIOR_GROUPS)

    def low(self, code: int) -> bool:
        margin = self.hard_margin if (code - 1) // RUN_CAP == 3 else self.margin  # a run of too-hard groups
        margin = margin * 0.5**self.relaxed if self.relaxed < RELAX_LIMIT else 0.0
        return code != 0 and self.q(code) < margin * self.r()

    def skipped(self, row: int) -> bool:
        if self.relaxed >= RELAX_LIMIT:
            return False
        age = self.clock - (self.looked[row] - 1)
        if not self.low(self.code[row]):
            return False
        doublings = min(max(self.streak[row] - 1, 0), 16)
        salted = np.array([row | (self.looked[row] << 32)], dtype=np.uint64)
        u = float(encounter_uniform(self.seed, dataset_key(self.name), 0, salted)[0])
        return age < self.recheck * (self.backoff**doublings) * (0.5 + u) * self.n

    # -- drawing: one encounter at a time --------------------------------------------------------
    def _order(self) -> list[int]:
        return [
            int(r) for r in np.random.default_rng([self.seed, dataset_key(self.name), self.epoch]).permutation(self.n)
        ]

    def draw(self, need: int) -> tuple[list[int], int]:
        """``(issued rows, skipped encounters)`` of one round; after a whole epoch without an issue the
        policy relaxes (the margin halves; the last time, skipping stops until the step ends)."""
        issued, skipped, dead = [], 0, 0
        while need > 0:
            if dead >= self.n:
                if self.relaxed >= RELAX_LIMIT:
                    break
                self.relaxed, dead = self.relaxed + 1, 0
            rest = self._order()[self.cursor :]
            got, used = [], 0
            for row in rest:
                used += 1
                if self.skipped(row):
                    skipped += 1
                    continue
                got.append(row)
                if len(got) == need:
                    break
            self.cursor += used
            if self.cursor == self.n:
                self.epoch, self.cursor = self.epoch + 1, 0
            dead = 0 if got else dead + used
            issued += got
            need -= len(got)
        return issued, skipped

    # -- learning: the k-th group of each prompt of a report together ------------------------------
    def report(self, rows: list[int], rewards: list[list[float]]) -> None:
        seen: dict[int, int] = {}
        rounds: list[list[int]] = []
        for i, row in enumerate(rows):
            k = seen.get(row, 0)
            seen[row] = k + 1
            if k == len(rounds):
                rounds.append([])
            rounds[k].append(i)
        for part in rounds:
            self._learn([rows[i] for i in part], [rewards[i] for i in part])

    def _learn(self, rows: list[int], rewards: list[list[float]]) -> None:
        cats = [category(r) for r in rewards]
        signal = [1.0 if c in (1, 2) else 0.0 for c in cats]
        before = [self.code[r] for r in rows]
        lam = float(decay(np.array([len(rows)]), RATE_HALFLIFE)[0])
        self.rate = [self.rate[0] * lam + sum(signal), self.rate[1] * lam + len(rows)]
        for c in range(N_CODES):
            mine = [s for s, b in zip(signal, before) if b == c]
            lam_c = float(decay(np.array([len(mine)]), CODE_HALFLIFE)[0])
            self.codes[c] = [self.codes[c][0] * lam_c + sum(mine), self.codes[c][1] * lam_c + len(mine)]
        self.clock += len(rows)
        for row, cat in zip(rows, cats):
            self.code[row] = step_code(self.code[row], cat)
            self.looked[row] = self.clock + 1
            self.streak[row] = min(self.streak[row] + 1, 255) if cat == 0 else 0

    def end_step(self) -> None:
        self.relaxed = 0

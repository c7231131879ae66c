"""A small, obviously-correct pure-Python model of the snooze semantics.

From docs/concepts.md: "Prompts, groups, outcomes", "Policies".

One dict entry per prompt, one Python step per encounter: nothing vectorised, nothing clever. It
does not choose *how many* candidates each dataset gives (that is the mixer's business); told how
many a dataset issued, it says *which* prompts they must be and what the encounters did.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

EASY, HARD, FLAT, SIGNAL = "too_easy", "too_hard", "flat", "signal"


@dataclass
class Prompt:
    counter: int = 0  # encounters left to skip
    retired: bool = False  # filter saw it too easy
    easy_snoozed: bool = False  # snoozed for being too easy and not rolled out since


@dataclass
class Stream:
    """The encounter order of one dataset: a permutation of rows per epoch from (seed, crc32(name), epoch)."""

    n: int
    seed: int
    name: str
    epochs: int | None
    epoch: int = 0
    cursor: int = 0

    @property
    def exhausted(self) -> bool:
        return self.epochs is not None and self.epoch >= self.epochs

    def next(self) -> int:
        perm = np.random.default_rng([self.seed, zlib.crc32(self.name.encode()), self.epoch]).permutation(self.n)
        row = int(perm[self.cursor])
        self.cursor += 1
        if self.cursor == self.n:
            self.epoch, self.cursor = self.epoch + 1, 0
        return row


@dataclass
class Model:
    names: list[str]
    sizes: list[int]
    seed: int
    policy: str
    factor: int
    epochs: int | None
    prompts: dict[tuple[int, int], Prompt] = field(default_factory=dict)
    streams: list[Stream] = field(default_factory=list)
    step: dict[str, list[int]] = field(default_factory=dict)  # per-step counts by dataset

    def __post_init__(self) -> None:
        self.prompts = {(d, r): Prompt() for d, n in enumerate(self.sizes) for r in range(n)}
        self.streams = [Stream(n, self.seed, name, self.epochs) for name, n in zip(self.names, self.sizes)]
        self.new_step()

    def new_step(self) -> None:
        D = len(self.names)
        self.step = {"gen": [0] * D, "skipped": [0] * D, "passed": [0] * D, "new": [0], "regressed": [0]}

    def all_retired(self, d: int) -> bool:
        return all(self.prompts[(d, r)].retired for r in range(self.sizes[d]))

    def _encounter(self, d: int) -> int | None:
        """One encounter of dataset ``d``: the awake prompt met, or None when it was passed over."""
        row = self.streams[d].next()
        p = self.prompts[(d, row)]
        if p.retired:
            self.step["passed"][d] += 1
            return None
        if p.counter > 0:
            p.counter -= 1  # skipped before any rollout
            self.step["skipped"][d] += 1
            return None
        return row

    def draw(self, d: int, k: int, drain: bool) -> list[int]:
        """The next ``k`` awake prompts of dataset ``d``; ``drain``: keep walking to the stream's end
        (the scheduler asked for more than the data had)."""
        taken: list[int] = []
        while (len(taken) < k or drain) and not self.streams[d].exhausted and not self.all_retired(d):
            row = self._encounter(d)
            if row is not None:
                taken.append(row)
        return taken

    def walk(self, d: int, encounters: int) -> list[int]:
        """Exactly ``encounters`` encounters of dataset ``d`` (stream mix: the mixed stream decides how
        many each dataset spends); returns the awake prompts met, in order."""
        met = (self._encounter(d) for _ in range(encounters))
        return [row for row in met if row is not None]

    def report(self, groups: list[tuple[int, int, str]]) -> None:
        """Apply one report: ``(dataset, row, outcome)`` per group. Outcomes of one report act together:
        a prompt was "easy-snoozed" if it was before the report."""
        before = {key: (p.counter > 0, p.easy_snoozed) for key, p in self.prompts.items()}
        regressed = set()
        for d, row, outcome in groups:
            self.step["gen"][d] += 1
            p = self.prompts[(d, row)]
            if self.policy == "filter" and outcome == EASY:
                p.retired = True
            if self.policy != "snooze":
                continue
            if before[(d, row)][1] and outcome != EASY:
                regressed.add((d, row))
                p.easy_snoozed = False
        for d, row, outcome in groups:
            p = self.prompts[(d, row)]
            if self.policy == "snooze" and outcome == EASY:
                p.counter += self.factor
                p.easy_snoozed = p.easy_snoozed or self.factor > 0
        self.step["regressed"][0] += len(regressed)
        self.step["new"][0] += len(
            {(d, r) for d, r, _ in groups if not before[(d, r)][0] and self.prompts[(d, r)].counter > 0}
        )

"""Built-in verifiable tasks: procedurally generated, difficulty by *level*, exact-answer verifier.

Three families, each a prompt the tiny char model reads and an answer it must write exactly:

- ``add``: ``"37+205="`` -> ``"242"``; level = digits of each operand.
- ``rev``: ``">hdfa="`` -> ``"afdh"``; level = string length (letters ``a``-``j``).
- ``count``: ``"#c:acbcca="`` -> ``"3"``; level = string length (letters ``a``-``e``).

A :class:`TaskSpec` names a family and a level range (``"add:1-3"``). Splits are disjoint by prompt
text: the held-out *test* split is drawn first, the RL *pool* excludes it, and the warm-up draws a
fresh stream of problems that excludes both (a warm-up on a fixed set memorises it). Every record
has a stable string id (``"add:1-3/pool/17"``) made from the spec, the split and its position in a
seeded generator, so the same spec and seed give the same ids on every machine. :func:`task_splits`
builds both splits of every task; ``snooze compare`` and ``snooze baseline`` both call it, so a
curriculum written from a baseline names the ids the training run draws.

Strata for the design note's figure 3 (the blog post this project implements: docs/concepts.md,
"The design note") are level sub-ranges of one spec: :meth:`TaskSpec.strata`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from snooze._kit.checks import as_int, as_list, is_int, shown
from snooze.core.errors import ConfigError, DataError

__all__ = [
    "TaskSpec",
    "FAMILIES",
    "DEFAULT_LEVELS",
    "make_problem",
    "make_split",
    "task_splits",
    "verify",
    "warmup_stream",
    "parse_tasks",
]

FAMILIES: tuple[str, ...] = ("add", "rev", "count", "sort")
DEFAULT_LEVELS: dict[str, tuple[int, int]] = {"add": (1, 3), "rev": (3, 7), "count": (4, 10), "sort": (3, 7)}
_MAX_LEVEL: dict[str, int] = {"add": 6, "rev": 12, "count": 16, "sort": 12}
_REV_LETTERS = "abcdefghij"
_COUNT_LETTERS = "abcde"
_MAX_TRIES = 50  # draws per wanted problem before a split is declared too small for its level range
_SPEC = re.compile(r"([a-z]+)(?::([0-9]+)(?:-([0-9]+))?)?", re.ASCII)  # "add", "add:2", "add:1-3"


@dataclass(frozen=True)
class TaskSpec:
    """One task: a family and an inclusive level range."""

    family: str
    """``add``, ``rev`` or ``count``."""

    lo: int
    """Lowest level (digits for ``add``, string length otherwise)."""

    hi: int
    """Highest level; each problem's level is drawn uniformly from ``lo..hi``."""

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ConfigError(f"task family {self.family!r}: must be one of {', '.join(FAMILIES)}")
        top = _MAX_LEVEL[self.family]
        if not (is_int(self.lo) and is_int(self.hi) and 1 <= self.lo <= self.hi <= top):
            raise ConfigError(
                f"task {self.family} levels {shown(self.lo)}-{shown(self.hi)}: need integers 1 <= lo <= hi <= {top}"
            )

    @property
    def name(self) -> str:
        """Canonical text form, e.g. ``"add:1-3"``; the dataset name used in metrics."""
        return f"{self.family}:{self.lo}-{self.hi}"

    @classmethod
    def parse(cls, text: str) -> TaskSpec:
        """``"add"`` (default levels), ``"add:2"`` or ``"add:1-3"``: a family, then levels of ASCII digits
        (surrounding whitespace ignored). Anything else is a :class:`ConfigError`."""
        if not isinstance(text, str):
            raise ConfigError(f"task {shown(text)}: must be a string such as 'add', 'add:2' or 'add:1-3'")
        found = _SPEC.fullmatch(text.strip())
        if found is None:
            raise ConfigError(
                f"task {text!r}: must look like 'add', 'add:2' or 'add:1-3' (a family of {', '.join(FAMILIES)}, "
                "then levels in ASCII digits)"
            )
        family, a, b = found.groups()
        if a is None:
            lo, hi = DEFAULT_LEVELS.get(family, (1, 1))
        else:
            lo, hi = int(a), int(b or a)
        return cls(family, lo, hi)

    def strata(self, split: int | None = None) -> tuple[TaskSpec, TaskSpec]:
        """Split the level range in two: (easy = ``lo..split``, hard = ``split+1..hi``); ``split``
        defaults to the middle of the range. Needs ``hi > lo``."""
        if self.hi <= self.lo:
            raise ConfigError(f"task {self.name}: a single level cannot be split into strata; widen the range")
        if split is not None and not is_int(split):
            raise ConfigError(f"task {self.name}: strata split {shown(split)}: must be None (the middle) or a level")
        mid = (self.lo + self.hi) // 2 if split is None else int(split)
        if not self.lo <= mid < self.hi:
            raise ConfigError(
                f"task {self.name}: strata split at level {mid}: must be in {self.lo}..{self.hi - 1} "
                "(each stratum needs a level)"
            )
        return TaskSpec(self.family, self.lo, mid), TaskSpec(self.family, mid + 1, self.hi)


def parse_tasks(texts: str | Iterable[str]) -> list[TaskSpec]:
    """Comma-separated or listed task specs (strings, :meth:`TaskSpec.parse`); names must be distinct."""
    if isinstance(texts, str):
        items = texts.split(",")
    elif isinstance(texts, Iterable) and not isinstance(texts, (bytes, bytearray, Mapping)):
        items = list(texts)
    else:
        raise ConfigError(f"tasks {shown(texts)}: must be a string ('add,rev') or a list of strings (['add', 'rev'])")
    for t in items:
        if not isinstance(t, str):
            raise ConfigError(f"tasks: {shown(t)} is not a task spec: each must be a string such as 'add:1-3'")
    specs = [TaskSpec.parse(t) for t in items if t.strip()]
    if not specs:
        raise ConfigError("no tasks given: pass e.g. --tasks add,rev")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ConfigError(f"tasks {names}: each task may appear once")
    return specs


def make_problem(family: str, level: int, rng: np.random.Generator) -> tuple[str, str]:
    """One ``(prompt, answer)`` of the family at ``level``."""
    if family == "add":
        lo, hi = (0 if level == 1 else 10 ** (level - 1)), 10**level
        a, b = (int(x) for x in rng.integers(lo, hi, size=2))
        return f"{a}+{b}=", str(a + b)
    if family == "rev":
        s = "".join(rng.choice(list(_REV_LETTERS), size=level))
        return f">{s}=", s[::-1]
    if family == "sort":
        s = "".join(rng.choice(list(_REV_LETTERS), size=level))
        return f":{s}=", "".join(sorted(s))
    if family == "count":
        target = str(rng.choice(list(_COUNT_LETTERS)))
        s = "".join(rng.choice(list(_COUNT_LETTERS), size=level))
        return f"#{target}:{s}=", str(s.count(target))
    raise ConfigError(f"task family {family!r}: must be one of {', '.join(FAMILIES)}")


def _distinct(spec: TaskSpec) -> int:
    """How many distinct prompts :func:`make_problem` can write for ``spec`` (levels never share a prompt)."""
    per_level = {
        "add": lambda n: (10 if n == 1 else 9 * 10 ** (n - 1)) ** 2,  # two operands of n digits, no leading 0
        "rev": lambda n: len(_REV_LETTERS) ** n,
        "sort": lambda n: len(_REV_LETTERS) ** n,
        "count": lambda n: len(_COUNT_LETTERS) ** (n + 1),  # the target letter, then the string
    }[spec.family]
    return sum(per_level(n) for n in range(spec.lo, spec.hi + 1))


_PROMPT = {
    "add": re.compile(r"(0|[1-9][0-9]*)\+(0|[1-9][0-9]*)="),
    "rev": re.compile(f">([{_REV_LETTERS}]+)="),
    "sort": re.compile(f":([{_REV_LETTERS}]+)="),
    "count": re.compile(f"#[{_COUNT_LETTERS}]:([{_COUNT_LETTERS}]+)="),
}


def _possible(spec: TaskSpec, prompt: str) -> bool:
    """Whether ``prompt`` is one of the prompts of ``spec`` (counted by :func:`_distinct`)."""
    found = _PROMPT[spec.family].fullmatch(prompt) if isinstance(prompt, str) else None
    if found is None or len({len(g) for g in found.groups()}) != 1:  # (add: both operands of one length)
        return False
    return spec.lo <= len(found.group(1)) <= spec.hi


def _seed(*parts: Any) -> int:
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _draw(spec: TaskSpec, rng: np.random.Generator) -> tuple[str, str]:
    return make_problem(spec.family, int(rng.integers(spec.lo, spec.hi + 1)), rng)


def make_split(spec: TaskSpec, split: str, n: int, seed: int = 0, exclude: Iterable[str] = ()) -> list[dict[str, Any]]:
    """``n`` distinct problems (records ``{"id", "prompt", "answer", "task", "level"}``).

    ``exclude``: prompt texts that must not appear (another split's). Deterministic in
    ``(spec, split, n, seed, exclude)``. More than the spec's distinct prompts not excluded is a
    :class:`DataError` before any draw; else up to 50 draws per problem.
    """
    seen = set(exclude)
    room = _distinct(spec) - sum(_possible(spec, p) for p in seen)
    if n > room:  # refused before drawing: 50 draws per problem would take minutes to find out
        held = f", {_distinct(spec) - room:,} of them excluded" if room < _distinct(spec) else ""
        raise DataError(
            f"task {spec.name}: only {room:,} distinct {split} problems exist ({_distinct(spec):,} in all{held}), "
            f"{n:,} wanted; ask for fewer or widen the level range"
        )
    rng = np.random.default_rng(_seed(spec.name, split, seed))
    out: list[dict[str, Any]] = []
    for _ in range(n * _MAX_TRIES):
        if len(out) == n:
            break
        prompt, answer = _draw(spec, rng)
        if prompt in seen:
            continue
        seen.add(prompt)
        level = _level_of(spec.family, prompt)
        out.append(
            {
                "id": f"{spec.name}/{split}/{len(out)}",
                "prompt": prompt,
                "answer": answer,
                "task": spec.name,
                "level": level,
            }
        )
    if len(out) < n:
        raise DataError(
            f"task {spec.name}: only {len(out)} distinct {split} problems found, {n} wanted; "
            "ask for fewer or widen the level range"
        )
    return out


def task_splits(
    specs: Iterable[TaskSpec], pool_size: int, test_size: int, seed: int = 0
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """``(pools, tests)``: task name -> RL-pool records, task name -> held-out records.

    Per task the test split (``test_size`` problems) is drawn first and the pool (``pool_size``) is
    drawn without its prompts. The one builder of the built-in tasks' data: the training run
    (``snooze compare``) and the baseline (``snooze baseline``) get identical ids for the same
    ``(specs, pool_size, test_size, seed)``.

    ``specs``: distinct :class:`TaskSpec` (:func:`parse_tasks` makes them from text); ``pool_size`` and
    ``test_size``: integers >= 1; ``seed``: an integer >= 0. Anything else is a :class:`ConfigError`.
    """
    specs = as_list(
        specs,
        "task_splits(specs)",
        "TaskSpec",
        "a TaskSpec",
        lambda s: isinstance(s, TaskSpec),
        " (parse_tasks('add,rev') makes them)",
    )
    names = [s.name for s in specs]
    if not specs or len(set(names)) != len(names):
        raise ConfigError(f"task_splits(specs): tasks {names}: need at least one, each once")
    pool_size = as_int(pool_size, "task_splits(pool_size)", 1)
    test_size = as_int(test_size, "task_splits(test_size)", 1)
    seed = as_int(seed, "task_splits(seed)", 0)
    pools: dict[str, list[dict[str, Any]]] = {}
    tests: dict[str, list[dict[str, Any]]] = {}
    for spec in specs:
        test = make_split(spec, "test", test_size, seed)
        pools[spec.name] = make_split(spec, "pool", pool_size, seed, exclude=[r["prompt"] for r in test])
        tests[spec.name] = test
    return pools, tests


def _level_of(family: str, prompt: str) -> int:
    if family == "add":
        return max(len(x) for x in prompt[:-1].split("+"))
    return len(prompt) - 2 if family in ("rev", "sort") else len(prompt) - 4


def warmup_stream(specs: Sequence[TaskSpec], exclude: Iterable[str], seed: int = 0) -> Iterator[tuple[str, str]]:
    """Endless fresh ``(prompt, answer)`` pairs over ``specs`` in turn, never a prompt in ``exclude``.

    Levels are drawn uniformly from each spec's range, so the warm-up sees the whole difficulty span.
    """
    banned = frozenset(exclude)
    rngs = [np.random.default_rng(_seed(s.name, "warmup", seed)) for s in specs]
    while True:
        for spec, rng in zip(specs, rngs):
            for _ in range(_MAX_TRIES):
                prompt, answer = _draw(spec, rng)
                if prompt not in banned:
                    yield prompt, answer
                    break
            else:
                raise DataError(f"task {spec.name}: every warm-up draw hit the RL pool or test split; widen the range")


def verify(completion: str, answer: str) -> float:
    """Exact-answer reward: 1.0 when the completion (up to end of sequence) equals the answer."""
    return 1.0 if completion == answer else 0.0

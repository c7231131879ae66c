"""What every importer shares: the groups read from a dump, their checks, the report, the reward log written.

An importer reads a framework's dump into :class:`Rollout` rows (one per rollout: its step, dataset, prompt
id, group key and reward, and where it was read). :func:`build_groups` puts each group's rollouts together,
finds the group size and refuses what a replay cannot use, each with one :class:`~snooze.DataError`:

- a group with fewer rollouts than the others (a partial dump: a killed run, a cancelled group), unless
  ``drop_incomplete`` (then it is left out and counted in the report);
- groups of different sizes (the dump mixes two runs, or two settings of ``n``);
- a dump in which every group has reward spread: what a dump of only the trained batch of a run with
  DAPO's filter looks like (the groups the filter dropped are not in it, so a replay would see no too-easy
  prompt at all); usable only for runs without the filter (``not_filtered`` says the run had none);
- steps missing between the first and the last (a replay needs every step's groups).

:func:`write_reward_log` writes the groups, in step order, with a header that says where they came from.
"""

from __future__ import annotations

import collections
import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from snooze._kit.checks import as_int, check_reward_range
from snooze.core.classify import SIGNAL, classify
from snooze.core.errors import ConfigError, DataError
from snooze.logs._header import RewardLogHeader
from snooze.logs._jsonl import written_aside
from snooze.logs._line_checks import LineChecks
from snooze.logs._reward_log import RewardLogWriter

__all__ = [
    "Rollout",
    "Group",
    "ImportReport",
    "ImportOptions",
    "build_groups",
    "write_reward_log",
    "FILTER_MIN",
    "DAPO_GUESS",
]

MIXED_SHARE = 0.25
"""A group size below the largest that this share of the groups have is a second group size, not a few groups
cut short (a killed run cuts the groups of one step; cancelled groups are cut at every size)."""

DAPO_GUESS = (
    "dynamic_sampling false is a guess: the dump does not record whether the run drew prompts by difficulty or "
    "gated groups by advantage (prime-rl's own sampler and gate leave no trace in its episodes)"
)
"""The caveat of a header whose ``dynamic_sampling: false`` the dump cannot confirm."""

FILTER_MIN = 32
"""Fewest groups at which "every group has reward spread" is taken as a filtered dump. In an unfiltered run
a group without spread (all right or all wrong) is common; 32 groups all with spread are not, unless the
dump holds only groups a filter kept. Below it the report says the check could not tell."""


@dataclass(frozen=True)
class Rollout:
    """One rollout read from a dump."""

    step: int
    dataset: str
    id: str | int
    group: Any
    """What tells this rollout's group from the others of its step (verl's uid, prime-rl's group id, ...)."""
    reward: float | None
    """``None``: the rollout was not scored (failed); its group is incomplete."""
    where: str
    """``file, line n``: for messages."""


@dataclass
class Group:
    """One group of rollouts, ready for the reward log."""

    step: int
    dataset: str
    id: str | int
    rewards: list[float]
    where: str
    order: int
    """Position in the dump (the last rollout's), which orders the groups of a step."""


@dataclass(frozen=True)
class ImportOptions:
    """How a dump is read (the options of ``snooze import``)."""

    group_size: int | None = None
    """Rollouts per group; ``None``: read from the dump (the size of its complete groups)."""

    reward_range: tuple[float, float] | None = None
    """Where the rewards lie; ``None``: ``[0, 1]`` if every reward is in it, else ``[-1, 1]`` if every one
    is in that, else an error asking for it."""

    drop_incomplete: bool = False
    """Leave out groups with fewer rollouts than the group size (or an unscored one), instead of refusing
    the dump; they are counted in the report (their generation is then missing from the log)."""

    not_filtered: bool = False
    """The run had no filter: import a dump in which every group has reward spread."""

    reward_field: str | None = None
    """The field read as each rollout's reward (``None``: the format's own: verl ``score``, prime-rl the
    weighted sum of a trace's rewards, TRL the sum of its reward functions' columns); recorded in the header."""

    def __post_init__(self) -> None:
        if self.reward_field is not None and (not isinstance(self.reward_field, str) or not self.reward_field):
            raise ConfigError(f"--reward-field={self.reward_field!r}: must be the name of a field of the dump")
        if self.group_size is not None:
            object.__setattr__(self, "group_size", as_int(self.group_size, "ImportOptions.group_size", 2))
        if self.reward_range is not None:
            object.__setattr__(
                self, "reward_range", check_reward_range(self.reward_range, "ImportOptions.reward_range")
            )


@dataclass
class ImportReport:
    """What an import read and what it did not."""

    source: str
    files_read: list[str] = field(default_factory=list)
    files_ignored: list[str] = field(default_factory=list)
    rollouts: int = 0
    groups: int = 0
    group_size: int = 0
    steps: tuple[int, int] = (0, 0)
    datasets: dict[str, int] = field(default_factory=dict)
    prompts: int = 0
    keyed_by: str = ""
    dropped: list[str] = field(default_factory=list)
    fields_not_read: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    header: RewardLogHeader | None = None

    def lines(self) -> list[str]:
        """The report, a line each (what ``snooze import`` prints)."""
        out = [
            f"read {len(self.files_read)} file(s) of {self.source}: {self.rollouts:,} rollouts -> {self.groups:,} "
            f"groups of {self.group_size}, steps {self.steps[0]}..{self.steps[1]}, {self.prompts:,} prompts "
            f"(keyed by {self.keyed_by})",
            "datasets: " + ", ".join(f"{d} ({n:,} groups)" for d, n in sorted(self.datasets.items())),
        ]
        if self.dropped:
            out.append(
                f"not read: {len(self.dropped)} incomplete group(s) left out (--drop-incomplete), e.g. "
                + "; ".join(self.dropped[:3])
            )
        if self.files_ignored:
            out.append(
                "not read: files " + ", ".join(self.files_ignored[:5]) + (" ..." if len(self.files_ignored) > 5 else "")
            )
        if self.fields_not_read:
            out.append("not read: fields " + ", ".join(self.fields_not_read))
        out += self.notes
        return out


def _size(complete: Sequence[int], opts: ImportOptions) -> int:
    """The group size: the option, else the size of the dump's largest groups."""
    if opts.group_size is not None:
        return opts.group_size
    return max(complete) if complete else 0


def build_groups(
    rollouts: Iterable[Rollout],
    opts: ImportOptions,
    report: ImportReport,
    size_of: dict[str, int] | None = None,
    steps: Iterable[int] = (),
    sample: bool = False,
) -> list[Group]:
    """The groups of ``rollouts`` (keyed by ``(step, group)``), checked as the module docstring says, in
    step order. ``size_of``: a group size per dataset read from the dump (prime-rl's environments), checked
    to agree. ``steps``: the steps the dump has a file for (a step whose groups all ended in the next step's
    file is in the dump, not missing). ``sample``: the dump holds only some steps (TRL's completions), so
    steps missing between are expected, not a partial dump."""
    by_key: dict[tuple[int, Any], list[Rollout]] = {}
    order: dict[tuple[int, Any], int] = {}
    for n, r in enumerate(rollouts):
        key = (r.step, r.group)
        by_key.setdefault(key, []).append(r)
        order[key] = n
        report.rollouts += 1
    if not by_key:
        raise DataError(f"{report.source}: the dump holds no rollouts")
    sizes = [len(v) for v in by_key.values()]
    size = _size(sizes, opts)
    _check_mixed(by_key, size, opts, size_of)
    groups = []
    for key, rows in by_key.items():
        first = rows[0]
        unscored = [r for r in rows if r.reward is None]
        if len(rows) < size or unscored:
            why = f"{len(rows)} of {size} rollouts" if len(rows) < size else f"{len(unscored)} rollout(s) not scored"
            if not opts.drop_incomplete:
                raise DataError(
                    f"{first.where}: the group of prompt {first.id!r} at step {first.step} is incomplete ({why}): the "
                    "dump is partial (a run killed while dumping, a group the framework cancelled or a failed "
                    "rollout). Pass --drop-incomplete to leave such groups out (their generation is then missing "
                    "from the log)"
                )
            report.dropped.append(f"{first.where}: {first.id!r} ({why})")
            continue
        ids = {r.id for r in rows}
        if len(ids) > 1:
            raise DataError(
                f"{first.where}: one group holds rollouts of {len(ids)} prompts: {sorted(map(str, ids))[:3]}"
            )
        groups.append(
            Group(first.step, first.dataset, first.id, [float(r.reward) for r in rows], first.where, order[key])
        )
    groups.sort(key=lambda g: (g.step, g.order))
    if not groups:
        raise DataError(f"{report.source}: every group is incomplete; nothing to import")
    if not sample:
        _check_steps(groups, report, steps)
    _check_as_lines(groups, report)
    report.groups, report.group_size = len(groups), size
    report.steps = (groups[0].step, groups[-1].step)
    return groups


def _check_mixed(
    by_key: dict[tuple[int, Any], list[Rollout]], size: int, opts: ImportOptions, size_of: dict[str, int] | None
) -> None:
    if size < 2:
        raise DataError(f"groups of {size} rollout(s) have no spread; GRPO needs at least 2 (set --group-size?)")
    big = next(((k, v) for k, v in by_key.items() if len(v) > size), None)
    if big is not None:
        raise DataError(
            f"{big[1][0].where}: a group of {len(big[1])} rollouts, but --group-size is {size}: the dump mixes group "
            "sizes (two runs in one folder, or rollout.n changed); import each run on its own"
        )
    if size_of is not None and len(set(size_of.values())) > 1:
        shown = ", ".join(f"{d}: {g}" for d, g in sorted(size_of.items()))
        raise DataError(f"the dump mixes group sizes ({shown}); a reward log has one group size")
    counts = np.bincount([len(v) for v in by_key.values()])  # groups of each size
    common = int(np.argmax(counts[:size])) if size > 1 else 0  # the most frequent size below the largest
    if opts.group_size is None and counts[common] >= MIXED_SHARE * counts.sum():
        small = next(v for v in by_key.values() if len(v) == common)
        raise DataError(
            f"{small[0].where}: {counts[common]:,} groups have {common} rollouts and {counts[size]:,} have {size}: the "
            "dump mixes group sizes (two runs in one folder, or rollout.n changed); import each run on its own, or "
            "pass --group-size to name the size (and --drop-incomplete to leave the smaller groups out)"
        )


def _check_as_lines(groups: Sequence[Group], report: ImportReport) -> None:
    """The groups, in step order, as the reward log's reader checks its lines against the lines before them
    (each dataset's ids all integers or all strings: the dump's ``0`` and ``"0"`` would be two prompts)."""
    checks = LineChecks()
    for g in groups:
        problem = checks.problem(g.step, g.dataset, g.id, len(g.rewards), g.where)
        if problem is not None:
            raise DataError(f"{g.where}, the prompt's id ({report.keyed_by}): {problem[1]}")


def _missing_steps(steps: Iterable[int], most: int = 5) -> tuple[list[int], int]:
    """The first ``most`` steps missing between the smallest and the largest of ``steps``, and how many are
    missing in all: found from the gaps between the sorted steps, so a lone step 10**8 costs nothing."""
    ordered = sorted(set(steps))
    shown: list[int] = []
    total = 0
    for a, b in itertools.pairwise(ordered):
        if b - a > 1:
            shown.extend(range(a + 1, min(b, a + 1 + most - len(shown))))
            total += b - a - 1
    return shown, total


def _check_steps(groups: Sequence[Group], report: ImportReport, present: Iterable[int] = ()) -> None:
    steps = [groups[0].step, groups[-1].step]
    missing, total = _missing_steps(itertools.chain((g.step for g in groups), present))
    if total:
        shown = ", ".join(map(str, missing)) + (f" ... ({total:,} in all)" if total > len(missing) else "")
        raise DataError(
            f"{report.source}: step(s) {shown} missing between {steps[0]} and {steps[-1]}: the dump is partial, and a "
            "replay needs every step's groups; import a folder that holds consecutive steps"
        )


def reward_range(groups: Sequence[Group], given: tuple[float, float] | None, source: str) -> tuple[float, float]:
    """The given range (every reward checked in it), else the first of [0, 1] and [-1, 1] that holds them."""
    flat = np.concatenate([np.asarray(g.rewards, dtype=np.float64) for g in groups])
    bad = ~np.isfinite(flat)
    if bad.any():
        g = next(g for g in groups if not np.isfinite(g.rewards).all())
        raise DataError(f"{g.where}: a reward of prompt {g.id!r} is not finite")
    lo, hi = float(flat.min()), float(flat.max())
    if given is not None:
        if lo < given[0] or hi > given[1]:
            raise DataError(f"{source}: rewards lie in [{lo:g}, {hi:g}], outside --reward-range {list(given)}")
        return given
    for cand in ((0.0, 1.0), (-1.0, 1.0)):
        if cand[0] <= lo and hi <= cand[1]:
            return cand
    raise DataError(f"{source}: rewards lie in [{lo:g}, {hi:g}]; pass --reward-range=LOW,HIGH (the run's range)")


def check_filtered(
    groups: Sequence[Group], rr: tuple[float, float], opts: ImportOptions, report: ImportReport
) -> tuple[str, ...]:
    """Refuse a dump in which every group has spread (module docstring), unless ``not_filtered``. Returns the
    header's caveat when the check could not tell (too few groups)."""
    rewards = np.asarray([g.rewards for g in groups], dtype=np.float64)  # [N, G]
    signal = classify(rewards, rr, 0.99, 0.01, 1e-6) == SIGNAL
    if not signal.all() or opts.not_filtered:
        report.notes.append(f"groups with reward spread: {int(signal.sum()):,} of {len(groups):,}")
        return ()
    if len(groups) < FILTER_MIN:
        report.notes.append(
            f"note: every one of the {len(groups)} groups has reward spread; too few to tell a dump of a run with "
            "DAPO's filter (only the trained groups) from an unfiltered one"
        )
        return (
            f"dynamic_sampling false is a guess: every one of the {len(groups)} groups has reward spread, too few "
            "to tell a run with DAPO's filter from one without",
        )
    raise DataError(
        f"{report.source}: every one of the {len(groups):,} groups has reward spread. That is a dump of a run with "
        "DAPO's filter (verl: algorithm.filter_groups.enable=True), which holds only the trained batch: the groups "
        "the filter dropped are missing, so a replay would never see a too-easy prompt. Such a dump is usable only "
        "for runs without the filter; if this run had none, pass --not-filtered"
    )


def write_reward_log(path: str | os.PathLike[str], groups: Sequence[Group], header: RewardLogHeader) -> None:
    """The groups as a reward log with ``header`` (its first line), step by step in dump order. Written aside
    and renamed into place: a write that fails (a group the reward log refuses, a full disk) leaves ``path``
    as it was (an earlier log stays whole) and nothing beside it."""
    path = Path(path)
    try:
        with written_aside(path) as tmp, RewardLogWriter(tmp, header=header) as log:
            for step in _by_step(groups):
                log.write(step[0].step, [g.dataset for g in step], [g.id for g in step], [g.rewards for g in step])
    except OSError as exc:
        why = exc.strerror or exc
        raise DataError(f"{path}: the reward log could not be written ({why}); it is as it was") from None
    except ConfigError as exc:  # the file written aside could not be opened: name the user's path, not it
        why = str(exc).split("cannot be written (", 1)[-1].split(")", 1)[0]
        raise DataError(f"{path}: the reward log could not be written ({why}); it is as it was") from None


def _by_step(groups: Sequence[Group]) -> Iterator[Sequence[Group]]:
    """The runs of groups (in step order) that share a step."""
    start = 0
    while start < len(groups):
        end = start
        while end < len(groups) and groups[end].step == groups[start].step:
            end += 1
        yield groups[start:end]
        start = end


def plain_grpo_header(
    groups: Sequence[Group],
    report: ImportReport,
    reward_range: tuple[float, float],
    source: str,
    reward_field: str | None,
    caveats: Sequence[str],
) -> RewardLogHeader:
    """The header of a dump of plain GRPO steps (one round, every group trained on), with the report's counts
    filled in: ``batch_size`` is the groups of a step when every step holds as many, else ``null`` (noted)."""
    per_step = collections.Counter(g.step for g in groups)
    batch = next(iter(per_step.values())) if len(set(per_step.values())) == 1 else None
    report.datasets = dict(collections.Counter(g.dataset for g in groups))
    report.prompts = len({(g.dataset, g.id) for g in groups})
    if batch is None:
        report.notes.append("steps hold different numbers of groups: batch_size left null in the header")
    report.header = RewardLogHeader(
        group_size=report.group_size,
        batch_size=batch,
        gen_batch_size=batch,
        max_gen_rounds=1,
        policy="grpo",
        dynamic_sampling=False,
        reward_range=reward_range,
        carry_surplus=False,
        source=source,
        reward_field=reward_field,
        caveats=tuple(caveats),
    )
    return report.header

"""The plug-in point for policies and skip rules: what one is, what it sees, how it is registered.

A **policy** decides, for each reported group, whether it may enter the training batch and what
happens to its prompt's future encounters (docs/concepts.md, "Policies"). It may

- keep per-prompt columns of its own (:attr:`Policy.columns`: a few bytes a prompt, saved with the
  state as ``ds<d>.<name>``),
- skip encounters before any rollout beyond the snooze counter (:meth:`Policy.skip_mask`), and
- update the prompt memory from each report (:meth:`Policy.report`).

A **skip rule** is the part of ``snooze`` that decides how a too-easy prompt is skipped
(``SnoozeOptions.skip``: ``counter`` or ``history``); it has the same three hooks.

Both are registered by name, as verl registers its advantage estimators, and
``SchedulerConfig.policy`` / ``SnoozeOptions.skip`` accept exactly the registered names. Each declares
its knobs as a frozen options dataclass (:class:`~snooze.core.options.Options`), which
``SchedulerConfig.options`` holds, the CLI turns into flags and a saved state keeps::

    @dataclass(frozen=True)
    class MyOptions(Options):
        every: int = 2  # (its docstring, under it, is its --help)

    @register_policy("my_policy")
    class MyPolicy(Policy):
        Options = MyOptions
        columns = (Column("seen", np.uint8),)

        def report(self, memory, report):
            memory.columns["seen"][report.group_rows] = 1
            return None  # or Changes(new=..., regressed=..., retired=...): bool flags per prompt of report.prompts()

    SchedulerConfig(policy="my_policy", options=MyOptions(every=3))

The runnable version is ``examples/custom_policy.py`` (a test executes it).

The flags a policy may set in ``memory.columns["flags"]`` (``RETIRED``, ``EASY_SNOOZED``; ``EXCLUDED`` is a
curriculum's, ``BLOCKED`` either) and the checked-number helpers an options class validates with
(``as_int``, ``as_real``: a :class:`~snooze.ConfigError` naming the option) are part of this API.

The types a hook is handed (:class:`Report`, :class:`PromptMemory`, :class:`PromptTable`, :class:`DatasetStream`)
are exported here too, so a typed plug-in imports nothing private; docs/concepts.md, "Writing a policy", says
which rows each indexes (memory-wide in ``report``, the dataset's own in ``skip_mask``) and which hooks most
policies need.

A plug-in gets what it owns: it is built from its own options (``self.options``) and a small
:class:`Context` (the run's dataset names and sizes, the group size, the seed; ``self.context``),
never from the whole ``SchedulerConfig``. A new policy is one module holding such a class, imported
once so that it registers (the built-in ones are imported by :mod:`snooze.core.policies`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple

import numpy as np

from snooze._kit.checks import as_int, as_real
from snooze.core._memory import BLOCKED, EASY_SNOOZED, EXCLUDED, RETIRED, Column, PromptMemory, PromptTable
from snooze.core._stream import DatasetStream
from snooze.core.classify import SIGNAL, TOO_EASY, TOO_HARD, group_means
from snooze.core.errors import PolicyConformanceError, StateError
from snooze.core.options import POLICIES, SKIP_RULES, NoOptions, Options, Registry

__all__ = [
    "Policy",
    "SkipRule",
    "Report",
    "Prompts",
    "Changes",
    "Context",
    "Column",
    "PromptMemory",
    "PromptTable",
    "DatasetStream",
    "SkipMask",
    "RETIRED",
    "EASY_SNOOZED",
    "EXCLUDED",
    "BLOCKED",
    "as_int",
    "as_real",
    "Options",
    "NoOptions",
    "Registry",
    "POLICIES",
    "SKIP_RULES",
    "register_policy",
    "register_skip_rule",
    "make_policy",
    "check_changes",
]

SkipMask = Callable[[PromptTable, DatasetStream, np.ndarray, np.ndarray], np.ndarray]
"""``(table, stream, rows [M], awake [M]) -> skip [M]``: which of the next encounters of a dataset
(``rows``, all of one epoch; ``awake``: counter at 0 and not blocked) are skipped before any rollout."""


class Prompts(NamedTuple):
    """A report seen from its prompts: each distinct prompt once. ``[U]`` each."""

    rows: np.ndarray  # rows of the prompt memory (all datasets)
    ds: np.ndarray  # owning dataset
    easy: np.ndarray  # too-easy groups of the prompt in this report (0 or 1; more when issued twice in one round)
    hard: np.ndarray  # too-hard groups
    other: np.ndarray  # bool: the prompt had a group that was not too easy


class Report:
    """One report as the policies see it: its groups in report order, and (:meth:`prompts`) each
    prompt once. A round draws all its candidates before any is reported, so a small dataset can
    issue one prompt twice across an epoch edge: both groups count, together (docs/concepts.md)."""

    def __init__(
        self,
        ds: np.ndarray,
        rows: np.ndarray,
        outcomes: np.ndarray,
        rewards: np.ndarray,
        reward_range: tuple[float, float],
    ) -> None:
        # read-only views: a plug-in reads the report, never writes the caller's rewards
        self.group_ds = _read_only(ds)  # [N] dataset of each group
        self.group_rows = _read_only(rows)  # [N] row of each group's prompt in the prompt memory
        self.outcomes = _read_only(outcomes)  # [N] outcome codes (snooze.SIGNAL, ...)
        self.rewards = _read_only(rewards)  # [N, G], checked
        self.reward_range = reward_range
        self._repeated: bool | None = None
        self._prompts: Prompts | None = None

    def __len__(self) -> int:
        return int(self.group_rows.shape[0])

    @property
    def repeated(self) -> bool:
        """Whether some prompt has more than one group in this report."""
        if self._repeated is None and self.group_rows.shape[0] < 2:
            self._repeated = False
        if self._repeated is None:
            ordered = np.sort(self.group_rows)
            self._repeated = bool((ordered[1:] == ordered[:-1]).any())
        return self._repeated

    def means(self) -> np.ndarray:
        """Each group's mean reward as a fraction of the reward range, ``[N]`` in [0, 1]."""
        low, high = self.reward_range
        return np.clip((group_means(self.rewards) - low) / (high - low), 0.0, 1.0)

    def prompts(self) -> Prompts:
        """Each distinct prompt of the report once, with its groups' outcomes counted."""
        if self._prompts is None:
            self._prompts = self._count()
        return self._prompts

    def _count(self) -> Prompts:
        easy, hard = self.outcomes == TOO_EASY, self.outcomes == TOO_HARD
        if not self.repeated:  # the usual report: each group its own prompt
            return Prompts(self.group_rows, self.group_ds, easy, hard, ~easy)
        rows, first, inverse = np.unique(self.group_rows, return_index=True, return_inverse=True)
        U = rows.shape[0]
        n_easy = np.bincount(inverse[easy], minlength=U)
        n_hard = np.bincount(inverse[hard], minlength=U)
        other = np.bincount(inverse[~easy], minlength=U) > 0
        return Prompts(rows, self.group_ds[first], n_easy, n_hard, other)


def _read_only(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False
    return view


class Changes(NamedTuple):
    """What a report did to its prompts, for the step's metrics (``snooze/new``, ``snooze/regressed``,
    ``filter/new``): a ``bool`` array per kind, one flag per prompt of ``report.prompts()`` (each prompt
    once; a report that repeats no prompt has one per group, in report order); ``None`` where the policy
    changes nothing of the kind. ``Changes(new=fresh)``, ``Changes(retired=fresh)``. The counts of asleep,
    retired and blocked prompts are not here: the prompt memory derives them from the columns the report
    wrote."""

    new: np.ndarray | None = None  # put to sleep: snooze counter went from 0 to above 0 (``snooze/new``)
    regressed: np.ndarray | None = None  # woke from a too-easy snooze and was not too easy (``snooze/regressed``)
    retired: np.ndarray | None = None  # newly retired (``filter/new``)


class Context(NamedTuple):
    """What a plug-in is built with beside its own options: the run, not its configuration."""

    names: tuple[str, ...]  # the datasets, in the order ``Report.group_ds`` indexes them
    sizes: tuple[int, ...]  # prompts per dataset
    group_size: int  # rollouts per prompt (G)
    seed: int  # the scheduler's seed


class _Plugin:
    """What policies and skip rules share: a name, options, columns, an optional mask, a report hook."""

    name: ClassVar[str] = ""
    Options: ClassVar[type[Options]] = NoOptions
    """Its options class: a frozen dataclass subclassing :class:`~snooze.core.options.Options`
    (``SchedulerConfig.options`` holds an instance; :class:`NoOptions`: none)."""
    columns: tuple[Column, ...] = ()
    skip_mask: SkipMask | None = None
    """Extra skips at an encounter, before any rollout (``None``: only the snooze counter skips)."""

    patience: int = 1
    """With a skip mask: how many whole epochs of a dataset in a row (an integer >= 1) a draw may walk
    through without meeting an awake prompt or waking one (every encounter skipped by the mask, or
    blocked) before it gives up on that dataset for the round. A mask that skips a prompt for good would
    otherwise walk forever (``skip="history"``, whose mask lets a prompt through with a small probability,
    declares 256)."""

    def __init__(self, options: Options, context: Context) -> None:
        self.options: Any = options
        """This plug-in's options (an instance of its ``Options``)."""
        self.context = context

    def state_dict(self) -> dict[str, Any]:
        """Run-level state beyond the per-prompt columns (none for the built-in ones)."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state:
            raise StateError(f"{self.name!r} keeps no state of its own, but the saved state has {sorted(state)}")


class Policy(_Plugin):
    """Base class of the policies (``SchedulerConfig.policy``). The defaults are DAPO's: zero-signal
    groups stay out of the batch and prompts' futures are unchanged."""

    trains_on_zero_signal: ClassVar[bool] = False
    """Zero-signal groups enter the batch too (``grpo``)."""

    def report(self, memory: PromptMemory, report: Report) -> Changes | None:
        """Update the prompt memory for a report's groups; what changed (``None``: nothing)."""
        return None

    def audited(self, memory: PromptMemory, report: Report) -> Changes | None:
        """The groups of audited encounters (prompts the policy skipped, rolled out to measure what skipping
        gives up; docs/concepts.md, "The audit"). Nothing by default: the memory evolves as if they had been
        skipped, so the audit stays an unbiased sample. A policy may learn from them (a prompt found to carry
        signal comes back early)."""
        return None

    def screen(self, memory: PromptMemory, report: Report) -> np.ndarray:
        """Partial groups (``SchedulerConfig.screen_size``; docs/concepts.md "Partial groups"): ``report`` holds
        screens, each prompt's first k rewards (``report.rewards`` ``[N, k]``, ``report.outcomes`` classified on
        them). Returns ``[N]`` bool: ``True`` asks for the rest of the group (its other G - k rollouts, in the step's
        next round), ``False`` stops it (its k rewards are its group, reported to :meth:`report` and dropped). The
        memory is read here, never written. The default continues the screens with signal: k rollouts that
        disagree prove the group has signal whatever the rest; k that agree stop it (a prompt it is wrong to stop
        has pass rate p with p**k + (1-p)**k of its screens agreeing)."""
        return np.asarray(report.outcomes == SIGNAL)

    def relax(self, d: int) -> bool:
        """A draw met nothing but prompts of dataset ``d`` skipped by the mask (or blocked) for
        ``patience`` epochs in a row. ``True``: the policy now skips less, and the draw goes on; ``False``
        (the default): the draw gives up on ``d`` for the round."""
        return False

    def end_step(self, steps: int) -> None:
        """A training step was finished; ``steps``: how many are finished now (a clock that counts
        training updates, which moves even when a step generated nothing). Nothing by default."""


class SkipRule(_Plugin):
    """Base class of the skip rules of ``snooze`` (``SnoozeOptions.skip``)."""

    marks_easy: bool = True
    """A too-easy outcome marks the prompt ``EASY_SNOOZED``, so its next group can count as regressed."""

    def easy_periods(self, streak: np.ndarray) -> np.ndarray | np.integer:
        """Encounters each too-easy outcome adds to the snooze counter, given the prompt's streak of
        too-easy outcomes before it (``[U]``, or one number for all)."""
        return np.int32(0)

    def report(self, memory: PromptMemory, report: Report) -> None:
        """Update the rule's own columns from a report (before the policy's update)."""

    def __init__(self, options: Options, context: Context, snooze: Any) -> None:
        """``options``: the rule's own (``SnoozeOptions.rule``); ``snooze``: the ``SnoozeOptions`` it serves
        (its periods: ``factor``, ``backoff``, ``max``)."""
        super().__init__(options, context)
        self.snooze = snooze


def check_changes(changes: Any, policy: str, report: Report) -> None:
    """A policy's :class:`Changes` for ``report``: each kind ``None`` or a ``bool`` array of one flag per prompt
    of ``report.prompts()``; else a :class:`PolicyConformanceError` naming what is wrong."""
    if not isinstance(changes, Changes):
        raise PolicyConformanceError(
            f"policy {policy!r}: report() and audited() must return Changes(new=..., regressed=..., retired=...) "
            f"or None, not {type(changes).__name__}"
        )
    shape = report.prompts().rows.shape
    for name in Changes._fields:
        flags = getattr(changes, name)
        if flags is None:
            continue
        if not isinstance(flags, np.ndarray) or flags.dtype != np.bool_ or flags.shape != shape:
            got = f"{type(flags).__name__} {getattr(flags, 'dtype', '')} {getattr(flags, 'shape', '')}".strip()
            raise PolicyConformanceError(
                f"policy {policy!r}: Changes.{name} is {got}, not a bool array of shape {shape} (one flag per "
                "prompt of report.prompts(), each prompt once)"
            )


register_policy = POLICIES.register
register_skip_rule = SKIP_RULES.register


def make_policy(name: str, options: Options, context: Context) -> Policy:
    """The registered policy ``name``, built from its options and the run's context."""
    return POLICIES[name](options, context)  # type: ignore[no-any-return]

"""The numpy-only core: what a user of the scheduler touches, in one place.

The step loop in numbers (docs/concepts.md, "The step loop"):

>>> import snooze
>>> sched = snooze.Scheduler({"math": [{"id": f"q{i}"} for i in range(6)]},
...                          snooze.SchedulerConfig(batch_size=2, group_size=4, options=snooze.SnoozeOptions(factor=2)))
>>> cands = sched.propose()
>>> [c.id for c in cands]
['q0', 'q1']
>>> sched.report(cands, [[1, 1, 1, 1], [1, 0, 1, 0]]).tolist()  # q0 too easy (1), q1 carries signal (0)
[1, 0]
>>> batch = sched.finish_step()  # closing the step early: the round limit was not reached
>>> [c.id for c in batch.candidates], batch.metrics["snooze/asleep"]
(['q1'], 1)

Nothing under ``snooze.core`` imports torch, a trainer, an integration or the CLI. Modules whose
name starts with ``_`` are the scheduler's parts (stream, prompt memory, draw walk, pending set,
buffers, mix, metrics, state envelope); they may change without notice, and nothing outside ``snooze.core``
imports them (tests aside). What every package shares (errors, argument checks, atomic files, strict JSON)
is in the internal kit, :mod:`snooze._kit`.
"""

from snooze.core.advantages import grpo_advantages
from snooze.core.checkpoint import load_state, save_state
from snooze.core.classify import FLAT, OUTCOME_NAMES, SIGNAL, TOO_EASY, TOO_HARD, check_rewards, classify_groups
from snooze.core.config import RECOMMENDED, SchedulerConfig
from snooze.core.conformance import check_policy
from snooze.core.errors import *  # noqa: F403  (the exception tree: errors.__all__)
from snooze.core.errors import __all__ as _errors
from snooze.core.options import NoOptions, Options
from snooze.core.policies import POLICIES, SKIP_RULES, register_policy, register_skip_rule
from snooze.core.policies.history import HistoryOptions
from snooze.core.policies.predictive import PredictiveOptions
from snooze.core.policies.snooze import SnoozeOptions
from snooze.core.scheduler import Scheduler
from snooze.core.source import Source, as_source
from snooze.core.types import PLACES, Batch, Candidate, Candidates, Generated, RolloutFn, StepRecord

__all__ = [
    "Scheduler",
    "SchedulerConfig",
    "RECOMMENDED",
    "Options",
    "NoOptions",
    "SnoozeOptions",
    "HistoryOptions",
    "PredictiveOptions",
    "Candidate",
    "Candidates",
    "Batch",
    "StepRecord",
    "PLACES",
    "RolloutFn",
    "Generated",
    "Source",
    "as_source",
    "save_state",
    "load_state",
    "POLICIES",
    "SKIP_RULES",
    "register_policy",
    "register_skip_rule",
    "check_policy",
    "grpo_advantages",
    "classify_groups",
    "check_rewards",
    "SIGNAL",
    "TOO_EASY",
    "TOO_HARD",
    "FLAT",
    "OUTCOME_NAMES",
    *_errors,
]

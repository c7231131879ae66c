"""snooze: spend GRPO generation compute only where there is something to learn.

The public API. Everything else is private and may change::

    import snooze
    sched = snooze.Scheduler({"math": records}, snooze.SchedulerConfig(policy="snooze", snooze_factor=5))
    batch = sched.step(rollout_fn)   # rollout_fn(candidates) -> rewards [len(candidates), group_size]
"""

from snooze.core.advantages import grpo_advantages
from snooze.core.classify import FLAT, OUTCOME_NAMES, SIGNAL, TOO_EASY, TOO_HARD, check_rewards, classify_groups
from snooze.core.config import POLICIES, SchedulerConfig
from snooze.core.errors import (
    BatchShortError,
    ConfigError,
    DataError,
    IntegrationError,
    ReportError,
    RewardError,
    SnoozeError,
    StateError,
    StateMismatchError,
)
from snooze.core.scheduler import Scheduler
from snooze.core.types import Batch, Candidate, RolloutFn
from snooze.data.source import Source, as_source

__version__ = "0.1.0"

__all__ = [
    "Scheduler",
    "SchedulerConfig",
    "POLICIES",
    "Candidate",
    "Batch",
    "RolloutFn",
    "Source",
    "as_source",
    "grpo_advantages",
    "classify_groups",
    "check_rewards",
    "SIGNAL",
    "TOO_EASY",
    "TOO_HARD",
    "FLAT",
    "OUTCOME_NAMES",
    "SnoozeError",
    "ConfigError",
    "DataError",
    "RewardError",
    "ReportError",
    "BatchShortError",
    "StateError",
    "StateMismatchError",
    "IntegrationError",
    "__version__",
]

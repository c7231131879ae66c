"""The run logs, in one place: the reward log (one JSON line per generated group) and the metrics log
(one JSON line per step): their writers, their readers, and the atomic cut-back to a step on resume.

Used by the reference trainer, the TRL and verl adapters (reward log), ``snooze replay`` (reading the
reward log) and the figures and run summaries (reading the metrics log). Formats:
``docs/reward-log.md`` and ``docs/metrics.md``. :mod:`snooze.logs.dashboard`: the five metrics to watch,
the ``compact`` metrics mode, and the names scheduler metrics are logged under in TRL and verl.
"""

from snooze.logs._header import RewardLogHeader, is_header
from snooze.logs._jsonl import read_lines, truncate_log
from snooze.logs._metrics_log import LATE_EVALS, METRICS_FILE, MetricsLogWriter, late_evaluations, read_metrics
from snooze.logs._reward_log import (
    OPTIONAL_FIELDS,
    REQUIRED_FIELDS,
    REWARDS_FILE,
    RewardLog,
    RewardLogWriter,
    read_reward_log,
    write_groups,
)
from snooze.logs.dashboard import DASHBOARD, METRICS_MODES, check_metrics_mode, framework_metrics, logged_name

__all__ = [
    "RewardLog",
    "RewardLogHeader",
    "is_header",
    "RewardLogWriter",
    "read_reward_log",
    "write_groups",
    "REQUIRED_FIELDS",
    "OPTIONAL_FIELDS",
    "REWARDS_FILE",
    "METRICS_FILE",
    "MetricsLogWriter",
    "read_metrics",
    "late_evaluations",
    "LATE_EVALS",
    "read_lines",
    "truncate_log",
    "DASHBOARD",
    "METRICS_MODES",
    "check_metrics_mode",
    "framework_metrics",
    "logged_name",
]

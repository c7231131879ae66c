"""Offline analyses: replay a logged run under other policies, stratify prompts by baseline pass rate.

numpy only at import; matplotlib and pyarrow are imported inside the functions that need them.
"""

from snooze.analysis.completions import Completions, read_completions
from snooze.analysis.outputs import write_stratification
from snooze.analysis.replay import ReplayPolicy, StepShape, policy_names, replay, replay_policies
from snooze.analysis.reward_log import RewardLog, RewardLogWriter, read_reward_log
from snooze.analysis.stratify import STRATA, Stratification, StratifyConfig, signal_prob, stratify

__all__ = [
    "Completions",
    "STRATA",
    "Stratification",
    "StratifyConfig",
    "read_completions",
    "signal_prob",
    "stratify",
    "write_stratification",
    "ReplayPolicy",
    "StepShape",
    "RewardLog",
    "RewardLogWriter",
    "policy_names",
    "read_reward_log",
    "replay",
    "replay_policies",
]

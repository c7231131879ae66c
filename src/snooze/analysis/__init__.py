"""Offline analyses: replay a logged run under other policies, stratify prompts by baseline pass rate.

numpy only at import; matplotlib and pyarrow are imported inside the functions that need them.
"""

from snooze.analysis.replay import ReplayPolicy, policy_names, replay, replay_policies
from snooze.analysis.reward_log import RewardLog, RewardLogWriter, read_reward_log

__all__ = [
    "ReplayPolicy",
    "RewardLog",
    "RewardLogWriter",
    "policy_names",
    "read_reward_log",
    "replay",
    "replay_policies",
]

"""Offline analyses: replay a logged run under other policies, stratify prompts by baseline pass rate,
re-estimate a finished run's saving against DAPO.

numpy only at import; matplotlib and pyarrow are imported inside the functions that need them. The
reward log these read is :mod:`snooze.logs`'s; the baseline completions that stratification reads
are sampled by :mod:`snooze.experiments.baseline` (it runs the reference model).
"""

from snooze.analysis.completions import Completions, read_completions
from snooze.analysis.outputs import write_stratification
from snooze.analysis.replay import ReplayPolicy, StepShape, policy_names, replay, replay_policies
from snooze.analysis.saved import saved_dapo_groups
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
    "policy_names",
    "replay",
    "replay_policies",
    "saved_dapo_groups",
]

"""Experiments that run the reference trainer (torch needed): :mod:`.compare` (``snooze compare``: every
policy from one base model, side by side) and :mod:`.baseline` (``snooze baseline``: baseline
completions of the built-in tasks, the input of ``snooze stratify``). Names are imported on first use.
"""

from snooze._kit.lazy import lazy

_EXPORTS = {
    **dict.fromkeys(
        ["Profile", "PROFILES", "run_compare", "summary_table", "profile_base"], "snooze.experiments.compare"
    ),
    **dict.fromkeys(
        ["BaselineConfig", "baseline_completions", "write_completions", "task_pool", "load_checkpoint"],
        "snooze.experiments.baseline",
    ),
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy(__name__, _EXPORTS)

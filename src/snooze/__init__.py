"""snooze: spend GRPO generation compute only where there is something to learn.

The public API (``snooze.core``'s and :class:`snooze.curriculum.Curriculum`, re-exported). Everything else is
private and may change::

    import snooze
    sched = snooze.Scheduler({"math": records}, snooze.SchedulerConfig(options=snooze.SnoozeOptions(factor=1)))
    batch = sched.step(rollout_fn)   # rollout_fn(candidates) -> rewards [len(candidates), group_size]

Sub-packages, each with its own ``__all__``: :mod:`snooze.core` (this API), :mod:`snooze.core.policies`
(writing a policy), :mod:`snooze.logs` (reward and metrics logs), :mod:`snooze.curriculum` (curricula),
:mod:`snooze.trainer` (the reference GRPO trainer, torch), :mod:`snooze.integrations` (TRL, verl),
:mod:`snooze.plots`, :mod:`snooze.analysis` (replay, stratify), :mod:`snooze.experiments` (``snooze compare``,
``snooze baseline``), :mod:`snooze.cli`.
"""

from snooze.core import *  # noqa: F403  (the curated API: snooze.core.__all__)
from snooze.core import __all__ as _core_all
from snooze.curriculum import Curriculum

__version__ = "0.1.0"

__all__ = [*_core_all, "Curriculum", "__version__"]

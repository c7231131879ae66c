"""Curricula: stages of dataset weights and excluded prompts, switched at a step or on a metric.

Not part of the scheduler: a step loop applies one to a :class:`~snooze.Scheduler` through its public
``set_stage`` (the reference trainer, the TRL and verl adapters, ``snooze compare``). ``snooze stratify``
writes the file; :mod:`snooze.curriculum.stages` reads and runs it. ``snooze.Curriculum`` is the same class.
"""

from snooze.curriculum.stages import Condition, Curriculum, Stage

__all__ = ["Curriculum", "Stage", "Condition"]

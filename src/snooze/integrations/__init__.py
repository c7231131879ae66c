"""Adapters that run the scheduler inside other training frameworks.

Each adapter lives in its own module and imports its framework when that module is imported, so
``import snooze`` never needs TRL or verl:

- :mod:`snooze.integrations.trl`: ``SnoozeGRPOTrainer``, a TRL ``GRPOTrainer`` whose generation step
  draws prompts from the scheduler and trains only on signal groups, on one process or many (extra
  ``[trl]``; its multi-process layout and rank checks are in ``_trl_dist``).
- :mod:`snooze.integrations.verl`: ``SnoozeSampler``, a sampler for verl's curriculum-sampler hook,
  plus the pre-filter reward capture for the DAPO loop (extra ``[verl]``).
- :mod:`snooze.integrations.reward_log`: the per-group reward log both adapters write.
"""

__all__: list[str] = []

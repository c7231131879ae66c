"""Adapters that run the scheduler inside other training frameworks.

Each adapter lives in its own module and imports its framework when that module is imported, so
``import snooze`` never needs TRL or verl; the names below are imported on first use:

- :mod:`snooze.integrations.trl`: ``SnoozeGRPOTrainer``, a TRL ``GRPOTrainer`` whose generation step
  draws prompts from the scheduler and trains only on signal groups, on one process or many (extra
  ``[trl]``; its multi-process layout and rank checks are in ``trl._dist``).
  ``SnoozeAsyncGRPOTrainer`` is TRL's ``AsyncGRPOTrainer`` with the scheduler choosing what its rollout
  worker generates and what reaches training.
- :mod:`snooze.integrations.verl`: ``SnoozeTrainer``, verl 0.9's synchronous v1 trainer with its
  prompts drawn from the scheduler and the scheduler's step loop in its replay buffer, registered as
  ``trainer.v1.trainer_mode=snooze`` (extra ``[verl]``).

Both write the per-group reward log of :mod:`snooze.logs`; ``RewardLogger`` writes it for a plain TRL
``GRPOTrainer`` run (a callback and a wrapper of its reward functions, snooze choosing nothing).
"""

from snooze._kit.lazy import lazy

_EXPORTS = {
    **dict.fromkeys(
        ["SnoozeGRPOTrainer", "SnoozeAsyncGRPOTrainer", "SnoozeCheckpointCallback", "RewardLogger"],
        "snooze.integrations.trl",
    ),
    **dict.fromkeys(["SnoozeTrainer"], "snooze.integrations.verl"),
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy(__name__, _EXPORTS)

"""TRL integration: TRL's trainers with their prompts chosen by a :class:`~snooze.Scheduler`.

- :class:`SnoozeGRPOTrainer` (``_trainer``): TRL's ``GRPOTrainer`` whose generation step runs the scheduler's step
  loop (dynamic sampling, filtering, snoozing; one process or many)::

      trainer = SnoozeGRPOTrainer(model=..., reward_funcs=..., args=GRPOConfig(...), train_dataset=ds)
      trainer.train()

  built exactly as ``GRPOTrainer`` is: the scheduler comes from ``train_dataset`` and ``args`` (``_data``), its
  settings from ``snooze_config``.

- :class:`SnoozeAsyncGRPOTrainer` (``_async_trainer``): TRL's ``AsyncGRPOTrainer`` (generation on a vLLM server
  while the trainer trains) whose rollout worker generates the scheduler's prompts (``_async_worker``) and whose
  steps train on the scheduler's batches, under delayed feedback (``_async_run``).

- :func:`keyed_ids` (``_data``): the ids the adapter gives a dataset's rows that have no ``id`` column (what
  ``snooze baseline`` reads such a dataset by).

- :class:`RewardLogger` (``_reward_log``): a plain ``GRPOTrainer`` run's reward log (a callback and a reward
  function wrapper), for ``snooze replay`` on a run snooze did not choose anything in.

The scheduler's metrics go into TRL's logs under ``snooze/`` and its state is saved into every TRL checkpoint
(``checkpoint-N/snooze/``, ``_callbacks``) and restored by ``resume_from_checkpoint``. What the adapter checks
before training (the TRL release, the sizes) is in ``_checks``; the multi-process layout in ``_dist``.
docs/integrations/trl.md has the whole story. The names below import TRL on first use, so the helper modules
(``_data``, ``_dist``) import without it.
"""

from snooze._kit.lazy import lazy

_HERE = "snooze.integrations.trl."
_EXPORTS = {
    **dict.fromkeys(["SnoozeGRPOTrainer", "METRIC_PREFIX", "DIST_PREFIX"], _HERE + "_trainer"),
    **dict.fromkeys(["SnoozeCheckpointCallback", "PoolEpochCallback", "STATE_DIR"], _HERE + "_callbacks"),
    "check_trl": _HERE + "_checks",
    "SnoozeAsyncGRPOTrainer": _HERE + "_async_trainer",
    "RewardLogger": _HERE + "_reward_log",
    "keyed_ids": _HERE + "_data",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy(__name__, _EXPORTS)

"""The reference GRPO trainer: built-in verifiable tasks, a tiny char transformer, a supervised warm-up,
the GRPO update and a training loop that drives :meth:`snooze.Scheduler.step` (torch needed).

Import the pieces from their modules (``snooze.trainer.loop``, ``snooze.trainer.tasks``...); this
package imports nothing heavy on its own.
"""

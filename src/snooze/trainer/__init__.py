"""The reference GRPO trainer: built-in verifiable tasks, a tiny char transformer, a supervised warm-up,
the GRPO update and a training loop that drives :meth:`snooze.Scheduler.step` (torch needed).

The names below are imported on first use, so ``import snooze.trainer`` loads nothing heavy.
"""

from snooze._kit.lazy import lazy

_EXPORTS = {
    **dict.fromkeys(["train", "RunResult", "read_result"], "snooze.trainer.loop"),
    **dict.fromkeys(["TrainConfig", "GRPOConfig"], "snooze.trainer.config"),
    **dict.fromkeys(["grpo_loss"], "snooze.trainer.grpo"),
    **dict.fromkeys(["ModelConfig", "TinyGPT"], "snooze.trainer.model"),
    **dict.fromkeys(["TaskSpec", "parse_tasks", "task_splits", "make_split", "verify"], "snooze.trainer.tasks"),
    **dict.fromkeys(["WarmupConfig", "WarmupResult", "warmup"], "snooze.trainer.warmup"),
    **dict.fromkeys(["accuracy_by_task"], "snooze.trainer.evaluate"),
    **dict.fromkeys(["CharTokenizer"], "snooze.trainer.tokenizer"),
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy(__name__, _EXPORTS)

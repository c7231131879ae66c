"""``RewardLogger``: the reward log of a plain TRL ``GRPOTrainer`` run, written while it trains.

TRL writes per-group rewards to disk only as a sample (``log_completions=True``: the last generation batch every
``logging_steps``, which ``snooze import trl`` reads). Its ``GRPOTrainer`` takes two things a run can add without
changing what it trains: reward functions and callbacks. The logger is both::

    logger = RewardLogger("runs/trl/rewards.jsonl")
    trainer = GRPOTrainer(model=..., reward_funcs=logger.wrap([accuracy, fmt]), args=args,
                          train_dataset=ds, callbacks=[logger])
    trainer.train()

- :meth:`RewardLogger.wrap` returns each reward function wrapped: it calls the function with what TRL
  passes and returns its rewards unchanged (same ``__name__``, so TRL's metrics keep their names; an
  ``async`` function stays ``async``), and hands them to the logger. Once every wrapped function has
  scored a generation batch, the logger weighs them as TRL does (``args.reward_weights``, ``None`` as
  absent: TRL's ``nansum``; a completion no function scored gets the range's low end) and writes one
  line per group: TRL puts each prompt's ``num_generations`` completions next to each other.
- As a callback it reads the run's sizes from ``GRPOConfig`` when training begins and writes the
  log's header (``group_size = num_generations``, ``batch_size = gen_batch_size =
  generation_batch_size / num_generations``, ``policy: grpo``, no dynamic sampling), logs only the
  generations of training steps (TRL scores evaluation batches with the same functions: those are
  left out), cuts the log back to the resumed step when ``train(resume_from_checkpoint=...)``
  resumes, and closes it when training ends.

A prompt's id is the dataset's ``id`` column when it has one, else the key of its prompt
(:func:`snooze.integrations.trl._data.prompt_key`), in dataset ``train``: what ``SnoozeGRPOTrainer``
calls the same rows. The step is TRL's ``global_step`` when the batch was generated. On several
processes every process scores its own rows; the logger gathers them (``accelerate``'s
``gather_object``, in TRL's gathered order) and the main process writes. Reward *models* (``nn.Module``
or a model name in ``reward_funcs``) are refused by :meth:`wrap`: their scores never pass through a
function the logger can wrap.

``AsyncGRPOTrainer`` (``trl.experimental.async_grpo``) is not supported: it scores each group in a
spawned child process and passes its reward functions only the dataset's columns, never the training
step, so a logger there cannot say which step a group belongs to.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from transformers import TrainerCallback

from snooze import ConfigError, IntegrationError
from snooze._kit.checks import check_reward_range
from snooze.integrations._paths import log_path
from snooze.integrations.trl._checks import RANGE, _release
from snooze.integrations.trl._data import DATASET, prompt_key, reward_range_of
from snooze.logs import RewardLogHeader, RewardLogWriter, truncate_log

__all__ = ["RewardLogger", "refuse_logged_funcs"]

log = logging.getLogger(__name__)


class RewardLogger(TrainerCallback):  # type: ignore[misc]
    """Writes a plain ``GRPOTrainer`` run's reward log (module docstring): a callback, and the wrapper of its
    reward functions (:meth:`wrap`).

    ``path``: the reward log to write. ``reward_range``: where the weighted reward sum lies (default: each
    function scoring in ``[0, 1]``, as for ``SnoozeGRPOTrainer``); a reward outside it stops the run with an
    :class:`~snooze.IntegrationError` rather than write a log ``snooze replay`` would refuse.
    """

    def __init__(self, path: str | Path, reward_range: tuple[float, float] | None = None) -> None:
        self.path = log_path(path, "RewardLogger(path)")
        if reward_range is not None:  # checked here, not when training starts (after the model loaded)
            try:
                reward_range = check_reward_range(reward_range, "RewardLogger(reward_range)")
            except ConfigError as exc:
                raise IntegrationError(str(exc)) from None
        self.reward_range = reward_range
        warn_unchecked_version()
        self._funcs = 0
        self._round: dict[int, list[Any]] = {}
        self._writer: RewardLogWriter | None = None
        self._header: RewardLogHeader | None = None
        self._weights: np.ndarray | None = None
        self._training = False  # between on_step_begin and on_step_end: the generations of training steps
        self._step = 0
        self.groups_written = 0

    # -- the reward functions ---------------------------------------------------------------------
    def wrap(self, reward_funcs: Callable[..., Any] | Sequence[Callable[..., Any]]) -> list[Callable[..., Any]]:
        """Each reward function wrapped (in order): it returns what the function returns and reports it here.
        Pass the result as ``reward_funcs``; wrap every function of the run at once."""
        funcs = list(reward_funcs) if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
        if self._funcs:
            raise IntegrationError("RewardLogger.wrap was called already: wrap every reward function in one call")
        if not funcs:
            raise IntegrationError("RewardLogger.wrap: no reward function given")
        for f in funcs:
            if isinstance(f, str) or not callable(f) or _is_module(f):
                raise IntegrationError(
                    f"RewardLogger.wrap: {f!r} is not a reward function; a reward model's scores never pass through a "
                    "function the logger can wrap (score with functions, or log with SnoozeGRPOTrainer's reward_log)"
                )
        self._funcs = len(funcs)
        return [self._wrapped(i, f) for i, f in enumerate(funcs)]

    def _wrapped(self, index: int, func: Callable[..., Any]) -> Callable[..., Any]:
        get_callable_name, is_async_callable = _trl_callable_rules()
        if is_async_callable(func):

            async def scored_async(*args: Any, **kwargs: Any) -> Any:
                out = await func(*args, **kwargs)
                self._scored(index, out, kwargs)
                return out

            wrapper: Callable[..., Any] = scored_async
        else:

            def scored(*args: Any, **kwargs: Any) -> Any:
                out = func(*args, **kwargs)
                self._scored(index, out, kwargs)
                return out

            wrapper = scored
        functools.update_wrapper(wrapper, func, assigned=("__module__", "__qualname__", "__doc__"), updated=())
        wrapper.__name__ = get_callable_name(func)  # TRL names the function's metrics by it
        setattr(wrapper, LOGGED, True)  # SnoozeGRPOTrainer refuses it (refuse_logged_funcs)
        return wrapper

    def _scored(self, index: int, rewards: Any, kwargs: dict[str, Any]) -> None:
        if not self._training:
            return  # an evaluation batch (TRL scores those with the same functions)
        self._round[index] = list(rewards)
        if len(self._round) < self._funcs:
            return
        per_func = np.array(
            [[math.nan if r is None else float(r) for r in self._round[i]] for i in range(self._funcs)],
            dtype=np.float64,
        )  # [funcs, rows]
        self._round = {}
        state = kwargs.get("trainer_state")
        self._step = int(state.global_step) if state is not None else self._step
        self._write_rows(_keys(kwargs), per_func)

    def _write_rows(self, keys: list[Any], per_func: np.ndarray) -> None:
        keys, per_func = _gathered(keys, per_func)
        if self._writer is None:
            return  # not the main process (or training has not begun through this callback)
        header = self._header
        if header is None:  # pragma: no cover - the writer is made with the header
            return
        weights = self._weights if self._weights is not None else np.ones(per_func.shape[0])
        unscorable = np.isnan(per_func).all(axis=0)
        total = np.nansum(per_func * weights[:, None], axis=0)  # [rows]: TRL's weighted sum
        total[unscorable] = header.reward_range[0]
        g = header.group_size
        if total.shape[0] % g:
            raise IntegrationError(f"{total.shape[0]} scored completions are not whole groups of {g}")
        low, high = header.reward_range
        bad = (total < low) | (total > high)
        if bad.any():
            raise IntegrationError(
                f"RewardLogger: a weighted reward of {float(total[bad][0]):g} is outside the reward range [{low:g}, "
                f"{high:g}]; pass RewardLogger(path, reward_range=(low, high)) with the range of your rewards"
            )
        ids = keys[::g]
        self._writer.write(self._step, [DATASET] * len(ids), ids, total.reshape(-1, g))
        self.groups_written += len(ids)

    # -- the callback -----------------------------------------------------------------------------
    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not hasattr(args, "num_generations") or not hasattr(args, "generation_batch_size"):
            raise IntegrationError(
                f"RewardLogger is a callback of TRL's GRPOTrainer (GRPOConfig), not of {type(args).__name__}'s trainer"
            )
        if type(args).__name__ == "AsyncGRPOConfig":
            raise IntegrationError(
                "RewardLogger cannot log an AsyncGRPOTrainer run: it scores groups in a spawned child process and "
                "passes its reward functions no training step"
            )
        if not self._funcs:
            raise IntegrationError(
                "RewardLogger was given as a callback but no reward function went through RewardLogger.wrap: pass "
                "reward_funcs=logger.wrap([...]) to GRPOTrainer"
            )
        G = int(args.num_generations)
        weights = getattr(args, "reward_weights", None)
        self._weights = np.asarray(weights, dtype=np.float64) if weights is not None else None
        if self._weights is not None and self._weights.shape[0] != self._funcs:
            raise IntegrationError(
                f"args.reward_weights has {self._weights.shape[0]} weights for {self._funcs} functions"
            )
        rr = self.reward_range or reward_range_of(
            list(self._weights) if self._weights is not None else [1.0] * self._funcs
        )
        groups = int(args.generation_batch_size) // G
        self._header = RewardLogHeader(
            group_size=G,
            batch_size=groups,
            gen_batch_size=groups,
            max_gen_rounds=1,
            policy="grpo",
            dynamic_sampling=False,
            reward_range=(float(rr[0]), float(rr[1])),
            carry_surplus=False,
            source="trl.RewardLogger",
        )
        if getattr(state, "is_world_process_zero", True):
            resumed = int(state.global_step) > 0
            if resumed:
                dropped = truncate_log(self.path, int(state.global_step))
                log.info("RewardLogger: resumed at step %d, dropped %d line(s) after it", state.global_step, dropped)
            self._writer = RewardLogWriter(self.path, append=resumed, header=self._header)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._training = True

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._training = False
        self._round = {}

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._writer is not None:
            self._writer.sync()  # a checkpoint's steps are on disk before TRL commits it

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


LOGGED = "_snooze_reward_logger"
"""The attribute :meth:`RewardLogger.wrap` sets on each function it returns."""


def refuse_logged_funcs(reward_funcs: Any) -> None:
    """Refuse reward functions wrapped by a :class:`RewardLogger` given to ``SnoozeGRPOTrainer``: the logger's
    header would claim a plain one-round GRPO run of TRL's sizes, which a snooze run is not (its rounds, policy
    and carried groups are its own). ``SnoozeGRPOTrainer(reward_log=...)`` writes the true log."""
    funcs = reward_funcs if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    if any(getattr(f, LOGGED, False) for f in funcs):
        raise IntegrationError(
            "SnoozeGRPOTrainer was given reward functions wrapped by RewardLogger, whose header would claim a plain "
            "one-round GRPO run; pass the functions unwrapped and reward_log='path.jsonl' to SnoozeGRPOTrainer (it "
            "writes the run's own reward log, with its policy, rounds and sizes)"
        )


def warn_unchecked_version() -> None:
    """Warn when TRL's version string is not a release (``main``, a git build): the logger relies on how TRL
    calls reward functions, which is checked against release numbers only."""
    import trl

    if _release(str(getattr(trl, "__version__", ""))) is None:
        log.warning(
            "trl %r: not a version snooze can read, so it is unchecked; RewardLogger is tested with %s",
            getattr(trl, "__version__", None),
            RANGE,
        )


def _is_module(f: Any) -> bool:
    try:
        from torch import nn
    except ImportError:  # pragma: no cover - TRL needs torch
        return False
    return isinstance(f, nn.Module)


def _keys(kwargs: dict[str, Any]) -> list[Any]:
    """Each row's prompt id: the dataset's ``id`` column, else the prompt's key (as ``SnoozeGRPOTrainer``'s)."""
    ids = kwargs.get("id")
    if ids is not None:
        return [i.item() if hasattr(i, "item") else i for i in ids]
    prompts = kwargs.get("prompts")
    if prompts is None:
        raise IntegrationError("TRL passed the reward function no prompts: cannot tell which prompt a group is")
    return [prompt_key(p) for p in prompts]


def _gathered(keys: list[Any], per_func: np.ndarray) -> tuple[list[Any], np.ndarray]:
    """Every process's rows in TRL's gathered order (rank 0's first): one process, as they are."""
    from accelerate import PartialState

    state = PartialState()
    if state.num_processes == 1:
        return keys, per_func
    from accelerate.utils import gather_object

    rows = gather_object([(k, per_func[:, i].tolist()) for i, k in enumerate(keys)])
    return [k for k, _ in rows], np.asarray([r for _, r in rows], dtype=np.float64).T


def _trl_callable_rules() -> tuple[Callable[[Any], str], Callable[[Any], bool]]:
    """TRL's own rules for a reward function: the name its metrics take and whether it is awaited. Releases
    without ``trl.trainer.utils.get_callable_name`` (1.0.0 among them) read ``func.__name__`` and
    ``inspect.iscoroutinefunction(func)``, so the wrapper follows those there."""
    try:
        from trl.trainer.utils import get_callable_name, is_async_callable
    except ImportError:
        return (lambda f: getattr(f, "__name__", type(f).__name__)), inspect.iscoroutinefunction
    return get_callable_name, is_async_callable

"""How :class:`~snooze.integrations.trl.SnoozeGRPOTrainer` builds its scheduler from what ``GRPOTrainer`` takes.

``GRPOTrainer(model=..., reward_funcs=..., args=GRPOConfig(...), train_dataset=ds)`` is all a TRL user
writes, so everything the scheduler needs comes from there (docs/integrations/trl.md, "What the
trainer builds"):

- **Prompts**: the rows of ``train_dataset`` (one dataset, named :data:`DATASET`), each row the
  record TRL's dataloader would have yielded.
- **Ids**: the ``id`` column when there is one (unique, as every snooze id). Otherwise the key of the
  row's prompt, :func:`prompt_key`: the first 16 hex digits of the sha256 of the prompt as canonical
  JSON, the same on every machine, process and run, and unchanged when the dataset is reordered. Rows
  whose prompts are equal share a key; the k-th of them (in dataset order, k >= 2) gets ``key#k``, so
  each row stays its own prompt (TRL rolls each row out), and the number of such rows is logged.
- **Sizes**: ``group_size = num_generations``, ``batch_size = generation_batch_size / num_generations``
  (all processes together), the order ``shuffle = shuffle_dataset``, the seed ``args.seed``.
- **Reward range**: TRL's reward functions declare none. Each is taken to score in ``[0, 1]`` (TRL's
  accuracy and format rewards do), so the weighted sum TRL reports lies in ``(sum of the negative
  weights, sum of the positive ones)``; ``out_of_range="accept"`` records a reward outside it (a
  reward model's, TRL's length penalties) as it is. Signal does not depend on the range; only the
  easy/hard side of a zero-spread group does.

Everything else comes from ``snooze_config``: ``None`` (the defaults: the recommended setting,
``snooze.RECOMMENDED``, as ``SchedulerConfig()`` has it; ``{"policy": "dynamic_sampling"}`` is DAPO), a mapping
of :class:`~snooze.SchedulerConfig` fields (the sizes filled in from ``GRPOConfig``), or a whole
``SchedulerConfig`` (its sizes must then be TRL's; it is used as it is). The asynchronous trainer lays
:data:`NO_SURPLUS` under a mapping: a step there closes the moment its batch is full, so there is no surplus.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from snooze import IntegrationError, Scheduler, SchedulerConfig, Source
from snooze._kit.checks import finite_float, is_int
from snooze._kit.keys import json_key

__all__ = [
    "DATASET",
    "NO_SURPLUS",
    "prompt_key",
    "source_of",
    "scheduler_config",
    "check_same_prompts",
    "refuse_dataset",
    "trl_record",
]

log = logging.getLogger(__name__)

DATASET = "train"
"""The name of the one dataset the trainer's own scheduler holds (``snooze/dataset/train/...`` in the logs)."""

NO_SURPLUS = {"carry_surplus": False}
"""``SnoozeAsyncGRPOTrainer``'s default beside the recommended setting: its step closes the moment the batch is full
(each group is reported on its own), so there is no surplus to carry, and the default runs without the carry, with
nothing for the user to set (a ``carry_surplus=True`` given changes nothing there)."""

SET_BY_TRL = ("batch_size", "group_size", "shuffle")
"""SchedulerConfig fields that follow GRPOConfig (num_generations, generation_batch_size, shuffle_dataset)."""

SYNC_SOURCES = {
    "config": "GRPOConfig",
    "batch_size": "generation_batch_size / num_generations",
    "group_size": "num_generations",
    "shuffle": "shuffle_dataset",
}
"""Where each field of :data:`SET_BY_TRL` comes from, for the error that names it."""


def refuse_dataset(train_dataset: Any) -> None:
    """Refuse what the scheduler cannot hold, before TRL builds anything: no dataset, or a streaming one."""
    if train_dataset is None:
        raise IntegrationError(
            "SnoozeGRPOTrainer needs train_dataset: its rows are the prompts the scheduler picks from (data owned by "
            "an environment_factory, with no train_dataset, is not scheduled); pass a datasets.Dataset"
        )
    if _is_streaming(train_dataset):
        raise IntegrationError(
            "train_dataset is a streaming dataset (IterableDataset). SnoozeGRPOTrainer snoozes and revisits prompts "
            "by id across passes, so it needs every prompt in memory: materialise it, e.g. "
            "datasets.Dataset.from_list(list(stream)) for a finite stream or list(stream.take(n)) for its first n rows "
            "(GRPOTrainer's max_steps then works as usual)"
        )


def _is_streaming(dataset: Any) -> bool:
    try:
        from datasets import IterableDataset
    except ImportError:  # pragma: no cover - TRL needs datasets
        return False
    return isinstance(dataset, IterableDataset)


def prompt_key(prompt: Any, where: str = "a prompt") -> str:
    """The stable key of a prompt (text or conversational): 16 hex digits of the sha256 of its canonical JSON.

    >>> prompt_key("What is 2 + 2?")
    'fb3eb78712d637f5'
    >>> prompt_key([{"role": "user", "content": "hi"}]) == prompt_key([{"content": "hi", "role": "user"}])
    True
    """
    try:
        return json_key(prompt)
    except (TypeError, ValueError) as exc:
        raise IntegrationError(
            f"{where} cannot be keyed ({exc}): without an 'id' column the trainer keys each row by its prompt as "
            "JSON (text or chat messages); add an 'id' column (a unique string or integer per row)"
        ) from None


def _prompts(dataset: Any) -> Sequence[Any]:
    columns = list(getattr(dataset, "column_names", None) or [])
    if "prompt" not in columns:
        raise IntegrationError(
            f"train_dataset has no 'prompt' column (columns: {columns}); TRL's GRPOTrainer needs one"
        )
    return dataset["prompt"]  # type: ignore[no-any-return]


def keyed_ids(prompts: Iterable[Any]) -> tuple[list[str], int]:
    """Each row's id from its prompt (:func:`prompt_key`; the k-th repeat of a prompt gets ``key#k``), and the
    number of rows that repeat an earlier row's prompt.

    >>> ids, repeats = keyed_ids(["a", "b", "a", "a"])
    >>> [i.split("#")[1] if "#" in i else "" for i in ids], repeats
    (['', '', '2', '3'], 2)
    """
    seen: dict[str, int] = {}
    ids = []
    for row, prompt in enumerate(prompts):
        key = prompt_key(prompt, f"the prompt of row {row}")
        seen[key] = seen.get(key, 0) + 1
        ids.append(key if seen[key] == 1 else f"{key}#{seen[key]}")
    return ids, len(ids) - len(seen)


def source_of(train_dataset: Any) -> Source:
    """The scheduler's one dataset: ``train_dataset``'s rows, by its ``id`` column or by :func:`keyed_ids`."""
    prompts = _prompts(train_dataset)
    if "id" in train_dataset.column_names:
        return Source.from_hf(DATASET, train_dataset)
    ids, repeats = keyed_ids(prompts)
    if repeats:
        log.warning(
            "train_dataset has no 'id' column and %d of its %d rows repeat an earlier row's prompt: each row stays its "
            "own prompt, told apart by its place among the copies (<key>#2, <key>#3, ...), so reordering copies of "
            "one prompt swaps their state. Add an 'id' column to name the rows yourself",
            repeats,
            len(ids),
        )
    return Source(DATASET, ids, train_dataset.__getitem__)


def reward_range_of(weights: Sequence[float]) -> tuple[float, float]:
    """The range of TRL's weighted reward sum when every reward function scores in ``[0, 1]``.

    >>> reward_range_of([1.0]), reward_range_of([0.7, 0.3]), reward_range_of([1.0, -0.5])
    ((0.0, 1.0), (0.0, 1.0), (-0.5, 1.0))
    """
    bad = [w for w in weights if finite_float(w) is None]
    low, high = sum(min(w, 0.0) for w in weights), sum(max(w, 0.0) for w in weights)
    if bad or not math.isfinite(high - low):  # NaN gave (0, 1) silently, inf a ConfigError about reward_range
        raise IntegrationError(
            f"GRPOConfig.reward_weights={list(weights)}: every weight must be a finite number, and their sums "
            "finite (the scheduler's reward range is the range of TRL's weighted reward sum)"
        )
    return (float(low), float(high)) if high > low else (0.0, 1.0)


def scheduler_config(
    given: Any,
    trl: Mapping[str, Any],
    reward_range: tuple[float, float],
    sources: Mapping[str, str] = SYNC_SOURCES,
    defaults: Mapping[str, Any] | None = None,
) -> SchedulerConfig:
    """The trainer's SchedulerConfig: ``given`` (None, a mapping of fields, or a SchedulerConfig) with the fields
    TRL sets (``trl``: :data:`SET_BY_TRL` for ``GRPOTrainer``; ``sources`` says where each comes from) equal to
    TRL's. A mapping is laid over the reward range, ``out_of_range="accept"`` and ``defaults``."""
    if isinstance(given, SchedulerConfig):
        _check_set_by_trl({k: getattr(given, k) for k in trl}, trl, sources, "snooze_config=SchedulerConfig(...)")
        return given
    if given is not None and not isinstance(given, Mapping):
        raise IntegrationError(
            f"snooze_config must be a snooze.SchedulerConfig, a mapping of its fields (e.g. {{'policy': 'filter'}}) "
            f"or None, got {type(given).__name__}"
        )
    fields = dict(given or {})
    keys = [k for k in fields if not isinstance(k, str)]
    if keys:  # SchedulerConfig(**{1: 2}) was a TypeError
        raise IntegrationError(f"snooze_config: field names are strings (SchedulerConfig's fields), got {keys}")
    _check_set_by_trl({k: fields[k] for k in trl if k in fields}, trl, sources, "snooze_config")
    base = {"reward_range": reward_range, "out_of_range": "accept", **(defaults or {})}
    return SchedulerConfig(**{**base, **fields, **trl})


def _check_set_by_trl(have: Mapping[str, Any], trl: Mapping[str, Any], sources: Mapping[str, str], what: str) -> None:
    config = sources.get("config", "GRPOConfig")
    clash = [f"{k}={v!r} ({config}: {sources[k]} = {trl[k]!r})" for k, v in have.items() if not _same(v, trl[k])]
    if clash:
        raise IntegrationError(
            f"{what}: {', '.join(clash)}. These follow {config}: set them as above, or leave them out of a mapping "
            "(snooze_config={'policy': ...}) and the trainer fills them in"
        )


def _same(given: Any, trl: Any) -> bool:
    """``given`` is TRL's value as it is: ``True`` is not 1, nor ``4.0`` 4, nor ``1`` True (each was taken)."""
    if isinstance(trl, bool):
        return isinstance(given, bool) and given == trl
    if is_int(trl):
        return is_int(given) and given == trl
    return bool(given == trl)


def check_same_prompts(sched: Scheduler, train_dataset: Any) -> None:
    """Refuse a scheduler whose prompts are not ``train_dataset``'s (as a multiset of prompts, in any order):
    TRL sizes epochs and logs by ``train_dataset``, while the prompts generated are the scheduler's."""
    want = Counter(prompt_key(p, f"the prompt of train_dataset row {i}") for i, p in enumerate(_prompts(train_dataset)))
    have: Counter[str] = Counter()
    first_extra = None
    for src in sched.sources:
        for row in range(len(src)):
            record = trl_record(src.record(row), src.name, src.id_of(row))
            key = prompt_key(record["prompt"], f"prompt {src.name!r}/{src.id_of(row)!r}")
            have[key] += 1
            if first_extra is None and have[key] > want.get(key, 0):
                first_extra = f"{src.name!r}/{src.id_of(row)!r}"
    if have != want:
        extra, missing = sum((have - want).values()), sum((want - have).values())
        raise IntegrationError(
            f"the scheduler's prompts are not train_dataset's: {extra} of its {sum(have.values())} prompts are not in "
            f"train_dataset (the first: {first_extra}), and {missing} of train_dataset's {sum(want.values())} rows are "
            "not in the scheduler. The prompts generated are the scheduler's while TRL counts steps and epochs by "
            "train_dataset: build the scheduler over train_dataset's rows (any order), or leave scheduler= out and "
            "the trainer builds it from train_dataset"
        )


def trl_record(record: Any, dataset: str, id: Any) -> dict[str, Any]:
    """``record`` if TRL can roll it out (a dict with a ``"prompt"``), else an :class:`IntegrationError` naming it."""
    if not isinstance(record, dict) or "prompt" not in record:
        raise IntegrationError(
            f"prompt {dataset!r}/{id!r}: TRL needs each scheduler record to be a dict with a 'prompt' "
            f"field; got {type(record).__name__} with fields {sorted(record) if isinstance(record, dict) else []}"
        )
    return record

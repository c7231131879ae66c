"""TRL's completion logs (``GRPOConfig(log_completions=True)``) as a reward log.

TRL 1.16's ``GRPOTrainer.log`` writes, at every logging step, ``<output_dir>/completions/completions_<NNNNN>.parquet``
(``NNNNN``: ``global_step``, five digits or more) from its ``_logs`` buffers, which hold the last
``generation_batch_size`` rows generated (``trl/trainer/grpo_trainer.py``)::

    step | prompt | completion | <reward function 1> | ... | <log_extra columns> | advantage

one row per completion, each prompt's ``num_generations`` completions next to each other (TRL's
``RepeatSampler``; on several processes, gathered in rank order), a reward function's column holding its score
(``NaN`` where it returned ``None``).

What such a log is, and what the import cannot know (all said in the header's ``caveats`` and the report):

- a **sample**: one generation batch every ``logging_steps`` (each file is overwritten at the next log; the
  batches between logs are gone), so the reward log's steps have gaps and a prompt's encounters are only those
  sampled;
- a group is a run of ``G`` rows; ``G`` (``num_generations``) is not in the file: ``--group-size``, else the
  largest size that splits every file's rows into groups of one prompt each (a prompt met in two adjacent
  groups looks like one group of ``2G`` unless another group shows ``G``);
- the prompt's id is the key ``SnoozeGRPOTrainer`` and ``RewardLogger`` give a row without an ``id`` column
  (16 hex digits of the sha256 of the prompt's canonical JSON), in dataset ``train``: the dataset's own ids
  are not in the file;
- ``reward_weights`` is not in the file: a row's reward is the sum of the reward functions' columns weighted
  by ``--reward-weights`` (default 1 each; ``NaN`` as absent, as TRL sums), or one column (``--reward-field``);
- a run that evaluated writes its evaluation completions through the same buffers (a file of an evaluation
  step may hold them).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from snooze._kit.keys import json_key
from snooze.core.errors import ConfigError, DataError
from snooze.core.source import read_parquet
from snooze.logs._header import RewardLogHeader
from snooze.logs._line_checks import step_problem
from snooze.logs.importers._common import (
    Group,
    ImportOptions,
    ImportReport,
    Rollout,
    build_groups,
    check_filtered,
    plain_grpo_header,
    reward_range,
)
from snooze.logs.importers._fields import checked, name_number, pattern, reward_problem

__all__ = ["read_trl", "COMPLETIONS_FILE", "DATASET", "SAMPLE_CAVEAT"]

COMPLETIONS_FILE = pattern(r"completions_([0-9]+)\.parquet")
"""TRL's name of a logging step's file (matched whole)."""

DATASET = "train"
"""The dataset of every group (the name ``SnoozeGRPOTrainer`` and ``RewardLogger`` give TRL's train rows)."""

SAMPLE_CAVEAT = (
    "a sample: TRL's completion logs keep one generation batch every logging_steps, so the steps between are "
    "missing and each prompt's encounters are only those sampled; prompt ids are keys of the prompt text"
)

_FIXED = ("step", "prompt", "completion", "advantage", "image")


def prompt_key(prompt: Any) -> str:
    """The key ``SnoozeGRPOTrainer`` gives a row without an id: 16 hex digits of the sha256 of the prompt's
    canonical JSON (:func:`snooze._kit.keys.json_key`, which the adapter uses too)."""
    return json_key(prompt)


def _folder(path: Path) -> Path:
    if not path.is_dir():
        raise DataError(f"{path}: no such folder; pass TRL's output_dir or its completions/ folder")
    return path / "completions" if (path / "completions").is_dir() else path


def _files(path: Path, report: ImportReport) -> list[tuple[int, Path]]:
    folder = _folder(path)
    found: dict[int, Path] = {}
    for file in sorted(folder.iterdir()):
        m = COMPLETIONS_FILE.fullmatch(file.name)
        if not m or not file.is_file():
            report.files_ignored.append(file.name)
            continue
        step = name_number(m.group(1), str(file), "the file's step")
        if step in found:
            raise DataError(f"{folder}: {found[step].name} and {file.name} are both step {step}'s file")
        found[step] = file
    if not found:
        raise DataError(
            f"{folder}: no completions_<step>.parquet file: TRL writes them into <output_dir>/completions/ with "
            "GRPOConfig(log_completions=True)"
        )
    return sorted(found.items())


def _table(file: Path) -> dict[str, list[Any]]:
    try:
        return read_parquet(file).to_pydict()  # type: ignore[no-any-return]
    except (OSError, ValueError) as exc:  # pyarrow's errors derive from these
        raise DataError(f"{file}: not a Parquet file pyarrow can read ({exc})") from None


def _reward_columns(table: dict[str, list[Any]], file: Path, reward_field: str | None) -> list[str]:
    """The columns summed as each row's reward: ``reward_field``, else every column of numbers but TRL's own."""
    if reward_field is not None:
        if reward_field not in table:
            raise DataError(f"{file}: no column {reward_field!r} (--reward-field); its columns are {sorted(table)}")
        return [reward_field]
    found = [
        name
        for name, values in table.items()
        if name not in _FIXED and values and all(v is None or reward_problem(v) is None for v in values)
    ]
    if not found:
        raise DataError(f"{file}: no reward function's column (columns: {sorted(table)}); pass --reward-field")
    return found


def _reward(row: list[Any], at: str, names: list[str], weights: list[float]) -> float | None:
    """TRL's weighted sum of the row's scores (``None`` and ``NaN`` as absent: ``nansum``); ``None``: none scored."""
    total, scored = 0.0, False
    for name, value, weight in zip(names, row, weights, strict=True):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        checked(value, reward_problem, at, name)
        total, scored = total + weight * float(value), True
    return total if scored else None


def _size(files: list[tuple[int, list[str]]], given: int | None) -> int:
    """``G``: ``given``, else the largest size that cuts every file's keys into runs of one prompt."""
    if given is not None:
        return given
    runs: list[int] = []
    for _, keys in files:
        n = 1
        for a, b in zip(keys, keys[1:], strict=False):
            if a == b:
                n += 1
            else:
                runs.append(n)
                n = 1
        runs.append(n)
    return math.gcd(*runs)


def _rows(
    files: list[tuple[int, Path]], report: ImportReport, opts: ImportOptions, weights: list[float] | None
) -> tuple[Iterator[Rollout], list[str], int]:
    read: list[tuple[int, Path, list[str], list[float | None]]] = []
    names: list[str] = []
    seen: set[str] = set()
    for step, file in files:
        report.files_read.append(file.name)
        table = _table(file)
        seen.update(table)
        if "prompt" not in table:
            raise DataError(f"{file}: no 'prompt' column; is this a TRL completions file?")
        cols = _reward_columns(table, file, opts.reward_field)
        if names and cols != names:
            raise DataError(f"{file}: reward columns {cols}, where the files before have {names}")
        names = cols
        if weights is not None and len(weights) != len(cols):
            raise ConfigError(f"--reward-weights: {len(weights)} weights for the reward columns {cols}")
        w = weights if weights is not None else [1.0] * len(cols)
        for i, s in enumerate(table.get("step", [])):
            if s != step:
                raise DataError(f"{file}, row {i}, field 'step': {s!r}, but the file is step {step}'s")
        keys = [_key(p, f"{file}, row {i}") for i, p in enumerate(table["prompt"])]
        rows = list(zip(*(table[c] for c in cols), strict=True))
        read.append((step, file, keys, [_reward(list(r), f"{file}, row {i}", cols, w) for i, r in enumerate(rows)]))
    size = _size([(s, k) for s, _, k, _ in read], opts.group_size)
    if size < 2:
        raise DataError(
            f"{report.source}: the files' rows do not split into groups of one prompt each (a group size of "
            f"{size}); pass --group-size (the run's num_generations)"
        )
    report.fields_not_read = sorted(seen - {"step", "prompt", *names})
    return _rollouts(read, size), names, size


def _rollouts(read: list[tuple[int, Path, list[str], list[float | None]]], size: int) -> Iterator[Rollout]:
    for step, file, keys, rewards in read:
        if len(keys) % size:
            raise DataError(f"{file}: {len(keys)} rows are not whole groups of {size} (--group-size?)")
        for g in range(0, len(keys), size):
            if len(set(keys[g : g + size])) > 1:
                raise DataError(
                    f"{file}, rows {g}..{g + size - 1}: a group of {size} holds more than one prompt; pass "
                    "--group-size (the run's num_generations)"
                )
            for i in range(g, g + size):
                yield Rollout(step, DATASET, keys[i], g // size, rewards[i], f"{file}, row {i}")


def _key(prompt: Any, at: str) -> str:
    if not isinstance(prompt, str | list) or not prompt:
        raise DataError(f"{at}, field 'prompt': {type(prompt).__name__}, not a prompt (text or chat messages)")
    try:
        return prompt_key(prompt)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{at}, field 'prompt': cannot be keyed ({exc})") from None


def read_trl(
    path: str | Path, opts: ImportOptions | None = None, reward_weights: list[float] | None = None
) -> tuple[list[Group], RewardLogHeader, ImportReport]:
    """The groups of TRL's completion logs under ``path`` (its ``output_dir`` or ``completions/`` folder), the
    header of their reward log (with what the import cannot know in its ``caveats``) and the report.
    ``reward_weights``: the run's ``GRPOConfig.reward_weights`` (one per reward column; ``None``: 1 each)."""
    opts = opts or ImportOptions()
    path = Path(path)
    report = ImportReport(source=f"TRL completion logs {path}", keyed_by="prompt text (TRL writes no id)")
    files = _files(path, report)
    for step, file in files:
        if step_problem(step) is not None:  # pragma: no cover - name_number keeps steps within int64
            raise DataError(f"{file}: the file's step, {step_problem(step)}")
    if opts.reward_field is not None and reward_weights is not None:
        raise ConfigError("--reward-weights weighs the sum of every reward column; --reward-field takes one column")
    rollouts, names, _ = _rows(files, report, opts, reward_weights)
    groups = build_groups(list(rollouts), opts, report, sample=True)
    rr = reward_range(groups, opts.reward_range, report.source)
    caveats = [*check_filtered(groups, rr, opts, report), SAMPLE_CAVEAT]
    if opts.reward_field is None and len(names) > 1 and reward_weights is None:
        caveats.append(
            f"each reward is the sum of the columns {names} with weights 1: TRL's GRPOConfig.reward_weights are not "
            "in its completion logs (pass the run's --reward-weights, or --reward-field to take one function's column)"
        )
    if reward_weights is not None:
        caveats.append(f"each reward is the sum of the columns {names} weighted {reward_weights} (--reward-weights)")
    caveats.append("a file of a step that also evaluated may hold evaluation completions (TRL logs both alike)")
    report.notes += [f"note: {c}" for c in caveats]
    field = opts.reward_field if opts.reward_field is not None else "+".join(names)
    header = plain_grpo_header(groups, report, rr, "snooze import trl", field, caveats)
    return groups, header, report

"""verl's rollout dump (``trainer.rollout_data_dir``) as a reward log.

verl 0.9 writes one file per training step, ``<rollout_data_dir>/<global_step>.jsonl``, one line per
rollout of the step's trained batch (``_write_generations`` in ``verl/trainer/ppo/ray_trainer.py`` and
``verl/trainer/ppo/v1/trainer_base.py``)::

    {"input": "<the prompt, decoded>", "output": "<the response>", "gts": "<ground truth>", "score": 1.0,
     "step": 3, "uid": "<uuid>_<rollout>_<output>", ...}

``score`` is the rollout's reward (the sum of its token-level scores); ``step`` is verl's ``global_steps``
(from 1); the v1 trainer adds ``uid`` (``{uid}_{session}_{index}``: the group's uid, the rollout within the
group, the output of a multi-output agent loop), the legacy trainer the reward function's extra fields (a
field holding one value per rollout). verl draws the ``uid`` afresh for every prompt of every step, so it
tells a step's groups apart but never the same prompt at two steps: a prompt is keyed by its text
(``input``), or by a field the reward function dumps (``id_field``, e.g. the dataset's index), and its
dataset by ``dataset_field`` (``data_source`` when the rows have it) or ``dataset``.

A group is a ``uid``'s rollouts (the last output of each session, as verl's own metrics take it); without
``uid``, the rollouts of one prompt text in a step, in file order (the text's k-th ``n`` rows are its k-th
group, when a batch holds a prompt twice).

verl dumps the batch it trained on. Without DAPO's filter that is every group generated; with the filter
on (``algorithm.filter_groups.enable=True``) it is only the groups kept, which :func:`check_filtered`
refuses: such a dump is usable only for runs without the filter. The run is a plain GRPO run (one round
a step, every group trained): the header says ``policy: grpo``, ``dynamic_sampling: false``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from snooze._kit.checks import is_int
from snooze.core.errors import ConfigError, DataError
from snooze.logs._header import RewardLogHeader
from snooze.logs._line_checks import dataset_problem, id_problem, step_problem
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
from snooze.logs.importers._fields import checked, name_number, pattern, reward_value
from snooze.logs.importers._jsonl import objects, where

__all__ = ["read_verl", "STEP_FILE", "REWARD_FIELD"]

STEP_FILE = pattern(r"([0-9]+)\.jsonl")
"""verl's name of a step's dump file: ``<global_step>.jsonl``."""

REWARD_FIELD = "score"
"""The field read as each rollout's reward unless ``--reward-field`` names another (verl's older trainer's
``acc``, any numeric field the reward function dumps)."""

_USED = {"input", "step", "uid"}
_UID = pattern(r"(.*)_([0-9]+)_([0-9]+)")  # v1: {uid}_{session}_{index}; matched whole (fullmatch)


def _files(folder: Path, report: ImportReport) -> list[tuple[int, Path]]:
    if not folder.exists():
        raise DataError(f"{folder}: no such folder (pass verl's trainer.rollout_data_dir)")
    if not folder.is_dir():
        raise DataError(f"{folder}: not a folder; pass verl's trainer.rollout_data_dir (it holds <step>.jsonl files)")
    found: dict[int, Path] = {}
    for path in sorted(folder.iterdir()):
        m = STEP_FILE.fullmatch(path.name)
        if not m or not path.is_file():
            report.files_ignored.append(path.name)
            continue
        step = name_number(m.group(1), str(path), "the file's step")
        what = step_problem(step)
        if what is not None:
            raise DataError(f"{path}: the file's step, {what}; verl names a step's file <global_step>.jsonl")
        if step in found:
            raise DataError(
                f"{folder}: {found[step].name} and {path.name} are both step {step}'s file: two dumps in one folder? "
                "Keep the one verl wrote for this run (the other's rollouts would be read twice or lost)"
            )
        found[step] = path
    if not found:
        raise DataError(
            f"{folder}: no verl rollout dump here (an empty folder, or no <step>.jsonl file): verl writes one file "
            "per step into trainer.rollout_data_dir"
        )
    return sorted(found.items())


def _value(obj: dict[str, Any], name: str, at: str, kind: str) -> Any:
    if name not in obj:
        raise DataError(f"{at}, field {name!r}: missing; every line of a verl dump has {kind}")
    return obj[name]


def _key(obj: dict[str, Any], at: str, id_field: str | None) -> str | int:
    if id_field is None:
        text = _value(obj, "input", at, "the prompt ('input')")
        if not isinstance(text, str):
            raise DataError(f"{at}, field 'input': {type(text).__name__}, not the prompt's text")
        return checked(text, id_problem, at, "input")
    pid = _value(obj, id_field, at, f"the id field {id_field!r} (--id-field)")
    return checked(pid, id_problem, at, id_field)


def _group(obj: dict[str, Any], at: str) -> tuple[Any, tuple[str, int] | None]:
    """The row's group key and its uid's ``(session, output index)`` (``None``: a uid without them, or none)."""
    uid = obj.get("uid")
    if uid is None:
        return None, None
    checked(uid, id_problem, at, "uid")  # a list or an object is refused here, not hashed below
    m = _UID.fullmatch(uid) if isinstance(uid, str) else None
    if m is None:
        return uid, None
    return m.group(1), (m.group(2), name_number(m.group(3), f"{at}, field 'uid'", "the output index"))


def _rows(
    files: list[tuple[int, Path]],
    report: ImportReport,
    dataset: str,
    dataset_field: str,
    id_field: str | None,
    reward_field: str,
) -> Iterator[tuple[Rollout, Any]]:
    """Each line as a rollout, with its uid's ``(session, index)`` (``None`` without uid)."""
    seen: set[str] = set()
    for step, path in files:
        report.files_read.append(path.name)
        if path.stat().st_size == 0:
            raise DataError(
                f"{path}: empty, where verl writes every rollout of step {step}: the run was killed while dumping "
                "it? Remove the file to import the steps before it"
            )
        for number, obj in objects(path):
            at = where(path, number)
            seen.update(obj)
            score = _value(obj, reward_field, at, f"the rollout's reward ({reward_field!r})")
            reward = reward_value(score, at, reward_field) if score is not None else None
            if "step" in obj and (not is_int(obj["step"]) or obj["step"] != step):
                raise DataError(f"{at}, field 'step': {obj['step']!r}, but the file is step {step}'s ({path.name})")
            name = checked(obj[dataset_field], dataset_problem, at, dataset_field) if dataset_field in obj else dataset
            pid = _key(obj, at, id_field)
            group, session = _group(obj, at)
            yield Rollout(step, name, pid, group, reward, at), session
    report.fields_not_read = sorted(seen - _USED - {dataset_field, id_field or "input", reward_field})


def _sessions(rows: list[tuple[Rollout, Any]]) -> list[Rollout]:
    """One rollout per (group, session): the last output of a multi-output session (verl's rule)."""
    best: dict[tuple[Any, ...], tuple[int, Rollout]] = {}
    for r, session in rows:
        key = (r.step, r.group, session[0] if session else id(r))
        index = session[1] if session else 0
        if key in best and index == best[key][0]:
            raise DataError(
                f"{r.where}, field 'uid': {r.group}_{session[0]}_{index} names the rollout of {best[key][1].where} "
                f"too (prompts {best[key][1].id!r} and {r.id!r}): one uid for two rollouts would lose one. verl "
                "draws a uid per prompt; is this dump edited or two dumps joined? A multi-output agent loop must "
                "write each output's index in its uid ({uid}_{session}_{index}, as verl's v1 trainer does): snooze "
                "then takes each session's last output, as verl's metrics do"
            )
        if key not in best or index > best[key][0]:
            best[key] = (index, r)
    return [r for _, r in best.values()]


def _by_text(rows: list[tuple[Rollout, Any]], opts: ImportOptions) -> list[Rollout]:
    """Without uid: a prompt's rollouts in a step, its k-th ``G`` rows its k-th group (G: the option, else the
    most common number of rows a prompt has in a step; a prompt with more rows than that is then an error, as
    it may be a second group size or the prompt twice in a batch, which only the option can tell apart)."""
    if not rows:
        return []
    counts = Counter((r.step, r.dataset, r.id) for r, _ in rows)
    size = opts.group_size or Counter(counts.values()).most_common(1)[0][0]
    over = next((k for k, n in counts.items() if n > size), None)
    if over is not None and opts.group_size is None:
        at = next(r.where for r, _ in rows if (r.step, r.dataset, r.id) == over)
        raise DataError(
            f"{at}: prompt {over[2]!r} has {counts[over]} rollouts at step {over[0]} where most prompts have {size}: "
            "the dump mixes group sizes, or the batch held the prompt twice. Pass --group-size (verl's "
            "actor_rollout_ref.rollout.n) to split a prompt's rollouts into groups of that size"
        )
    seen: Counter[tuple[Any, ...]] = Counter()
    out = []
    for r, _ in rows:
        key = (r.step, r.dataset, r.id)
        out.append(Rollout(r.step, r.dataset, r.id, (r.dataset, r.id, seen[key] // size), r.reward, r.where))
        seen[key] += 1
    return out


def read_verl(
    folder: str | Path,
    opts: ImportOptions | None = None,
    dataset: str = "verl",
    dataset_field: str = "data_source",
    id_field: str | None = None,
) -> tuple[list[Group], RewardLogHeader, ImportReport]:
    """The groups of verl's rollout dump in ``folder``, the header of their reward log, and the report.

    ``dataset``: the dataset name of rows without ``dataset_field``. ``id_field``: the field holding each
    prompt's id (``None``: the prompt text, ``input``). Every problem is a :class:`~snooze.DataError` naming
    the file, the line and the field."""
    opts = opts or ImportOptions()
    what = dataset_problem(dataset)
    if what is not None:
        raise ConfigError(f"--dataset: {what} (the dataset of the rows without {dataset_field!r})")
    folder = Path(folder)
    report = ImportReport(
        source=f"verl rollout dump {folder}", keyed_by=f"field {id_field!r}" if id_field else "prompt text"
    )
    reward_field = opts.reward_field or REWARD_FIELD
    rows = list(_rows(_files(folder, report), report, dataset, dataset_field, id_field, reward_field))
    with_uid = any(session is not None or r.group is not None for r, session in rows)
    rollouts = _sessions(rows) if with_uid else _by_text(rows, opts)
    groups = build_groups(rollouts, opts, report)
    rr = reward_range(groups, opts.reward_range, report.source)
    caveats = check_filtered(groups, rr, opts, report)
    header = plain_grpo_header(groups, report, rr, "snooze import verl", reward_field, caveats)
    return groups, header, report

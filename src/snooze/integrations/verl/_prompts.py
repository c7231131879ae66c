"""Prompt identity in verl data, and the dataloader that yields only what the scheduler proposes.

A verl prompt's stable id is ``(data_source, extra_info["index"])``. verl itself falls back to index
0 when ``extra_info.index`` is missing (``RLHFDataset.__getitem__``), which would make every such
prompt the same prompt; here a missing index is an error that names the row.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sized
from typing import Any

import numpy as np

from snooze import Candidate, IntegrationError, Source, StateError
from snooze._kit.record import Record

__all__ = ["prompt_keys", "PromptIndex", "SnoozePromptLoader", "OnePromptLoader", "LOADER_FORMAT"]

LOADER_FORMAT = "snooze.verl.prompts"  # what verl's data.pt holds for the snooze trainer
ROLLOUT_N = "__rollout_n__"
"""verl's per-prompt ``rollout.n``: ``AgentLoopWorkerTQ._run_prompt`` pops it from the row and rolls the prompt
out that many times (sessions ``0 .. n-1``), else ``actor_rollout_ref.rollout.n``."""


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _table(frame: Any, columns: list[str]) -> Any:
    """The rows of ``frame`` (an HF ``datasets.Dataset``) that verl trains on, as an Arrow table of ``columns``.

    ``.filter`` (``data.filter_overlong_prompts``) and ``.select`` (``data.train_max_samples``) keep the
    whole Arrow table and an indices mapping, so ``frame.data.table`` still holds the rows verl dropped,
    in the file's order; the Arrow formatter applies the mapping (and reads only ``columns``)."""
    return frame.select_columns(columns).with_format("arrow")[:]


def _columns(dataset: Sized) -> tuple[list[Any], list[Any]]:
    """``data_source`` and ``extra_info.index`` of every row verl's dataset holds, in its order: read as an
    Arrow table when there is one (verl's ``RLHFDataset.dataframe``), so nothing is tokenised and no row
    dict is built."""
    frame = getattr(dataset, "dataframe", None)
    names = list(getattr(frame, "column_names", None) or [])
    if "data_source" in names and hasattr(frame, "select_columns") and len(frame) == len(dataset):
        table = _table(frame, [c for c in ("data_source", "extra_info") if c in names])
        sources = table.column("data_source").to_pylist()
        if "extra_info" not in table.column_names:
            return sources, [None] * len(sources)
        extra = table.column("extra_info").combine_chunks()
        fields = (
            [extra.type.field(i).name for i in range(extra.type.num_fields)] if hasattr(extra.type, "field") else []
        )
        if "index" not in fields:
            return sources, [None] * len(sources)
        return sources, extra.field("index").to_pylist()
    rows = [dataset[i] for i in range(len(dataset))]  # type: ignore[index]  # a custom dataset class
    extras = [r.get("extra_info") for r in rows]
    return [r.get("data_source") for r in rows], [e.get("index") if isinstance(e, Mapping) else None for e in extras]


def prompt_keys(dataset: Sized) -> list[tuple[str, Any]]:
    """Each row's stable identity ``(data_source, extra_info["index"])``, in dataset order."""
    sources, indices = _columns(dataset)
    keys = []
    for pos, (name, index) in enumerate(zip(sources, indices)):
        if not isinstance(name, str) or not name:
            raise IntegrationError(f"row {pos}: 'data_source' is {name!r}; every row needs a dataset name there")
        if index is None:
            raise IntegrationError(
                f"row {pos} ({name!r}): extra_info has no 'index'. verl would silently use 0 and merge prompts; "
                "snooze needs a stable id per prompt. "
                "Add extra_info={'index': <unique id>} to every row of the parquet."
            )
        keys.append((name, _plain(index)))
    return keys


class PromptIndex:
    """The scheduler's datasets (one per ``data_source``) and where each of their rows sits in verl's dataset."""

    def __init__(self, keys: list[tuple[str, Any]]) -> None:
        names = list(dict.fromkeys(name for name, _ in keys))
        owner = np.array([names.index(n) for n, _ in keys], dtype=np.int64) if keys else np.empty(0, np.int64)
        self.positions = [np.flatnonzero(owner == d) for d in range(len(names))]  # dataset -> verl positions
        self.sources = {
            n: Source.from_ids(n, [keys[i][1] for i in pos.tolist()]) for n, pos in zip(names, self.positions)
        }
        self.names = names
        self.n_rows = len(keys)

    def row_counts(self) -> dict[str, float]:
        return {n: float(len(p)) for n, p in zip(self.names, self.positions)}

    def position(self, cand: Candidate) -> int:
        return int(self.positions[self.names.index(cand.dataset)][cand.row])


class SnoozePromptLoader:
    """Stands in for verl's ``train_dataloader``: each batch is one generation round the scheduler proposed.

    verl's own ``_fetch_one_gen_batch`` draws from it unchanged (and gives each prompt its ``uid``),
    so snoozed and retired prompts never reach the rollout workers. ``state_dict`` is what verl writes
    to ``data.pt``: a format tag, the scheduler step and the folder (beside ``data.pt``) that holds the
    scheduler's own state, which is saved pickle-free by the trainer.
    """

    def __init__(self, run: Any, dataset: Any, collate_fn: Any, state_dir: str) -> None:
        self.run = run
        self.dataset = dataset
        self.collate_fn = collate_fn
        self.state_dir = state_dir
        self.loaded: dict[str, Any] | None = None  # what load_state_dict received (checked on resume)

    def __len__(self) -> int:
        return len(self.dataset)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:  # never StopIteration: verl would restart the iterator and ask again
            cands = self.run.propose_round()
            rows = [self.dataset[self.run.index.position(c)] for c in cands]
            if self.run.screening:  # partial groups: each row asks for its candidate's n rollouts (a screen's k, a
                rows = [{**row, ROLLOUT_N: int(c.n)} for row, c in zip(rows, cands)]  # rest's G - k)
            yield self.collate_fn(rows)

    def state_dict(self) -> dict[str, Any]:
        return {
            "format": LOADER_FORMAT,
            "version": 1,
            "step": self.run.scheduler.step_index,
            "state_dir": self.state_dir,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping) or state.get("format") != LOADER_FORMAT:
            what = sorted(state) if isinstance(state, Mapping) else type(state).__name__
            raise StateError(
                f"data.pt holds {what}, not the snooze trainer's prompt state: this checkpoint was written by "
                "another verl trainer mode. Resume it with that mode, or start fresh (trainer.resume_mode=disable)."
            )
        self.loaded = dict(state)


def check_loader_state(state: Mapping[str, Any], path: Any, global_step: int, state_dir: str) -> None:
    """What ``data.pt`` (``path``, loaded by verl) holds for the snooze trainer, checked field by field: the
    format, ``version`` 1, ``step`` the integer verl resumes at (not ``true``, not ``2.0``) and ``state_dir``;
    else a :class:`StateError` naming the file."""
    fix = "the checkpoint is damaged: resume an earlier one, or start fresh (trainer.resume_mode=disable)"
    record = Record(dict(state), str(path), StateError, fix)
    if record.integer("version") != 1:
        raise record.fail("version", f"{record.raw('version')} is not a version this snooze reads (1)")
    step = record.integer("step")
    if step != global_step:
        raise record.fail("step", f"{step}, but verl resumes the checkpoint of step {global_step}")
    if record.text("state_dir") != state_dir:
        raise record.fail("state_dir", f"{record.raw('state_dir')!r}, but the snooze trainer saves into {state_dir!r}")


class OnePromptLoader(SnoozePromptLoader):
    """The async modes' loader: verl fetches one prompt at a time (it sets ``data.gen_batch_size=1`` for exact
    refills); each is the next one the scheduler drew (``SnoozeRun.draw``, a round per verl submission)."""

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:
            cand = self.run.next_queued()
            yield self.collate_fn([self.dataset[self.run.index.position(cand)]])

"""verl integration: a curriculum sampler that skips snoozed prompts before generation.

verl 0.7.1 builds its training dataloader with a user sampler when ``data.sampler.class_path`` is set
(``create_rl_sampler``), and calls ``sampler.update(batch)`` after every training step when the sampler
is an ``AbstractCurriculumSampler`` (``RayPPOTrainer.fit``). :class:`SnoozeSampler` is that sampler:

- ``__iter__`` yields dataset positions of the candidates the scheduler proposes, one generation
  batch at a time: snoozed and retired prompts are skipped before any rollout.
- :meth:`SnoozeSampler.observe` reports each group's rewards, keyed by the prompt's stable id
  ``(data_source, extra_info["index"])``. The DAPO recipe drops zero-variance groups *before* any
  sampler hook runs, so a snoozing sampler would never learn which prompts are too easy; call
  ``observe(new_batch)`` right after scoring, before the filter (two lines, ``docs/integrations/verl.md``).
- :meth:`SnoozeSampler.update` (verl's hook) observes whatever was not observed yet and closes the step.
- ``state_dict``/``load_state_dict`` ride on verl's dataloader checkpoint (``data.pt`` holds only a
  step number and a folder); the scheduler's own state is written, pickle-free, to ``state_dir``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sized
from pathlib import Path
from typing import Any

import numpy as np

from snooze.core.checkpoint import load_state
from snooze.core.config import SchedulerConfig
from snooze.core.errors import IntegrationError, StateError
from snooze.core.scheduler import Scheduler
from snooze.core.types import Candidate
from snooze.data.source import Source
from snooze.integrations.reward_log import RewardLogWriter, truncate_reward_log, write_groups

try:
    from verl import DataProto
    from verl.experimental.dataset.sampler import AbstractCurriculumSampler
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise IntegrationError(
        f"snooze.integrations.verl needs verl 0.7.1 ({exc}); see docs/integrations/verl.md for the install line"
    ) from exc

__all__ = ["SnoozeSampler", "prompt_keys", "STATE_FORMAT"]

log = logging.getLogger(__name__)

STATE_FORMAT = "snooze.verl.sampler"
_OWN_OPTIONS = ("seed", "state_dir", "reward_log")  # sampler options that are not SchedulerConfig fields


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _rows(data_source: Sized) -> tuple[list[Any], list[Any]]:
    """``data_source`` and ``extra_info`` of every row, without tokenising (verl's ``RLHFDataset.dataframe``)."""
    frame = getattr(data_source, "dataframe", None)
    if frame is not None and "data_source" in frame.column_names:
        extra = frame["extra_info"] if "extra_info" in frame.column_names else [None] * len(frame)
        return list(frame["data_source"]), list(extra)
    items = [data_source[i] for i in range(len(data_source))]  # type: ignore[index]
    return [it.get("data_source") for it in items], [it.get("extra_info") for it in items]


def prompt_keys(data_source: Sized) -> list[tuple[str, Any]]:
    """Each row's stable identity ``(data_source, extra_info["index"])``, in dataset order.

    verl itself falls back to index 0 when ``extra_info.index`` is missing, which would make every such
    prompt the same prompt; here a missing index is an error.
    """
    sources, extras = _rows(data_source)
    keys = []
    for pos, (name, extra) in enumerate(zip(sources, extras)):
        if not isinstance(name, str) or not name:
            raise IntegrationError(f"row {pos}: 'data_source' is {name!r}; every row needs a dataset name there")
        if not isinstance(extra, Mapping) or extra.get("index") is None:
            raise IntegrationError(
                f"row {pos} ({name!r}): extra_info has no 'index'. verl would silently use 0 and merge prompts; "
                "snooze needs a stable id per prompt. Add extra_info={'index': <unique id>} to every row of the parquet."
            )
        keys.append((name, _plain(extra["index"])))
    return keys


def _root_select(node: Any, key: str) -> Any:
    """``key`` from the root of the Hydra config ``node`` belongs to (None when not found)."""
    try:
        from omegaconf import OmegaConf

        root = node._get_root() if hasattr(node, "_get_root") else node
        return OmegaConf.select(root, key, default=None)
    except Exception:  # a plain dict config, or an interpolation that cannot resolve here
        return None


def _get(node: Any, key: str, default: Any = None) -> Any:
    if node is None:
        return default
    value = node.get(key, default) if hasattr(node, "get") else getattr(node, key, default)
    return default if value is None else value


class SnoozeSampler(AbstractCurriculumSampler):  # type: ignore[misc]
    """verl curriculum sampler backed by a :class:`~snooze.Scheduler`.

    Options come from ``data.sampler.snooze`` (any :class:`~snooze.SchedulerConfig` field, plus
    ``seed``, ``state_dir`` and ``reward_log``). ``batch_size`` defaults to ``data.train_batch_size``,
    ``gen_batch_size`` to ``data.gen_batch_size`` (DAPO) and ``group_size`` to
    ``actor_rollout_ref.rollout.n``, ``weights`` to each ``data_source``'s row count (as verl's own
    uniform sampling over rows). Needs ``data.dataloader_num_workers=0`` (verl checks it).
    """

    def __init__(self, data_source: Sized, data_config: Any) -> None:
        opts = dict(_get(_get(data_config, "sampler"), "snooze", {}) or {})
        keys = prompt_keys(data_source)
        names = list(dict.fromkeys(name for name, _ in keys))
        self.positions: dict[str, np.ndarray] = {}  # dataset -> verl dataset position of each scheduler row
        datasets = {}
        for name in names:
            pos = np.array([i for i, (n, _) in enumerate(keys) if n == name], dtype=np.int64)
            self.positions[name] = pos
            datasets[name] = Source.from_ids(name, [keys[i][1] for i in pos.tolist()])
        if opts.get("weights") is None:  # verl samples rows uniformly: weigh each data_source by its size
            opts["weights"] = {name: float(len(pos)) for name, pos in self.positions.items()}
        self.scheduler = Scheduler(datasets, self._config(opts, data_config), seed=int(_get(opts, "seed", 0)))
        self.n_rows = len(keys)
        self.state_dir = Path(_get(opts, "state_dir", None) or self._default_state_dir(data_config))
        self._log_path = Path(opts["reward_log"]) if opts.get("reward_log") else None
        self._log: RewardLogWriter | None = None
        self._open: dict[tuple[str, Any], list[Candidate]] = {}  # issued, not yet observed
        self._save_at_update = False
        self.last_metrics: dict[str, float] = {}

    @staticmethod
    def _config(opts: Mapping[str, Any], data_config: Any) -> SchedulerConfig:
        fields = {k: v for k, v in opts.items() if k not in _OWN_OPTIONS}
        fields.setdefault("batch_size", int(_get(data_config, "train_batch_size", 0)) or None)
        gen = _get(data_config, "gen_batch_size", None)
        if gen is not None and "gen_batch_size" not in opts:
            fields["gen_batch_size"] = int(gen)
        if "group_size" not in fields:
            n = _root_select(data_config, "actor_rollout_ref.rollout.n")
            if n is None:
                raise IntegrationError(
                    "cannot read actor_rollout_ref.rollout.n; set data.sampler.snooze.group_size to the rollouts per prompt"
                )
            fields["group_size"] = int(n)
        if fields["batch_size"] is None:
            raise IntegrationError("set data.train_batch_size (or data.sampler.snooze.batch_size)")
        for k in ("reward_range", "weights"):
            if k in fields and fields[k] is not None:
                fields[k] = tuple(fields[k]) if k == "reward_range" else dict(fields[k])
        return SchedulerConfig(**fields)

    @staticmethod
    def _default_state_dir(data_config: Any) -> str:
        base = _root_select(data_config, "trainer.default_local_dir")
        return str(Path(base) / "snooze") if base else "snooze_state"

    # -- sampling -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.n_rows

    def __iter__(self) -> Any:
        """Positions of proposed prompts: at most one dataset's worth per verl epoch."""
        yielded = 0
        while yielded < self.n_rows and not self.scheduler.exhausted:
            cands = self.scheduler.propose()
            if not cands:
                return
            for c in cands:
                self._open.setdefault(c.key, []).append(c)
                yield int(self.positions[c.dataset][c.row])
                yielded += 1

    # -- rewards --------------------------------------------------------------------------------
    def observe(self, batch: DataProto) -> int:
        """Report the groups of ``batch`` (scored, before any filtering) that this sampler issued.

        Groups are the rollouts that share a ``uid``; the reward of a rollout is the sum of its
        ``token_level_scores`` (``token_level_rewards`` if absent). Groups already observed, or not
        issued by this sampler (validation batches), are ignored. Returns how many were reported.
        """
        nt = batch.non_tensor_batch
        missing = [k for k in ("uid", "data_source", "index") if k not in nt]
        if missing:
            raise IntegrationError(f"batch has no {missing} in non_tensor_batch; observe() needs verl's scored batch")
        scores = batch.batch.get("token_level_scores", None) if batch.batch is not None else None
        if scores is None:
            scores = batch.batch.get("token_level_rewards", None) if batch.batch is not None else None
        if scores is None:
            raise IntegrationError("batch has no token_level_scores: call observe() after the reward is computed")
        seq = scores.detach().float().sum(-1).cpu().numpy().astype(np.float64)  # [N*G]
        uids, first, inverse = np.unique(np.asarray(nt["uid"]), return_index=True, return_inverse=True)
        counts = np.bincount(inverse, minlength=len(uids))
        G = self.scheduler.config.group_size
        if (counts != G).any():
            raise IntegrationError(
                f"a uid has {int(counts[counts != G][0])} rollouts but group_size={G}; set "
                "data.sampler.snooze.group_size to actor_rollout_ref.rollout.n"
            )
        order = np.argsort(inverse, kind="stable")
        rewards = seq[order].reshape(len(uids), G)  # [groups, G], groups in uid order
        cands, rows = [], []
        for g in np.argsort(first).tolist():  # generation order
            key = (str(nt["data_source"][first[g]]), _plain(nt["index"][first[g]]))
            queue = self._open.get(key)
            if queue:
                cands.append(queue.pop(0))
                rows.append(g)
                if not queue:
                    del self._open[key]
        if cands:
            group_rewards = rewards[rows]
            self.scheduler.report(cands, group_rewards)
            write_groups(self._writer(), self.scheduler.step_index, cands, group_rewards)
        return len(cands)

    def update(self, batch: DataProto) -> None:
        """verl's per-step hook: observe what was not observed yet, then close the scheduler's step."""
        self.observe(batch)
        lost = sum(len(q) for q in self._open.values())
        if lost:
            log.warning(
                "%d issued group(s) never reached the sampler (filtered before it saw them); call "
                "sampler.observe(batch) before DAPO's group filter so snoozing sees every group",
                lost,
            )
            self._open.clear()
        self.last_metrics = self.scheduler.finish_step().metrics
        if self._save_at_update:
            self._save_at_update = False
            self.scheduler.save(self._step_dir(self.scheduler.step_index))

    def metrics(self) -> dict[str, float]:
        """The last closed step's scheduler metrics, prefixed ``snooze/`` for verl's logger."""
        return {f"snooze/{k}": v for k, v in self.last_metrics.items()}

    def _writer(self) -> RewardLogWriter | None:
        if self._log is None and self._log_path is not None:
            self._log = RewardLogWriter(self._log_path, append=True)
        return self._log

    # -- state ----------------------------------------------------------------------------------
    def _step_dir(self, step: int) -> Path:
        return self.state_dir / f"step-{step:08d}"

    def state_dict(self) -> dict[str, Any]:
        """What verl's ``data.pt`` stores: a format tag, a step number and the state folder.

        verl checkpoints *before* it calls :meth:`update` for that step, so the scheduler's state is
        written at the end of that ``update`` (the step verl's model checkpoint contains).
        """
        self._save_at_update = True
        return {"format": STATE_FORMAT, "step": self.scheduler.step_index + 1, "state_dir": str(self.state_dir)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore from ``state_dict`` output; the scheduler state is read from its folder."""
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            raise StateError(f"not a SnoozeSampler state: {dict(state) if isinstance(state, Mapping) else state!r}")
        folder = Path(state["state_dir"]) / f"step-{int(state['step']):08d}"
        if not folder.exists():
            raise StateError(
                f"{folder} is missing: the run stopped between verl's checkpoint and the end of that step. Resume from "
                "the checkpoint before it (trainer.resume_from_path), or start the scheduler fresh."
            )
        self.scheduler.load_state_dict(load_state(folder))
        self._open = {}  # nothing issued before the save is observed after it
        if self._log_path is not None:
            truncate_reward_log(self._log_path, self.scheduler.step_index)

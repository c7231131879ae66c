"""``SnoozeGRPOTrainer``: TRL's ``GRPOTrainer`` whose generation step runs the scheduler's step loop.

Why an override of the generation step (and not a sampler + callback pair): TRL's ``RepeatSampler``
fixes the generation batch before anything is generated, and nothing after generation may change its
size. Dynamic sampling needs to generate *again* within one optimisation step until the batch holds
enough signal groups, which only the generation step itself can do. So
:class:`SnoozeGRPOTrainer` overrides ``_generate_and_score_completions``: it ignores the prompts the
dataloader drew and runs the scheduler's step loop (docs/concepts.md, "The step loop") instead, calling TRL's own
generation and scoring once per round, then hands TRL the signal groups it kept.

Everything else is TRL's: the loss, the advantages within each kept group (``scale_rewards``), the
reference model, vLLM. On N processes every rank runs the same scheduler on the gathered rewards and
generates its own slice of each round (:mod:`snooze.integrations.trl._dist`). With partial groups
(``SchedulerConfig.screen_size``, one process) a round generates each width in its own TRL call and a
screened group's advantages are TRL's formula over its joined G rewards (:mod:`snooze.integrations.trl._screen`).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from snooze import Batch, Candidate, Candidates, IntegrationError, Scheduler, SchedulerConfig, SnoozeError, StateError
from snooze.core.checkpoint import load_state
from snooze.integrations._curriculum import curriculum_of, restore_curriculum
from snooze.integrations._paths import log_path, open_log
from snooze.integrations._tensors import concat_rows, count_loss_tokens, inert_copy, take_rows
from snooze.integrations.trl import _build as build
from snooze.integrations.trl import _checks as checks
from snooze.integrations.trl import _data as data
from snooze.integrations.trl import _dist as dist
from snooze.integrations.trl import _screen as screening
from snooze.logs import RewardLogWriter, check_metrics_mode, framework_metrics, truncate_log, write_groups
from snooze.logs.dashboard import PREFIX

try:
    import torch
    import trl
    from trl import GRPOConfig, GRPOTrainer
    from trl.trainer.utils import nanstd
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise IntegrationError(f"snooze.integrations.trl needs TRL ({exc}); install it with: {checks.INSTALL}") from exc

__all__ = [
    "SnoozeGRPOTrainer",
    "SnoozeCheckpointCallback",
    "PoolEpochCallback",
    "STATE_DIR",
    "METRIC_PREFIX",
    "DIST_PREFIX",
]

from snooze.integrations.trl._callbacks import (  # noqa: E402  (after TRL: it imports transformers)
    STATE_DIR,
    PoolEpochCallback,
    SnoozeCheckpointCallback,
    no_state,
)
from snooze.integrations.trl._reward_log import refuse_logged_funcs  # noqa: E402

log = logging.getLogger(__name__)

METRIC_PREFIX = PREFIX  # scheduler metrics in TRL's logs: "snooze/gen/rounds", "snooze/skipped" (logs.logged_name)
DIST_PREFIX = "dist/"  # on several processes: "snooze/dist/pad_groups", "snooze/dist/rows_per_rank", ...


class SnoozeGRPOTrainer(GRPOTrainer):  # type: ignore[misc]
    """TRL's ``GRPOTrainer`` with snooze's dynamic sampling, filtering and snoozing.

    Built exactly as ``GRPOTrainer`` (``model``, ``reward_funcs``, ``args``, ``train_dataset``, ...): the
    scheduler is made from ``train_dataset`` and ``args`` (:mod:`snooze.integrations.trl._data` says how:
    ids, sizes, order, reward range). Takes every ``GRPOTrainer`` argument plus:

    - ``snooze_config``: the snooze settings: ``None`` (the defaults: the recommended setting,
      ``snooze.RECOMMENDED``; ``{"policy": "dynamic_sampling"}`` is DAPO), a mapping of
      :class:`~snooze.SchedulerConfig` fields (``{"policy": "filter"}``; the sizes follow ``args``), or a
      ``SchedulerConfig`` whose ``batch_size``, ``group_size`` and ``shuffle`` are TRL's.
    - ``scheduler``: a :class:`~snooze.Scheduler` built by hand instead (not with ``snooze_config``).
      Its prompts must be ``train_dataset``'s (any order); ``group_size`` must equal ``num_generations``,
      ``batch_size * group_size`` TRL's ``generation_batch_size`` (all processes together) and
      ``shuffle`` GRPOConfig's ``shuffle_dataset``. On several processes, build the same one on every one.
    - ``reward_log``: path of the per-group JSONL reward log ``snooze replay`` reads (optional;
      written by the main process only).
    - ``on_batch``: called with each finished :class:`~snooze.Batch` (metrics, kept groups), on every process.
    - ``curriculum``: a curriculum file (``snooze stratify``'s ``curriculum.json``; ``snooze baseline --dataset``
      names the rows as this trainer does) or a :class:`~snooze.Curriculum`: applied to the scheduler, updated
      after each step, its state saved in each checkpoint (``checkpoint-N/snooze_curriculum.json``).

    The prompts TRL's dataloader draws are ignored (the scheduler's are generated); the ``epoch`` TRL
    logs is passes over the scheduler's pool. After each step, ``last_digest`` holds the scheduler
    digest the processes compared (``_dist.STEP_FIELDS``).

    Partial groups (``SchedulerConfig.screen_size=k``) run on one process: a screen's k completions are kept
    until its rest's G - k join them, and the whole group is trained with TRL's advantages over its G rewards
    (a screen that stops is never trained, nor written to the reward log). On several processes, and with
    ``scale_rewards="batch"`` or ``multi_objective_aggregation="normalize_then_sum"``, ``screen_size`` is refused.
    """

    def __init__(
        self,
        *args: Any,
        scheduler: Scheduler | None = None,
        snooze_config: SchedulerConfig | Mapping[str, Any] | None = None,
        reward_log: str | Path | None = None,
        on_batch: Callable[[Batch], None] | None = None,
        snooze_metrics: str = "full",
        curriculum: Any = None,
        **kwargs: Any,
    ) -> None:
        self._metrics_mode = check_metrics_mode(snooze_metrics, "snooze_metrics")
        checks.check_trl(trl.__version__, {"GRPOTrainer": GRPOTrainer}, checks.SYNC)  # before TRL loads anything
        build.check_own(scheduler, snooze_config, on_batch)
        self._reward_log_path = log_path(reward_log, "reward_log") if reward_log is not None else None
        self._curriculum = curriculum_of(curriculum, "curriculum")  # read and checked before TRL loads anything
        bound = build.bind(GRPOTrainer.__init__, args, kwargs)
        if bound is not None:  # (else TRL refuses its arguments itself, below)
            refuse_logged_funcs(bound.arguments.get("reward_funcs"))
            scheduler = _scheduler_before_loading(bound, scheduler, snooze_config)
            args, kwargs = bound.args[1:], bound.kwargs
        super().__init__(*args, **kwargs)
        if scheduler is None:  # pragma: no cover - TRL refuses arguments its signature does not bind
            raise IntegrationError("GRPOTrainer's arguments could not be read: the scheduler was not built")
        self.scheduler = scheduler
        if self._curriculum is not None:
            self._curriculum.apply(scheduler)  # its first stage (a resume restores the stage it was in)
        self.on_batch = on_batch
        self.last_digest: list[int] = []
        self._reward_log: RewardLogWriter | None = None
        self._resumed = False
        self._rows: dict[int, tuple[dict[str, Any], int, int]] = {}  # ticket -> (this rank's round output, rows lo, hi)
        self._spread: dict[int, np.ndarray] = {}  # ticket -> [world] rows of its group on each rank
        self._template: dict[str, torch.Tensor] | None = None  # one row of this rank's last round (inert copies)
        self._round_rewards: torch.Tensor | None = None
        self._round_lengths: torch.Tensor | None = None  # [rows of every rank]: each completion's tokens
        self._step_crc = 0  # checksum of this step's reports, compared across ranks
        self._pad_groups = 0  # inert groups generated this step to even out the rounds
        self._screens: dict[int, screening.Screen] = {}  # screen_size: ticket -> a screen waiting for its rest
        self._unscored_excluded = screening.unscored_excluded(trl.__version__)  # TRL's advantages (_screen.py)
        self._check_compatible()
        self._warn_off_boundary_saves()
        self._agree("start", dist.START_FIELDS, dist.start_digest(scheduler))
        self.add_callback(SnoozeCheckpointCallback(scheduler, self._curriculum))
        self.add_callback(PoolEpochCallback(scheduler))

    @property
    def _world(self) -> int:
        return int(self.accelerator.num_processes)

    def _check_compatible(self) -> None:
        parallelism = getattr(self.accelerator, "parallelism_config", None)
        checks.check_compatible(self.scheduler.config, self.args, self.num_generations, self._world, parallelism)

    def _warn_off_boundary_saves(self) -> None:
        """A checkpoint between two generations resumes with a fresh generation: not the uninterrupted run."""
        per_generation = checks.off_boundary_saves(self.args, self.num_iterations)
        if per_generation is not None:
            log.warning(
                "save_steps=%s is not a multiple of %d, the optimizer steps of one generation (steps_per_generation "
                "x num_iterations / gradient_accumulation_steps): a checkpoint can fall between two generations, "
                "and resuming from it generates afresh, so the resumed run is not the uninterrupted one. Use "
                "save_steps=%d or a multiple",
                self.args.save_steps,
                per_generation,
                per_generation,
            )

    def _agree(self, where: str, fields: tuple[str, ...], values: list[int]) -> None:
        """One all-gather of ``values`` (a few integers); raises if any rank's differ from rank 0's."""
        if self._world == 1:
            return
        mine = torch.tensor(values, dtype=torch.int64, device=self.accelerator.device)
        dist.check_agree(self.accelerator.gather(mine).cpu().numpy(), fields, where)

    # -- TRL hooks ------------------------------------------------------------------------------
    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._round_rewards = rewards_per_func  # [rows of every rank, n_funcs]: TRL gathered them
        lengths = torch.tensor([len(ids) for ids in completion_ids_list], dtype=torch.int64)  # this rank's rows
        self._round_lengths = self.accelerator.gather(lengths.to(self.accelerator.device))  # in the rewards' order
        return rewards_per_func

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.model.training:  # evaluation: TRL's own path, no scheduling
            return super()._generate_and_score_completions(inputs)
        return self._scheduled_generation()

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            where = (
                f"resume from {checkpoint} (every process loads {Path(checkpoint) / STATE_DIR}/: keep checkpoints "
                "on a filesystem all nodes share, or set save_on_each_node=True)"
            )
            failed = None  # a missing snooze/ too: on every process it is a StateError, on some only a disagreement
            try:
                self._load_scheduler(checkpoint)
            except SnoozeError as exc:  # e.g. this node's copy is damaged: every process must stop, and say why
                failed = exc
                log.error(
                    "process %d cannot load the scheduler state of %s: %s",
                    self.accelerator.process_index,
                    checkpoint,
                    exc,
                )
            try:
                self._agree(
                    f"{where}; a process with state_loaded 0 could not read it and logged why",
                    ("state_loaded",),
                    [int(failed is None)],
                )
            except IntegrationError as exc:
                raise exc from failed
            if failed is not None:
                raise failed
            self._agree(where, dist.START_FIELDS, dist.start_digest(self.scheduler))
            self._cut_reward_log()  # only once every process holds the state: a refused resume leaves the log whole

    # -- the step loop --------------------------------------------------------------------------
    def _scheduled_generation(self) -> dict[str, Any]:
        sched = self.scheduler
        last: dict[str, Any] | None = None
        self._step_crc, self._pad_groups = 0, 0
        while sched.wants_round():
            cands = sched.propose()
            self._agree(
                f"step {sched.step_index}, round {sched.round}", dist.ROUND_FIELDS, dist.round_digest(sched, cands)
            )
            if not cands:
                break
            last = self._generate_round(cands)
        batch = sched.finish_step()
        self._screens.clear()  # a step finishes what it screened: a screen left here stopped (never trained)
        if self._curriculum is not None:
            self._curriculum.update(sched, batch.metrics)  # the next stage, when its condition holds
        self.last_digest = dist.step_digest(sched, self._step_crc)
        self._agree(f"after step {batch.step}", dist.STEP_FIELDS, self.last_digest)
        out = self._assemble(batch, last)
        self._log_metrics(batch.metrics)
        if sched.finished:  # the data used up and the groups carried past it trained (not merely exhausted)
            log.info("every dataset is used up after step %d; stopping training", batch.step)
            self.control.should_training_stop = True
        if self.on_batch is not None:
            self.on_batch(batch)
        return out

    def _generate_round(self, cands: Candidates) -> dict[str, Any]:
        """Generate this rank's rows of one round, report the gathered rewards, remember the kept rows."""
        if self.scheduler.config.screen_size is not None:  # partial groups: one process (_checks.check_screening)
            return self._generate_screened_round(cands)
        G, rank = self.num_generations, int(self.accelerator.process_index)
        records = [_trl_record(c) for c in cands]  # every rank checks every record: errors are the same everywhere
        layout = dist.round_layout(len(cands), G, self._world)
        inputs = [dict(records[c]) for c in layout.candidates_of(rank).tolist()]  # pads (-1) copy the last one
        self._round_rewards = self._round_lengths = None
        out = super()._generate_and_score_completions(inputs)
        rewards = layout.group_rewards(self._slot_rewards())  # [len(cands), G]
        tokens = None  # a custom rollout_func that skips scoring has no lengths either (_slot_rewards raised)
        if self._round_lengths is not None:  # each group's completion tokens, summed: gen/tokens
            lengths = self._round_lengths.cpu().numpy().astype(np.int64).reshape(-1, G)  # [slots, G]
            tokens = layout.group_rewards(lengths).sum(axis=1)  # [len(cands)]
        self.scheduler.report(cands, rewards, tokens)
        self._step_crc = dist.report_crc(cands, rewards, self._step_crc)
        self._pad_groups += layout.pad_groups
        write_groups(self._writer(), self.scheduler.step_index, cands, rewards, tokens)
        for i, c in enumerate(cands):
            self._spread[c.ticket] = layout.spread(i)
            lo, hi = layout.local(i, rank)
            if hi > lo:
                self._rows[c.ticket] = (out, lo, hi)
        self._template = take_rows(out, torch.arange(1, device=out["advantages"].device))
        return out

    def _generate_screened_round(self, cands: Candidates) -> dict[str, Any]:
        """One round with partial groups, on one process: each width's candidates (screens of k, rests of G - k)
        in one TRL call; report a row of ``n`` rewards per candidate; keep a screen's rows under its ticket and join
        its rest's to them, with the whole group's advantages computed again over its G rewards (_screen.py)."""
        widths = [self.num_generations] * len(cands) if cands.n is None else cands.n.tolist()
        rests = [c.ticket in self._screens for c in cands]
        records = [_trl_record(c) for c in cands]
        rewards: list[np.ndarray] = [np.empty(0)] * len(cands)
        parts: list[tuple[dict[str, torch.Tensor], torch.Tensor]] = [({}, torch.empty(0))] * len(cands)
        tokens: np.ndarray | None = np.zeros(len(cands), dtype=np.int64)
        out: dict[str, Any] = {}
        for width in sorted(set(widths), reverse=True):
            sub = [i for i, w in enumerate(widths) if w == width]
            out, got, per_func, lengths = self._generate_width([records[i] for i in sub], width)
            for j, i in enumerate(sub):
                rows = torch.arange(j * width, (j + 1) * width, device=out["advantages"].device)
                rewards[i] = got[j]
                parts[i] = (take_rows(out, rows), per_func[j * width : (j + 1) * width])
                if tokens is not None and lengths is not None:
                    tokens[i] = int(lengths[j * width : (j + 1) * width].sum())
                else:  # a custom rollout_func that skips scoring has no lengths either (_slot_rewards raised)
                    tokens = None
        mixed = len(set(widths)) > 1 or 0 < sum(rests) < len(cands)  # one row per candidate: the core's contract
        self.scheduler.report(cands, rewards if mixed else np.stack(rewards), tokens)
        self._step_crc = dist.report_crc(cands, np.concatenate(rewards), self._step_crc)
        self._join(cands, rewards, parts, tokens)
        self._template = take_rows(out, torch.arange(1, device=out["advantages"].device))
        return out

    def _generate_width(
        self, records: list[dict[str, Any]], width: int
    ) -> tuple[dict[str, Any], np.ndarray, torch.Tensor, np.ndarray | None]:
        """TRL's generation of ``width`` completions of each record, with ``num_generations`` set to ``width``
        for the call (TRL groups rows, and vLLM asks ``n``, by it): its output, the rewards ``[records, width]``,
        TRL's per-function rewards ``[rows, functions]`` and each row's completion tokens (``None``: not known)."""
        inputs = [dict(r) for r in records for _ in range(width)]
        self._round_rewards = self._round_lengths = None
        whole = self.num_generations
        self.num_generations = width
        try:
            out = super()._generate_and_score_completions(inputs)
        finally:
            self.num_generations = whole
        got, per_func = self._slot_rewards(width), self._round_rewards  # (_slot_rewards raises when TRL scored none)
        lengths = None if self._round_lengths is None else self._round_lengths.cpu().numpy().astype(np.int64)
        return out, got, torch.empty(0) if per_func is None else per_func.detach(), lengths

    def _join(
        self,
        cands: Candidates,
        rewards: list[np.ndarray],
        parts: list[tuple[dict[str, torch.Tensor], torch.Tensor]],
        tokens: np.ndarray | None,
    ) -> None:
        """After a screened round's report: keep each screen; join each rest to its screen (a whole group, its
        advantages TRL's over all G rewards) and write the whole groups to the reward log."""
        G, done, rows_of, tokens_of = self.num_generations, [], [], []
        for i, c in enumerate(cands):
            got, per_func = parts[i]
            mine = None if tokens is None else int(tokens[i])
            first = self._screens.pop(c.ticket, None)
            if first is None:
                self._screens[c.ticket] = screening.Screen(got, per_func, rewards[i], mine)
                continue
            group = concat_rows([first.rows, got], self._pad_id())
            advantages = screening.group_advantages(
                torch.cat([first.per_func, per_func]),
                self.reward_weights,
                self.scale_rewards,
                self._unscored_excluded,
                nanstd,
            )
            group["advantages"] = advantages.to(group["advantages"].device, group["advantages"].dtype)
            self._rows[c.ticket] = (group, 0, G)
            self._spread[c.ticket] = np.array([G], dtype=np.int64)
            done.append(c)
            rows_of.append(np.concatenate([first.rewards, rewards[i]]))
            tokens_of.append(None if mine is None or first.tokens is None else first.tokens + mine)
        known = all(t is not None for t in tokens_of)
        write_groups(self._writer(), self.scheduler.step_index, done, np.array(rows_of), tokens_of if known else None)

    def _slot_rewards(self, width: int | None = None) -> np.ndarray:
        """The weighted reward sum TRL logs as ``reward``, ``[slots, width]`` (every rank's rows, in TRL's
        gathered order; ``width``: ``num_generations`` unless given); unscorable rows get the range's low end."""
        if self._round_rewards is None:
            raise IntegrationError("TRL scored no rewards for this round (is a custom rollout_func skipping scoring?)")
        per_func = self._round_rewards.detach().float().cpu()
        weights = self.reward_weights.detach().float().cpu()
        unscorable = torch.isnan(per_func).all(dim=1)
        rewards = (per_func * weights.unsqueeze(0)).nansum(dim=1)
        rewards[unscorable] = float(self.scheduler.config.reward_range[0])
        return rewards.view(-1, width or self.num_generations).numpy().astype(np.float64)

    def _assemble(self, batch: Batch, last: dict[str, Any] | None) -> dict[str, Any]:
        """This rank's rows of the batch's groups, padded with inert rows to the rows every rank trains on."""
        parts, counts = self._kept_rows(batch)
        if not counts.any():
            if last is None:
                raise IntegrationError(
                    f"step {batch.step}: nothing could be generated (every dataset is used up or every prompt is "
                    "asleep/retired); lower max_steps, raise SchedulerConfig.epochs, or set epochs=None"
                )
            log.warning(
                "step %d: no group carried signal in %d round(s); this step trains on nothing",
                batch.step,
                self.scheduler.config.max_gen_rounds,
            )
        target = dist.pad_rows_to(counts, self.args.steps_per_generation, floor=self.num_generations)
        short = target - int(counts[self.accelerator.process_index])
        template = parts[0] if parts else self._template  # inert rows copy one real row (right dtypes and widths)
        if template is None:  # pragma: no cover - every process generates rows in every round
            raise IntegrationError(f"step {batch.step}: this process generated nothing it could pad with")
        rows = concat_rows(parts + ([inert_copy(template, short)] if short else []), self._pad_id())
        # all ranks' loss tokens; at least 1, as TRL >= 1.9 clamps it: a step of inert rows only is no 0/0 before
        rows["num_items_in_batch"] = self.accelerator.gather(count_loss_tokens(rows)).sum().clamp(min=1)
        if self._world > 1 and self._metrics_mode == "full":
            train = self._metrics["train"]
            train[METRIC_PREFIX + DIST_PREFIX + "pad_groups"].append(float(self._pad_groups))
            train[METRIC_PREFIX + DIST_PREFIX + "rows_per_rank"].append(float(target))
            train[METRIC_PREFIX + DIST_PREFIX + "inert_rows"].append(float(target * self._world - counts.sum()))
        return rows

    def _kept_rows(self, batch: Batch) -> tuple[list[dict[str, torch.Tensor]], np.ndarray]:
        """This rank's rows of the batch's groups, and ``[world]`` how many rows of them each rank holds."""
        parts, counts, missing = [], np.zeros(self._world, dtype=np.int64), 0
        for c in batch.candidates:
            spread = self._spread.get(c.ticket)
            if spread is None:  # carried in before a resume: its completions are gone
                missing += 1
                continue
            counts += spread
            if c.ticket in self._rows:
                out, lo, hi = self._rows[c.ticket]
                parts.append(take_rows(out, torch.arange(lo, hi, device=out["advantages"].device)))
        if missing:
            log.warning(
                "step %d: %d carried group(s) had no completions (resumed run); trained without them",
                batch.step,
                missing,
            )
        carried = set(self.scheduler.step_record().tickets("trained").tolist())  # surplus carried into the next step
        self._rows = {t: v for t, v in self._rows.items() if t in carried}
        self._spread = {t: v for t, v in self._spread.items() if t in carried}
        return parts, counts

    def _pad_id(self) -> int:
        tok = getattr(self, "_tokenizer", None)  # TRL >= 1.4; before, the processing class (or its tokenizer)
        if tok is None:
            tok = getattr(self.processing_class, "tokenizer", self.processing_class)
        pad = tok.pad_token_id
        return int(pad) if pad is not None else 0

    # -- logs, reward log, state ----------------------------------------------------------------
    def _log_metrics(self, metrics: dict[str, float]) -> None:
        for key, value in framework_metrics(metrics, self._metrics_mode).items():
            self._metrics["train"][key].append(float(value))

    def _writer(self) -> RewardLogWriter | None:
        if not self.accelerator.is_main_process:  # one writer: every rank holds the same rewards
            return None
        if self._reward_log is None and self._reward_log_path is not None:
            self._reward_log = open_log(self._reward_log_path, self._resumed, self.scheduler.config, "snooze.trl")
        return self._reward_log

    def restore_scheduler(self, checkpoint: str | Path) -> None:
        """Load the scheduler state saved in TRL checkpoint ``checkpoint`` (its ``snooze/`` folder).

        Every process loads it; only the main one cuts the reward log back to the checkpoint's step.
        A checkpoint without that folder is a ``StateError``: the scheduler never restarts from scratch
        under a resumed model, and the reward log is left as it was.
        """
        self._load_scheduler(checkpoint)
        self._cut_reward_log()

    def _load_scheduler(self, checkpoint: str | Path) -> None:
        if isinstance(checkpoint, bool) or not isinstance(checkpoint, (str, Path)):
            raise IntegrationError(f"checkpoint={checkpoint!r}: pass the path of a TRL checkpoint-N folder")
        folder = Path(checkpoint) / STATE_DIR
        if not folder.is_dir():
            raise StateError(no_state(Path(checkpoint)))
        self.scheduler.load_state_dict(load_state(folder))
        restore_curriculum(self._curriculum, Path(checkpoint), self.scheduler)
        lost = self.scheduler.drop_carried()  # carry_surplus: their completions were in this process's memory
        if lost:
            log.warning(
                "%d group(s) carried into step %d (carry_surplus) were lost with the restart (their completions "
                "are not in TRL's checkpoint); the step generates in their place",
                lost,
                self.scheduler.step_index,
            )
        self._rows.clear()
        self._spread.clear()
        self._screens.clear()
        self._resumed = True
        log.info("restored scheduler state at step %d from %s", self.scheduler.step_index, folder)

    def _cut_reward_log(self) -> None:
        if self._reward_log_path is not None and self.accelerator.is_main_process:
            if self._reward_log is not None:
                self._reward_log.close()
                self._reward_log = None
            dropped = truncate_log(self._reward_log_path, self.scheduler.step_index)
            log.info("resume: dropped %d reward-log line(s) from steps >= %d", dropped, self.scheduler.step_index)

    def train(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().train(*args, **kwargs)
        finally:
            if self._reward_log is not None:
                self._reward_log.close()
                self._reward_log = None


def _scheduler_before_loading(
    bound: inspect.BoundArguments, scheduler: Scheduler | None, snooze_config: Any
) -> Scheduler:
    """The scheduler, built and checked against TRL's sizes from GRPOTrainer's bound arguments, before TRL loads
    the model: a bad snooze_config, scheduler or dataset fails here, in milliseconds."""
    args = build.fill_args(bound, GRPOConfig, "GRPO")
    G = int(args.num_generations)
    sizes = {"batch_size": args.generation_batch_size // G, "group_size": G, "shuffle": bool(args.shuffle_dataset)}
    weights = build.reward_weights(bound, args)
    sched = build.build_scheduler(bound, scheduler, snooze_config, sizes, weights, args.seed, screening=True)
    checks.check_compatible(sched.config, args, G, int(args.world_size), getattr(args, "parallelism_config", None))
    return sched


def _trl_record(c: Candidate) -> dict[str, Any]:
    return data.trl_record(c.record, c.dataset, c.id)

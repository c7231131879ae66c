"""Counterfactual replay: what would ``filter`` or ``snooze:k`` have skipped in a logged run?

Every logged group is one encounter of its prompt. Each policy replays each prompt's encounters in
log order under the rules of docs/concepts.md ("Policies"):

- ``snooze:k``: a counter starts at 0; a rolled-out encounter that is too easy *adds* ``k`` (and,
  with hard snoozing, a too-hard one adds ``k`` too); an encounter met with the counter above 0 is
  skipped before any rollout and the counter goes down by 1.
- ``filter``: the first too-easy rollout retires the prompt; every later encounter is skipped (an
  unbounded snooze factor).

A skipped encounter saves its group (``G`` rollouts). If the *logged* group of a skipped encounter
had signal, the policy would have missed that signal group.

Caveat: replaying a DAPO log assumes each prompt's outcomes would have been the same. In a real
snooze run the skipped encounters are replaced by other draws and the model trains on a different
sequence of batches, so its later outcomes (and its encounters) differ. ``docs/offline-analysis.md``
discusses how large that gap is in practice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from snooze.analysis.stepsim import infer_gen_size, interleave_kept, simulate_steps
from snooze.core._checks import as_int
from snooze.core.classify import FLAT, OUTCOME_NAMES, SIGNAL, TOO_EASY, TOO_HARD, classify
from snooze.core.config import SchedulerConfig
from snooze.core.errors import ConfigError
from snooze.logs import RewardLog

__all__ = ["ReplayPolicy", "StepShape", "replay", "replay_policies", "policy_names"]

logger = logging.getLogger(__name__)

_UNBOUNDED = np.int64(2**62)  # ``filter`` as a snooze factor no run can count down
_PAD = np.int8(-1)


@dataclass(frozen=True)
class ReplayPolicy:
    """One policy to replay."""

    name: str
    """Key in the output: ``filter``, ``snooze:<k>`` or ``snooze-hard:<k>``."""

    factor: int | None
    """Snooze factor ``k``; ``None`` is ``filter`` (retire on the first too-easy outcome)."""

    snooze_hard: bool = False
    """Also snooze too-hard groups (by the same factor)."""


def policy_names(factors: list[int], snooze_hard: bool = False) -> list[ReplayPolicy]:
    """``filter``, then ``snooze:<k>`` for each factor, then ``snooze-hard:<k>`` when asked."""
    for k in factors:
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ConfigError(f"snooze factor {k!r}: must be an integer >= 0")
    out = [ReplayPolicy("filter", None)]
    out += [ReplayPolicy(f"snooze:{k}", k) for k in factors]
    if snooze_hard:
        out += [ReplayPolicy(f"snooze-hard:{k}", k, snooze_hard=True) for k in factors]
    return out


def _encounter_matrix(log: RewardLog, outcomes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(table [P, J], prompt [N], rank [N])``: outcome of each prompt's j-th encounter (``-1`` pad)."""
    prompt, keys = log.prompt_index()
    order = np.argsort(prompt, kind="stable")  # groups by prompt, log order within a prompt
    counts = np.bincount(prompt, minlength=len(keys))  # [P]
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    rank = np.empty(len(log), dtype=np.int64)
    rank[order] = np.arange(len(log)) - np.repeat(starts, counts)
    table = np.full((len(keys), int(counts.max())), _PAD, dtype=np.int8)
    table[prompt, rank] = outcomes
    return table, prompt, rank


def _replay_table(table: np.ndarray, factor: int | None, snooze_hard: bool) -> tuple[np.ndarray, int]:
    """Skip mask ``bool [P, J]`` and the number of regressions, vectorised over prompts.

    The loop runs over encounter depth ``J`` (how often the most frequent prompt came up, usually a
    handful of epochs), never over prompts.
    """
    n_prompts, depth = table.shape
    period = _UNBOUNDED if factor is None else np.int64(factor)
    counter = np.zeros(n_prompts, dtype=np.int64)
    easy_snoozed = np.zeros(n_prompts, dtype=bool)
    skipped = np.zeros(table.shape, dtype=bool)
    regressed = 0
    for j in range(depth):
        outcome = table[:, j]  # [P]
        valid = outcome != _PAD
        asleep = valid & (counter > 0)
        skipped[:, j] = asleep
        counter[asleep] -= 1
        rolled = valid & ~asleep
        easy = rolled & (outcome == TOO_EASY)
        not_easy = rolled & (outcome != TOO_EASY)
        regressed += int(np.count_nonzero(not_easy & easy_snoozed))
        easy_snoozed[not_easy] = False
        counter[easy] += period
        if period > 0:
            easy_snoozed[easy] = True
        if snooze_hard:
            counter[rolled & (outcome == TOO_HARD)] += period
    return skipped, regressed


def _equal_signal_savings(saved: float, missed: float) -> float | None:
    """Generation saved *at equal signal groups*: ``1 - (1 - saved) / (1 - missed)``.

    ``saved_frac`` counts skipped groups of the logged run, but a real run must replace every missed
    signal group by generating more. If the replacements come from the same mix, generation per
    signal group scales by ``(1 - saved) / (1 - missed)``. ``None`` when every signal group is missed.
    """
    return None if missed >= 1.0 else 1.0 - (1.0 - saved) / (1.0 - missed)


def _summarise(
    log: RewardLog, outcomes: np.ndarray, skipped: np.ndarray, regressed: int, factor: int | None
) -> dict[str, Any]:
    n, g = len(log), log.group_size
    n_skip = int(np.count_nonzero(skipped))
    n_signal = int(np.count_nonzero(outcomes == SIGNAL))
    missed = int(np.count_nonzero(skipped & (outcomes == SIGNAL)))
    by_outcome = np.bincount(outcomes[skipped].astype(np.int64), minlength=4)
    out: dict[str, Any] = {
        "factor": factor,
        "total_groups": n,
        "total_rollouts": n * g,
        "signal_groups": n_signal,
        "skipped_groups": n_skip,
        "skipped_rollouts": n_skip * g,
        "missed_signal_groups": missed,
        "saved_frac": n_skip / n,
        "missed_signal_frac": missed / n_signal if n_signal else 0.0,
        "predicted_saved_frac": _equal_signal_savings(n_skip / n, missed / n_signal if n_signal else 0.0),
        "skipped_by_outcome": {OUTCOME_NAMES[i]: int(by_outcome[i]) for i in (SIGNAL, TOO_EASY, TOO_HARD, FLAT)},
        "regressed": regressed,
        "datasets": {},
    }
    names = np.asarray(log.datasets)
    for name in sorted(set(log.datasets)):
        mine = names == name
        out["datasets"][name] = {
            "total_groups": int(np.count_nonzero(mine)),
            "skipped_groups": int(np.count_nonzero(skipped & mine)),
            "missed_signal_groups": int(np.count_nonzero(skipped & mine & (outcomes == SIGNAL))),
        }
    return out


def replay(
    log: RewardLog, policy: ReplayPolicy, config: SchedulerConfig | None = None, shape: StepShape | None = None
) -> dict[str, Any]:
    """Replay one policy over ``log``; see the module docstring. Returns a JSON-safe summary.

    ``config`` supplies the classification thresholds (``easy_threshold``, ``hard_threshold``,
    ``signal_tol``, ``reward_range``); its policy and factor fields are ignored.
    """
    return replay_policies(log, [policy], config, shape)[policy.name]


def _classify(log: RewardLog, cfg: SchedulerConfig) -> np.ndarray:
    return classify(log.rewards, cfg.reward_range, cfg.easy_threshold, cfg.hard_threshold, cfg.signal_tol, cfg.reward_band)


@dataclass(frozen=True)
class StepShape:
    """The logged run's step loop, for rebuilding steps over the replayed stream (:mod:`.stepsim`)."""

    batch_size: int
    """Signal groups per training step."""

    gen_batch_size: int
    """Groups per generation round."""

    max_gen_rounds: int
    """Round limit per step."""

    def __post_init__(self) -> None:
        for name in ("batch_size", "gen_batch_size", "max_gen_rounds"):  # 0 would make a step that never ends
            object.__setattr__(self, name, as_int(getattr(self, name), name, 1))

    @classmethod
    def infer(
        cls,
        log: RewardLog,
        batch_size: int | None = None,
        gen_batch_size: int | None = None,
        max_gen_rounds: int | None = None,
    ) -> StepShape | None:
        """Fill what is not given from the log: ``gen_batch_size`` as the gcd of groups per step,
        ``batch_size`` = ``gen_batch_size`` (the DAPO default), ``max_gen_rounds`` as the most rounds a
        logged step took. ``None`` when no round size can be inferred (e.g. a snooze run's log).
        A given size below 1 is a :class:`~snooze.ConfigError`, before anything is inferred."""
        for name, value in (("batch_size", batch_size), ("gen_batch_size", gen_batch_size), ("max_gen_rounds", max_gen_rounds)):
            if value is not None:
                as_int(value, name, 1)
        gen = gen_batch_size if gen_batch_size is not None else infer_gen_size(log.steps)
        if gen < 1:
            return None
        _, per_step = np.unique(log.steps, return_counts=True)
        rounds = max_gen_rounds if max_gen_rounds is not None else int(-(-per_step.max() // gen))
        return cls(batch_size if batch_size is not None else gen, gen, rounds)


def _simulated(
    signal: np.ndarray, skipped: np.ndarray, dataset: np.ndarray, dapo: np.ndarray, n_steps: int, shape: StepShape
) -> dict[str, Any]:
    order = interleave_kept(dataset, ~skipped)
    mine = simulate_steps(signal[order], shape.batch_size, shape.gen_batch_size, shape.max_gen_rounds)
    steps = min(mine.shape[0], dapo.shape[0])
    out: dict[str, Any] = {"steps": steps, "dapo_sim_matches_log": bool(dapo.shape[0] == n_steps)}
    if steps:
        out.update(
            gen_groups=int(mine[steps - 1]),
            dapo_gen_groups=int(dapo[steps - 1]),
            saved_frac=1.0 - float(mine[steps - 1]) / float(dapo[steps - 1]),
        )
    return out


def replay_policies(
    log: RewardLog, policies: list[ReplayPolicy], config: SchedulerConfig | None = None, shape: StepShape | None = None
) -> dict[str, dict[str, Any]]:
    """:func:`replay` for each policy, keyed by policy name (classification done once).

    With ``shape`` each summary also gets ``simulated``: the step loop rebuilt over the kept lines
    (:func:`~snooze.analysis.stepsim.simulate_steps`) against the same loop over every line, compared
    over the steps both complete: ``steps``, ``gen_groups``, ``dapo_gen_groups``, ``saved_frac``, and
    ``dapo_sim_matches_log`` (the loop over every line reproduces the logged step count: the shape is right).
    """
    cfg = config if config is not None else SchedulerConfig(group_size=log.group_size)
    outcomes = _classify(log, cfg)
    table, prompt, rank = _encounter_matrix(log, outcomes)
    logger.info("replaying %d groups of %d prompts (depth %d)", len(log), table.shape[0], table.shape[1])
    signal = outcomes == SIGNAL
    dapo = None
    if shape is not None:
        dapo = simulate_steps(signal, shape.batch_size, shape.gen_batch_size, shape.max_gen_rounds)
    names = {n: i for i, n in enumerate(sorted(set(log.datasets)))}
    dataset = np.fromiter((names[n] for n in log.datasets), dtype=np.int64, count=len(log))
    out: dict[str, dict[str, Any]] = {}
    for pol in policies:
        skip_table, regressed = _replay_table(table, pol.factor, pol.snooze_hard)
        skipped = skip_table[prompt, rank]
        out[pol.name] = _summarise(log, outcomes, skipped, regressed, pol.factor)
        if shape is not None and dapo is not None:
            out[pol.name]["simulated"] = _simulated(
                signal, skipped, dataset, dapo, int(np.unique(log.steps).shape[0]), shape
            )
    return out

"""Counterfactual replay: what would ``filter`` or ``snooze:k`` have skipped in a logged run?

Every logged group is one encounter of its prompt. Each policy replays each prompt's encounters in
log order, and the policy is the core's own (:mod:`snooze.core.policies`, built from a
:class:`~snooze.SchedulerConfig`): its ``report`` updates a prompt memory from each rolled-out
encounter, and an encounter is skipped as the scheduler's draw skips it (snooze counter above 0:
skipped, the counter goes down by 1; retired: passed over). So:

- ``snooze:k``: a rolled-out encounter that is too easy *adds* ``k`` to the counter (and, with hard
  snoozing, a too-hard one adds ``k`` too); ``backoff`` and the other ``SnoozeOptions`` replay as well.
- ``filter``: the first too-easy rollout retires the prompt; every later encounter is skipped.

**Which policies replay.** Those whose decisions are each prompt's own: no skip mask, no run-level
state (``filter``, ``snooze`` under ``skip="counter"``, ``dynamic_sampling``, ``grpo``, and a policy of
your own of that kind). ``skip="history"`` and ``predictive`` do not, and the replay refuses them:
their skips draw random numbers from the scheduler's streams (dataset, epoch, clock of groups
generated), which a log of another policy's run does not hold, and ``predictive`` compares each prompt
with the signal rate of the draws that would *replace* the skipped ones, draws the log never made. A
replay of them would be a different random process, not the policy.

**Cost.** Linear in the log (:mod:`snooze.analysis._chains`): while many prompts reach a depth, the
encounters of that depth are one vectorised report (every prompt's first encounter together, then
every second one, ...); the few deep prompts left are walked alone, reusing the policy's own answer
to a (prompt state, outcome) pair it has given before, so a prompt logged 20,000 times beside 20,000
prompts logged once costs a few real reports, not 20,000 (``benchmarks/replay_skewed.py``). A
prompt's own encounters stay in log order; prompts do not interact, so the order between them does
not matter.

A skipped encounter saves its group: its rollouts (its count of rewards in the log, ``G``) and, where the log's
lines give them (``tokens``, ``docs/reward-log.md``), its generated tokens. Every count below is given in groups,
rollouts and tokens (``None``, "tokens unknown", where not every line gives its tokens: never guessed). If the
*logged* group of a skipped encounter had signal, the policy would have missed that signal group.

Caveat: replaying a DAPO log assumes each prompt's outcomes would have been the same. In a real
snooze run the skipped encounters are replaced by other draws and the model trains on a different
sequence of batches, so its later outcomes (and its encounters) differ. ``docs/offline-analysis.md``
discusses how large that gap is in practice.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from snooze._kit.checks import as_bool, as_int, as_list
from snooze.analysis._chains import Encounters, walk
from snooze.analysis.estimate import RESAMPLES, UNITS, headline
from snooze.analysis.stepsim import infer_gen_size, interleave_kept, simulate_steps
from snooze.core.classify import FLAT, OUTCOME_NAMES, SIGNAL, TOO_EASY, TOO_HARD, classify
from snooze.core.config import SchedulerConfig
from snooze.core.errors import ConfigError
from snooze.core.policies import Context, Policy, make_policy
from snooze.core.policies.snooze import SnoozeOptions
from snooze.logs import RewardLog

__all__ = ["ReplayPolicy", "StepShape", "replay", "replay_policies", "policy_names", "sizes"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReplayPolicy:
    """One policy to replay."""

    name: str
    """Key in the output: ``filter``, ``snooze:<k>`` or ``snooze-hard:<k>`` (any name with ``config``)."""

    factor: int | None
    """Snooze factor ``k``; ``None`` is ``filter`` (retire on the first too-easy outcome)."""

    snooze_hard: bool = False
    """Also snooze too-hard groups (by the same factor)."""

    config: SchedulerConfig | None = None
    """The policy as a scheduler config (its ``policy`` and ``options``); ``None``: from ``factor`` and
    ``snooze_hard``."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(
                f"ReplayPolicy(name={self.name!r}): must be a non-empty str, the policy's key in the output"
            )
        if self.factor is not None:
            object.__setattr__(self, "factor", as_int(self.factor, f"ReplayPolicy({self.name!r}).factor", 0))
        object.__setattr__(self, "snooze_hard", as_bool(self.snooze_hard, f"ReplayPolicy({self.name!r}).snooze_hard"))
        if self.config is not None and not isinstance(self.config, SchedulerConfig):
            raise ConfigError(
                f"ReplayPolicy({self.name!r}).config={self.config!r}: must be a SchedulerConfig or None "
                f"(got {type(self.config).__name__})"
            )

    def scheduler_config(self) -> SchedulerConfig:
        """The config whose policy is replayed."""
        if self.config is not None:
            return self.config
        if self.factor is None:
            return SchedulerConfig(policy="filter")
        return SchedulerConfig(policy="snooze", options=SnoozeOptions(factor=self.factor, hard=self.snooze_hard))


_MAKES = " (policy_names(...) makes one)"


def _is_policy(value: Any) -> bool:
    return isinstance(value, ReplayPolicy)


def policy_names(factors: Iterable[int], snooze_hard: bool = False) -> list[ReplayPolicy]:
    """``filter``, then ``snooze:<k>`` for each factor, then ``snooze-hard:<k>`` when asked.

    ``factors``: an iterable of distinct integers >= 0 (read once: a generator is fine); a repeated factor
    is a :class:`~snooze.ConfigError` (its results would share one key)."""
    factors = as_list(factors, "policy_names(factors)", "snooze factors (integers >= 0)", "a factor", lambda k: True)
    snooze_hard = as_bool(snooze_hard, "policy_names(snooze_hard)")
    for k in factors:
        as_int(k, "snooze factor", 0)
    repeated = sorted({int(k) for k in factors if factors.count(k) > 1})
    if repeated:
        raise ConfigError(
            f"policy_names(factors={factors!r}): factor {repeated[0]} is given twice; each policy's result is "
            "keyed by its name, so give each factor once"
        )
    out = [ReplayPolicy("filter", None)]
    out += [ReplayPolicy(f"snooze:{k}", k) for k in factors]
    if snooze_hard:
        out += [ReplayPolicy(f"snooze-hard:{k}", k, snooze_hard=True) for k in factors]
    return out


def _replayable(pol: ReplayPolicy, group_size: int) -> Policy:
    """The core's policy for ``pol``, or a :class:`ConfigError` saying why it cannot be replayed (module docstring)."""
    cfg = pol.scheduler_config().replace(group_size=group_size)
    assert cfg.options is not None  # (a checked config holds its policy's options)
    policy = make_policy(cfg.policy, cfg.options, Context(("log",), (1,), group_size, 0))
    if policy.skip_mask is not None or policy.state_dict():
        raise ConfigError(
            f"replay policy {pol.name!r} ({cfg.policy}): a policy with a skip mask or run-level state does "
            "not replay from a log (its skips depend on the scheduler's streams and replacement draws; "
            "snooze.analysis.replay's docstring says why)"
        )
    return policy


def _equal_signal_savings(saved: float, missed: float) -> float | None:
    """Generation saved *at equal signal groups*: ``1 - (1 - saved) / (1 - missed)``.

    ``saved_frac`` counts skipped groups of the logged run, but a real run must replace every missed
    signal group by generating more. If the replacements come from the same mix, generation per
    signal group scales by ``(1 - saved) / (1 - missed)``. ``None`` when every signal group is missed.
    """
    return None if missed >= 1.0 else 1.0 - (1.0 - saved) / (1.0 - missed)


def sizes(log: RewardLog) -> dict[str, np.ndarray | None]:
    """Each group's size in each unit of :data:`~snooze.analysis.estimate.UNITS`: ``rollouts`` (its rewards) and
    ``tokens`` (its line's ``tokens``; ``None`` unless every line gives them: a part would not be the run's)."""
    return {"rollouts": log.rollouts, "tokens": log.tokens if log.tokens_known else None}


def _total(size: np.ndarray | None, mask: np.ndarray) -> int | None:
    """The total of ``size`` over ``mask``; ``None`` when the sizes are not known."""
    return None if size is None else int(np.sum(size, where=mask))  # (no copy of the masked sizes)


def _summarise(
    log: RewardLog, outcomes: np.ndarray, skipped: np.ndarray, regressed: int, factor: int | None
) -> dict[str, Any]:
    n = len(log)
    rollouts, tokens = (sizes(log)[u] for u in UNITS)
    n_skip = int(np.count_nonzero(skipped))
    signal = outcomes == SIGNAL
    n_signal = int(np.count_nonzero(signal))
    missed = int(np.count_nonzero(skipped & signal))
    by_outcome = np.bincount(outcomes[skipped].astype(np.int64), minlength=4)
    rollouts_by = [_total(rollouts, skipped & (outcomes == i)) for i in range(4)]
    every = np.ones(n, dtype=bool)
    out: dict[str, Any] = {
        "factor": factor,
        "total_groups": n,
        "total_rollouts": _total(rollouts, every),
        "total_tokens": _total(tokens, every),
        "tokens_known": tokens is not None,
        "signal_groups": n_signal,
        "signal_rollouts": _total(rollouts, signal),
        "skipped_groups": n_skip,
        "skipped_rollouts": _total(rollouts, skipped),
        "skipped_tokens": _total(tokens, skipped),
        "missed_signal_groups": missed,
        "missed_signal_rollouts": _total(rollouts, skipped & signal),
        "missed_signal_tokens": _total(tokens, skipped & signal),
        "saved_frac": n_skip / n,
        "missed_signal_frac": missed / n_signal if n_signal else 0.0,
        "predicted_saved_frac": _equal_signal_savings(n_skip / n, missed / n_signal if n_signal else 0.0),
        "skipped_by_outcome": {OUTCOME_NAMES[i]: int(by_outcome[i]) for i in (SIGNAL, TOO_EASY, TOO_HARD, FLAT)},
        "skipped_rollouts_by_outcome": {OUTCOME_NAMES[i]: rollouts_by[i] for i in (SIGNAL, TOO_EASY, TOO_HARD, FLAT)},
        "regressed": regressed,
        "datasets": {},
    }
    names = np.asarray(log.datasets)
    for name in sorted(set(log.datasets)):
        mine = names == name
        out["datasets"][name] = {
            "total_groups": int(np.count_nonzero(mine)),
            "skipped_groups": int(np.count_nonzero(skipped & mine)),
            "missed_signal_groups": int(np.count_nonzero(skipped & mine & signal)),
            "total_rollouts": _total(rollouts, mine),
            "skipped_rollouts": _total(rollouts, skipped & mine),
            "missed_signal_rollouts": _total(rollouts, skipped & mine & signal),
            "total_tokens": _total(tokens, mine),
            "skipped_tokens": _total(tokens, skipped & mine),
        }
    return out


def replay(
    log: RewardLog, policy: ReplayPolicy, config: SchedulerConfig | None = None, shape: StepShape | None = None
) -> dict[str, Any]:
    """Replay one policy over ``log``; see the module docstring. Returns a JSON-safe summary.

    ``config`` supplies the classification thresholds (``easy_threshold``, ``hard_threshold``,
    ``signal_tol``, ``reward_range``); its policy and factor fields are ignored.
    """
    if not isinstance(policy, ReplayPolicy):
        raise ConfigError(
            f"replay(policy={policy!r}): must be a ReplayPolicy (e.g. policy_names([1])[1]), "
            f"got {type(policy).__name__}"
        )
    return replay_policies(log, [policy], config, shape)[policy.name]


def _classify(log: RewardLog, cfg: SchedulerConfig) -> np.ndarray:
    return classify(
        log.rewards, cfg.reward_range, cfg.easy_threshold, cfg.hard_threshold, cfg.signal_tol, cfg.reward_band
    )


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
        _check_log(log, "StepShape.infer")
        for name, value in (
            ("batch_size", batch_size),
            ("gen_batch_size", gen_batch_size),
            ("max_gen_rounds", max_gen_rounds),
        ):
            if value is not None:
                as_int(value, name, 1)
        gen = gen_batch_size if gen_batch_size is not None else infer_gen_size(log.steps)
        if gen < 1:
            return None
        _, per_step = np.unique(log.steps, return_counts=True)
        rounds = max_gen_rounds if max_gen_rounds is not None else int(-(-per_step.max() // gen))
        return cls(batch_size if batch_size is not None else gen, gen, rounds)


def _simulated(
    signal: np.ndarray,
    skipped: np.ndarray,
    dataset: np.ndarray,
    dapo: np.ndarray,
    n_steps: int,
    shape: StepShape,
    size: dict[str, np.ndarray | None],
) -> dict[str, Any]:
    order = interleave_kept(dataset, ~skipped)
    mine = simulate_steps(signal[order], shape.batch_size, shape.gen_batch_size, shape.max_gen_rounds)
    steps = min(mine.shape[0], dapo.shape[0])
    out: dict[str, Any] = {"steps": steps, "dapo_sim_matches_log": bool(dapo.shape[0] == n_steps)}
    if steps:
        gen, dapo_gen = int(mine[steps - 1]), int(dapo[steps - 1])
        out.update(gen_groups=gen, dapo_gen_groups=dapo_gen, saved_frac=1.0 - gen / dapo_gen)
        for unit, each in size.items():  # the sizes of the lines each loop took: the first ones of its stream
            out[f"gen_{unit}"] = out[f"dapo_gen_{unit}"] = out[f"{unit}_saved_frac"] = None
            if each is not None:
                mine_u, dapo_u = int(each[order][:gen].sum()), int(each[:dapo_gen].sum())
                out[f"gen_{unit}"], out[f"dapo_gen_{unit}"] = mine_u, dapo_u
                out[f"{unit}_saved_frac"] = 1.0 - mine_u / dapo_u if dapo_u else None
    return out


MAX_RESAMPLES = 100_000
"""The most bootstrap resamples :func:`replay_policies` takes (100x the default; more is refused, not slow)."""


def _check_log(log: Any, what: str) -> None:
    if not isinstance(log, RewardLog):
        raise ConfigError(
            f"{what}(log={log!r:.80}): must be a RewardLog (snooze.logs.read_reward_log(path) reads one), "
            f"got {type(log).__name__}"
        )


def replay_policies(
    log: RewardLog,
    policies: Iterable[ReplayPolicy],
    config: SchedulerConfig | None = None,
    shape: StepShape | None = None,
    resamples: int = RESAMPLES,
) -> dict[str, dict[str, Any]]:
    """:func:`replay` for each policy, keyed by policy name (classification done once).

    Each summary gives every count in groups, rollouts (``*_rollouts``: each group's count of rewards) and
    tokens (``*_tokens``, ``None`` unless every line gives its ``tokens``; ``tokens_known`` says which), and gets
    ``headline`` (:func:`snooze.analysis.estimate.headline`: the rollouts, groups and tokens the policy would
    have generated to train on as many signal groups as the log holds, with a bootstrap interval over the
    log's prompts of ``resamples`` resamples, the signal groups it would have skipped with their share of all
    the log's signal, and the share of its skipped encounters that had signal). With ``shape`` each
    summary also gets ``simulated``: the step loop rebuilt over the kept lines
    (:func:`~snooze.analysis.stepsim.simulate_steps`) against the same loop over every line, compared
    over the steps both complete: ``steps``, ``gen_groups``, ``dapo_gen_groups``, ``saved_frac``, the same in
    rollouts and tokens (``gen_rollouts``, ``dapo_gen_rollouts``, ``rollouts_saved_frac``, ``gen_tokens``, ...:
    the sizes of the lines each loop took), and ``dapo_sim_matches_log`` (the loop over every line reproduces
    the logged step count: the shape is right).

    ``policies`` is read once (a generator is fine); two policies of one name are a
    :class:`~snooze.ConfigError`, as is ``resamples`` outside ``[1, MAX_RESAMPLES]`` (100,000), checked
    before any work.
    """
    _check_log(log, "replay")
    policies = as_list(policies, "replay_policies(policies)", "ReplayPolicy", "a ReplayPolicy", _is_policy, _MAKES)
    names = [pol.name for pol in policies]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(
            f"replay_policies: two policies are named {twice[0]!r}; each result is keyed by its policy's name, "
            "so give each policy its own name"
        )
    if config is not None and not isinstance(config, SchedulerConfig):
        raise ConfigError(
            f"replay(config={config!r:.80}): must be a SchedulerConfig or None, got {type(config).__name__}"
        )
    if shape is not None and not isinstance(shape, StepShape):
        raise ConfigError(
            f"replay(shape={shape!r:.80}): must be a StepShape (StepShape.infer(log) makes one) or None, "
            f"got {type(shape).__name__}"
        )
    resamples = as_int(resamples, "resamples", 1, MAX_RESAMPLES)
    cfg = config if config is not None else SchedulerConfig(group_size=log.group_size)
    outcomes = _classify(log, cfg)
    replayed = {pol.name: _replayable(pol, log.group_size) for pol in policies}  # refused before any work
    prompt, keys = log.prompt_index()
    enc = Encounters(prompt, len(keys))
    logger.info("replaying %d groups of %d prompts (depth %d)", len(log), len(keys), enc.active.shape[0])
    signal = outcomes == SIGNAL
    dapo = None
    if shape is not None:
        dapo = simulate_steps(signal, shape.batch_size, shape.gen_batch_size, shape.max_gen_rounds)
    index = {n: i for i, n in enumerate(sorted(set(log.datasets)))}
    dataset = np.fromiter((index[n] for n in log.datasets), dtype=np.int64, count=len(log))
    out: dict[str, dict[str, Any]] = {}
    masks: dict[str, np.ndarray] = {}
    for pol in policies:
        skipped, regressed = walk(enc, replayed[pol.name], outcomes, log.rewards, cfg.reward_range)
        masks[pol.name] = skipped
        out[pol.name] = _summarise(log, outcomes, skipped, regressed, pol.factor)
        if shape is not None and dapo is not None:
            out[pol.name]["simulated"] = _simulated(
                signal, skipped, dataset, dapo, int(np.unique(log.steps).shape[0]), shape, sizes(log)
            )
    for name, best in headline(prompt, signal, masks, resamples, sizes=sizes(log)).items():
        out[name]["headline"] = best
    return out

"""What a replay knows of the run a reward log comes from: its step loop and whether it was a DAPO run.

The log's header (:class:`~snooze.logs.RewardLogHeader`) says it: the sizes of the run's step loop, its
policy, and whether it dropped groups without signal and generated again (dynamic sampling). A log without
a header is taken to be a DAPO run whose sizes are read off its lines (:meth:`StepShape.infer`), and every
such assumption is listed, for the command line to show. A size given by the caller that contradicts the
header is refused unless ``override`` says to use it.

The step simulation (:mod:`snooze.analysis.stepsim`) rebuilds DAPO's step loop over the replayed stream. It
holds only for a log of a run with dynamic sampling: a plain GRPO run trains on every group, one round a
step, so its steps say nothing of how many rounds a DAPO step would have taken. :attr:`LoggedRun.sim_na`
says why it does not hold, when it does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from snooze.analysis.replay import StepShape
from snooze.core.errors import ConfigError
from snooze.logs import RewardLog, RewardLogHeader

__all__ = ["LoggedRun", "logged_run", "DAPO_POLICIES"]

DAPO_POLICIES = ("dynamic_sampling",)
"""Policies whose log holds every encounter of a DAPO run: what the replay compares a policy against."""

_SIZES = ("batch_size", "gen_batch_size", "max_gen_rounds")


@dataclass(frozen=True)
class LoggedRun:
    """The logged run as the replay sees it."""

    shape: StepShape | None
    """The run's step loop (``None``: no step simulation; :attr:`sim_na` says why)."""

    policy: str
    """The run's policy (``unknown`` when the log does not say)."""

    dynamic_sampling: bool | None
    """Whether the run generated again for groups without signal; ``None``: not known."""

    has_header: bool
    """Whether the log has a header (else everything here was assumed or inferred)."""

    assumed: list[str] = field(default_factory=list)
    """What was assumed or inferred because the log does not say (one sentence each)."""

    overridden: list[str] = field(default_factory=list)
    """Header fields replaced by the caller's values (``override``)."""

    sim_na: str | None = None
    """Why the step simulation does not hold for this log (``None``: it does)."""

    warnings: list[str] = field(default_factory=list)
    """What the reader of a replay of this log must know (e.g. the DAPO comparison does not apply)."""


def _sizes(
    log: RewardLog, header: RewardLogHeader, given: dict[str, int], override: bool
) -> tuple[dict[str, int], list[str], list[str]]:
    """The sizes to use: the header's, the caller's where the header has none (or ``override``)."""
    have = header.sizes()
    clash = {k: (v, have[k]) for k, v in given.items() if k in have and v != have[k]}
    if clash and not override:
        shown = ", ".join(f"--{k.replace('_', '-')} {v} (the header: {h})" for k, (v, h) in clash.items())
        raise ConfigError(
            f"{log.path}: {shown} contradicts the log's header (written by {header.source or 'an unnamed writer'}); "
            "leave the option out to replay with the header's sizes, or pass --override-header to use yours"
        )
    overridden = [f"{k}: {h} in the header, {v} given" for k, (v, h) in clash.items()]
    sizes = {**have, **given}
    missing = [k for k in _SIZES if k not in sizes]
    notes = [f"{k}: not in the header; inferred from the lines" for k in missing]
    return sizes, notes, overridden


def logged_run(
    log: RewardLog,
    batch_size: int | None = None,
    gen_batch_size: int | None = None,
    max_gen_rounds: int | None = None,
    override: bool = False,
) -> LoggedRun:
    """What the replay of ``log`` assumes of its run (module docstring). Sizes below 1 are a ConfigError."""
    given = {
        k: v
        for k, v in (("batch_size", batch_size), ("gen_batch_size", gen_batch_size), ("max_gen_rounds", max_gen_rounds))
        if v is not None
    }
    StepShape.infer(log, **given)  # checks the given sizes (>= 1) before anything else
    header = log.header
    if header is None:
        shape = StepShape.infer(log, **given)
        return LoggedRun(
            shape,
            "unknown",
            None,
            False,
            assumed=_assumed(log, shape, given),
            sim_na=None if shape is not None else _NO_ROUND,
            warnings=[],
        )
    sizes, notes, overridden = _sizes(log, header, given, override)
    shape = StepShape.infer(log, **sizes)
    if header.dynamic_sampling is False:
        notes = []  # the sizes feed only the step simulation, which does not hold for such a log
    warnings = _warnings(header.policy, header.dynamic_sampling)
    sim_na = None
    if header.dynamic_sampling is False:
        sim_na = (
            f"the logged run had no dynamic sampling (policy {header.policy}): each step trained on the groups of "
            "one round, so its steps say nothing of the rounds a DAPO step takes"
        )
    elif header.dynamic_sampling is None:
        sim_na = "the header does not say whether the run used dynamic sampling (policy unknown)"
    elif shape is None:
        sim_na = _NO_ROUND
    return LoggedRun(shape, header.policy, header.dynamic_sampling, True, notes, overridden, sim_na, warnings)


_NO_ROUND = "no generation batch size could be inferred from the lines; pass --gen-batch-size"


def _assumed(log: RewardLog, shape: StepShape | None, given: dict[str, int]) -> list[str]:
    out = [
        "no header: taken to be a DAPO run (dynamic sampling) that logged every generated group",
        f"group_size {log.group_size}: the first line's",
    ]
    if shape is None:
        return out
    why = {
        "gen_batch_size": "the gcd of the groups logged per step",
        "batch_size": "= gen_batch_size, DAPO's default",
        "max_gen_rounds": "the most rounds a logged step took",
    }
    for name in _SIZES:
        if name not in given:
            out.append(f"{name} {getattr(shape, name)}: {why[name]}")
    return out


def _warnings(policy: str, dynamic_sampling: bool | None) -> list[str]:
    if dynamic_sampling is False:
        return [
            f"the log is of a {policy} run without dynamic sampling: the comparison with DAPO does not apply. The "
            "estimates say what each policy would skip of this run's encounters and the generation it would need "
            "for the same number of signal groups, not what it saves over a DAPO run"
        ]
    if policy not in DAPO_POLICIES and policy != "unknown":
        return [
            f"the log is of a {policy} run, which skipped prompts itself: its skipped encounters are not in the "
            "log, so the replay measures skipping on top of that run, not against DAPO"
        ]
    if policy == "unknown":
        return ["the header does not name the run's policy: the estimates take the log to hold every encounter"]
    return []

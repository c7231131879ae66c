"""What a replay says to do: DAPO's rounds per step on the logged run, the docs' rule, and the lines to paste.

The docs' rule (``docs/sizing.md``, "When to turn skipping on"): run DAPO's dynamic sampling
(``policy="dynamic_sampling"``), and turn skipping on, with the recommended setting (``snooze.RECOMMENDED``, the
default: snooze factor 1, the surplus carried), when DAPO needs more than about 2 generation rounds a step. A
replay can answer that from any log:

- a DAPO log holds its rounds (groups per step over the generation batch): they are read off it;
- any other log (plain GRPO, a run that skipped prompts) holds each step's share of groups with signal, and
  DAPO's rounds at that share follow (:func:`snooze.analysis.stepsim.dapo_rounds`). On a plain GRPO log of
  the reference trainer this is checked against DAPO forked from that run's own model (within 10%) and
  against a paired DAPO run, which trains its own model and wastes more late (``docs/offline-analysis.md``).

Beside it, what this project *measured* each replayed policy to cost in held-out accuracy and to save, read
from a table shipped with the package (``measured_costs.json``, from ``docs/results.md``, which a test keeps
in agreement), so a policy that skips the most (``filter``) carries its measured loss beside its saving. The
verdict never recommends anything but the default or the recommended setting: the replay measures
generation, never accuracy.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib.resources import files
from typing import Any

import numpy as np

from snooze._kit.json import parse_json
from snooze.analysis.replay import _classify
from snooze.analysis.replay import sizes as group_sizes
from snooze.analysis.stepsim import dapo_rounds, logged_rounds
from snooze.core.classify import SIGNAL
from snooze.core.config import RECOMMENDED, SchedulerConfig
from snooze.core.errors import DataError

__all__ = [
    "ROUNDS_RULE",
    "RECOMMENDED_REPLAY",
    "measured_costs",
    "cost_of",
    "framework",
    "next_lines",
    "dapo_rounds_of",
    "verdict",
]

ROUNDS_RULE = 2.0
"""DAPO's rounds per step above which the docs say to turn skipping on (docs/sizing.md)."""

RECOMMENDED_REPLAY = f"snooze:{RECOMMENDED['options']['factor']}"
"""The replayed policy of the recommended setting (its carried surplus is no skip, so a replay cannot see it)."""

_DAPO = "dynamic_sampling"


@cache
def measured_costs() -> dict[str, dict[str, Any]]:
    """The shipped table (``measured_costs.json``), keyed by policy (``filter``, ``snooze:1``, ``recommended``...)."""
    text = files("snooze.analysis").joinpath("measured_costs.json").read_bytes()
    data = parse_json(
        text, "snooze/analysis/measured_costs.json", DataError, "reinstall snooze (the file ships with it)"
    )
    return {entry["policy"]: entry for entry in data["policies"]}


def cost_of(policy: str) -> tuple[dict[str, Any] | None, str]:
    """The measured entry of a replayed policy's name, and a note when none was measured for it exactly."""
    table = measured_costs()
    if policy in table:
        return table[policy], ""
    kind, _, factor = policy.partition(":")
    if kind == "snooze" and factor.isdigit():
        if int(factor) == 0:
            return None, "DAPO itself (factor 0 skips nothing)"
        below = sorted(
            int(k.split(":")[1]) for k in table if k.startswith("snooze:") and int(k.split(":")[1]) < int(factor)
        )
        if below:
            k = below[-1]
            worst = min(table[f"snooze:{k}"]["gaps"])
            return None, f"not measured; factor {k}, which keeps prompts away less long, lost up to {-worst:.1f} points"
    return None, "not measured"


def framework(source: str) -> str:
    """``verl``, ``trl``, ``reference`` or ``library``: whose lines to print, from the header's ``source``."""
    s = source.lower()
    if "verl" in s:
        return "verl"
    if "trl" in s:
        return "trl"
    if s.startswith("snooze.trainer"):
        return "reference"
    return "library"


REFERENCE_ARMS = {True: "dynamic_sampling,snooze-f1-carry", False: "dynamic_sampling"}
"""``snooze compare`` arms to run next, by whether to turn skipping on (``snooze-f1-carry``: the recommended
setting's arm, ``snooze.experiments.compare.RECOMMENDED_ARM``, which a test keeps equal)."""


def _setting(turn_on: bool) -> dict[str, Any]:
    """The setting to paste: ``snooze.RECOMMENDED`` (its options as a plain dict), or DAPO's."""
    return {**RECOMMENDED, "options": dict(RECOMMENDED["options"])} if turn_on else {"policy": _DAPO}


def next_lines(kind: str, turn_on: bool) -> list[str]:
    """The lines to paste for ``kind`` (:func:`framework`): the recommended setting, or DAPO
    (``policy="dynamic_sampling"``)."""
    setting = _setting(turn_on)
    if kind == "verl":
        lines = ["trainer.v1.trainer_mode=snooze"]
        for key, value in setting.items():
            if isinstance(value, Mapping):
                lines += [f"+trainer.v1.snooze.{key}.{k}={v}" for k, v in value.items()]
            else:
                lines.append(f"+trainer.v1.snooze.{key}={value}")
        return lines
    if kind == "trl":
        return [f"SnoozeGRPOTrainer(..., snooze_config={setting!r})"]
    if kind == "reference":
        arms = REFERENCE_ARMS[turn_on]
        return [f"snooze compare --out runs/next --arms {arms}  # with the logged run's --profile/--tasks"]
    shown = ", ".join(f"{k}={v!r}" for k, v in setting.items())
    return [f"SchedulerConfig(..., {shown})"]


_IN_UNITS = ("rollouts_saved_frac", "rollouts_saved_interval", "tokens_saved_frac", "tokens_saved_interval")
"""A headline's savings in rollouts and tokens, which the verdict repeats beside its saving in groups."""


def _in_units(h: Mapping[str, Any]) -> dict[str, Any]:
    """The savings of a headline in rollouts and tokens (each ``None`` where not known), and ``tokens_known``."""
    return {**{k: h.get(k) for k in _IN_UNITS}, "tokens_known": bool(h.get("tokens_known", False))}


def _floor(policy: str) -> str:
    """Why an estimate from a log that is not a DAPO run's is a floor of what a DAPO run would take."""
    if policy not in ("grpo", "unknown"):
        return "the run skipped prompts, mostly too easy ones, which a DAPO run would roll out"
    return (
        "the rounds of DAPO on this run's model; a DAPO run of as many steps trains on more signal, so its model "
        "is further on and wastes more late (measured: docs/offline-analysis.md)"
    )


def dapo_rounds_of(log: Any, run: Any, config: SchedulerConfig) -> dict[str, Any]:
    """DAPO's rounds early and late on ``log``'s run (``run``: its :class:`~snooze.analysis.logrun.LoggedRun`;
    ``config``: the classification): read off a DAPO log (``logged_rounds``), and estimated from the share of
    groups with signal for any log (``rounds``); see :meth:`verdict`'s ``dapo_rounds``."""
    signal = _classify(log, config) == SIGNAL
    is_dapo = run.dynamic_sampling is not False and run.policy in (_DAPO, "unknown") and run.shape is not None
    _, per_step = np.unique(log.steps, return_counts=True)
    if is_dapo:
        batch, gen, cap = run.shape.batch_size, run.shape.gen_batch_size, run.shape.max_gen_rounds
    else:  # the DAPO run of this one: its batch, one batch a round, the library's round limit
        sizes = log.header.sizes() if log.header is not None else {}
        batch = sizes.get("batch_size") or int(np.median(per_step))
        gen = sizes.get("gen_batch_size") or batch
        cap = SchedulerConfig().max_gen_rounds
    windows = dapo_rounds(log.steps, signal, batch, gen, cap)
    size = group_sizes(log)
    for w in windows.values():
        mine = (log.steps >= w["first_step"]) & (log.steps <= w["last_step"])
        for unit, each in size.items():  # the window's groups in rollouts and tokens (None: not known)
            w[unit] = None if each is None else int(each[mine].sum())
        if is_dapo:
            w["logged_rounds"] = logged_rounds(log.steps, gen, w)
    return {
        "basis": "logged" if is_dapo else "estimated",
        "floor": None if is_dapo else _floor(run.policy),
        "batch_size": batch,
        "gen_batch_size": gen,
        "max_gen_rounds": cap,
        **windows,
    }


def verdict(
    log: Any,
    run: Any,
    config: SchedulerConfig,
    headlines: Mapping[str, Mapping[str, Any]],
    recommended: Mapping[str, Any],
) -> dict[str, Any]:
    """The verdict block of a replay (module docstring), JSON-safe.

    ``log``: the replayed :class:`~snooze.logs.RewardLog`; ``run``: its :class:`~snooze.analysis.logrun.LoggedRun`;
    ``config``: the classification the replay used; ``headlines``: each replayed policy's ``headline``;
    ``recommended``: the headline of :data:`RECOMMENDED_REPLAY` (replayed or not among them). Returns
    ``dapo_rounds`` (``basis``: ``logged`` or ``estimated``, ``floor``: why an estimate is a floor, the sizes,
    ``early`` and ``late``, each with its ``groups``, ``rollouts`` and ``tokens``),
    ``rule_rounds``, ``turn_on``, ``recommended`` (its replayed saving and interval, in groups, rollouts
    ``rollouts_saved_frac`` and tokens ``tokens_saved_frac``, each with its interval), ``costs`` (per replayed
    policy: saving here in the same three units, missed signal in groups and rollouts, the measured entry or a
    note),
    ``framework`` and ``lines``."""
    rounds = dapo_rounds_of(log, run, config)
    late = rounds["late"].get("logged_rounds", rounds["late"]["rounds"])
    turn_on = late > ROUNDS_RULE
    kind = framework(log.header.source if log.header is not None else "")
    rec = recommended
    costs = []
    for name, h in headlines.items():
        entry, note = cost_of(name)
        costs.append(
            {
                "policy": name,
                "saved_frac": h["saved_frac"],
                "saved_interval": h["saved_interval"],
                **_in_units(h),
                "missed_signal": h["skipped_with_signal"],
                "missed_signal_rollouts": h.get("skipped_rollouts_with_signal"),
                "missed_share": h["missed_share"],
                "measured": entry,
                "note": note,
            }
        )
    return {
        "dapo_rounds": rounds,
        "rule_rounds": ROUNDS_RULE,
        "turn_on": turn_on,
        "recommended": {
            "replayed_as": RECOMMENDED_REPLAY,
            "saved_frac": rec["saved_frac"],
            "saved_interval": rec["saved_interval"],
            **_in_units(rec),
            "measured": measured_costs()["recommended"],
        },
        "costs": costs,
        "framework": kind,
        "lines": next_lines(kind, turn_on),
    }

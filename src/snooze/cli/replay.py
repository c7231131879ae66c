"""``snooze replay LOG --out DIR``: what would filter / snooze:k have saved on a logged run?

The log's header gives the run's sizes and policy (:mod:`snooze.analysis.logrun`); the output is the verdict
(:mod:`snooze.analysis.verdict`), one headline line per policy and a details section
(:mod:`snooze.cli._replay_report`), and ``replay.json``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

HELP = (
    "Replay a reward log under filter and snooze:k: a verdict (DAPO's rounds per step, what to turn on, the lines "
    "to paste), then the rollouts each would have generated (with an interval; its generated tokens where the log "
    "gives them) and the signal it would have skipped."
)


FACTORS = "1,2,5,10"
"""``--factors``' default, and its example."""


def _factor(text: str) -> int:
    from snooze.cli._options import integer

    try:
        k = integer(text)  # (in 64 bits)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(
            f"{exc} (--factors: integers >= 0 separated by commas, e.g. {FACTORS})"
        ) from None
    if k < 0:
        raise argparse.ArgumentTypeError(f"{text}: a factor must be an integer >= 0, e.g. {FACTORS}")
    return k


def _factors(text: str) -> list[int]:
    from snooze.cli._options import comma_list

    return sorted(comma_list(text, _factor, FACTORS))


SCHEDULER_OPTIONS = ("group_size", "reward_range", "easy_threshold", "hard_threshold")
"""Fields of :class:`~snooze.SchedulerConfig` the replay classifies groups with (``group_size``: the log's)."""

SHAPE_OPTIONS = ("batch_size", "gen_batch_size", "max_gen_rounds")
"""Fields of :class:`~snooze.analysis.StepShape`, the logged run's step loop (the header's, else inferred)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from snooze.analysis.replay import StepShape
    from snooze.cli._options import add_options
    from snooze.cli._paths import input_file, output_folder
    from snooze.core.config import SchedulerConfig

    parser.add_argument(
        "log",
        metavar="LOG",
        type=input_file,
        help="reward log, JSONL, one line per generated group (docs/reward-log.md)",
    )
    parser.add_argument("--out", required=True, type=output_folder, help="output folder for replay.json and replay.png")
    parser.add_argument(
        "--factors", type=_factors, default=_factors(FACTORS), help=f"snooze factors to replay (default {FACTORS})"
    )
    parser.add_argument(
        "--snooze-hard", action="store_true", help="also replay snooze-hard:k (too-hard groups snoozed too)"
    )
    parser.add_argument("--no-plot", action="store_true", help="skip replay.png")
    classify = parser.add_argument_group("classification (SchedulerConfig fields)")
    add_options(classify, SchedulerConfig, SCHEDULER_OPTIONS[:1], unset="the log's header, else its first line")
    add_options(classify, SchedulerConfig, SCHEDULER_OPTIONS[1:2], unset="the log's header, else 0,1")
    add_options(classify, SchedulerConfig, SCHEDULER_OPTIONS[2:])
    loop = parser.add_argument_group("the logged run's step loop (StepShape fields)")
    add_options(loop, StepShape, SHAPE_OPTIONS, unset="the log's header, else inferred from the log")
    loop.add_argument(
        "--override-header",
        action="store_true",
        help="use the sizes and reward range given here where they contradict the log's header "
        "(without it such an option is refused)",
    )


def run(args: argparse.Namespace) -> int:
    from snooze.analysis import policy_names, replay_policies
    from snooze.analysis.logrun import logged_run
    from snooze.analysis.outputs import write_figure, write_files
    from snooze.analysis.replay import StepShape
    from snooze.cli._options import build, naming_options, values
    from snooze.cli._replay_report import print_details, print_headline, print_log, print_verdict
    from snooze.core.config import SchedulerConfig
    from snooze.core.errors import ConfigError
    from snooze.logs import read_reward_log

    options = values(args, SCHEDULER_OPTIONS)
    cfg = build(SchedulerConfig, options)  # checked before the log is read
    log = read_reward_log(args.log, group_size=args.group_size, reward_range=options.get("reward_range"))
    if log.header is not None and "reward_range" in options and cfg.reward_range != log.header.reward_range:
        if not args.override_header:
            raise ConfigError(
                f"{args.log}: --reward-range {cfg.reward_range} contradicts the log's header "
                f"({list(log.header.reward_range)}); leave it out, or pass --override-header to use yours"
            )
    log, range_note = _range_overridden(log, options.get("reward_range"))
    reward_range = options.get("reward_range") or (log.header.reward_range if log.header else cfg.reward_range)
    cfg = cfg.replace(group_size=log.group_size, reward_range=reward_range)
    shape_options = values(args, SHAPE_OPTIONS)
    with naming_options(StepShape, shape_options):
        run_info = logged_run(log, **shape_options, override=args.override_header)
    run_info.overridden.extend(range_note)
    run_info.warnings.extend(f"the log's header: {c}" for c in (log.header.caveats if log.header else ()))
    shape = run_info.shape if run_info.sim_na is None else None
    results = replay_policies(log, policy_names(args.factors, args.snooze_hard), cfg, shape)
    decided = _verdict(log, run_info, cfg, results)
    out = Path(args.out)
    report = {"log": _log_info(log, run_info), "verdict": decided, "policies": results}
    stale = [out / "replay.png"] if args.no_plot else []  # an earlier run's figure is not these numbers
    removed = write_files({out / "replay.json": (json.dumps(report, indent=2) + "\n").encode("utf-8")}, stale)
    print_log(log, run_info)
    if log.header is not None and log.header.reward_field is not None:
        print(f"rewards: the dump's field {log.header.reward_field!r} (snooze import --reward-field)")
    print_verdict(decided)
    print_headline(results, log)
    print_details(results, run_info)
    if not args.no_plot:
        from snooze.plots import plot_replay

        write_figure(out / "replay.png", lambda path: plot_replay(results, path))
    print(f"wrote {out / 'replay.json'}" + ("" if args.no_plot else f" and {out / 'replay.png'}"))
    for path in removed:
        print(f"removed {path}: an earlier run's figure (--no-plot), not of these numbers")
    print(
        "caveat: assumes each prompt's outcomes would have been the same under the replayed policy "
        "(see docs/offline-analysis.md)"
    )
    return 0


def _range_overridden(log: Any, given: tuple[float, float] | None) -> tuple[Any, list[str]]:
    """The log with its header's reward range replaced by ``--reward-range`` (only reached with
    ``--override-header`` when they differ), so what is printed and recorded is the range the replay used, and
    the warning that says so."""
    import dataclasses

    if given is None or log.header is None or tuple(given) == log.header.reward_range:
        return log, []
    note = f"reward range {list(given)} used, where the header says {list(log.header.reward_range)}"
    return dataclasses.replace(log, header=dataclasses.replace(log.header, reward_range=tuple(given))), [note]


def _verdict(log: Any, run: Any, cfg: Any, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The verdict block (:mod:`snooze.analysis.verdict`); the recommended factor is replayed for it if not asked."""
    from snooze.analysis.replay import ReplayPolicy, replay_policies
    from snooze.analysis.verdict import RECOMMENDED_REPLAY, verdict

    rec = results.get(RECOMMENDED_REPLAY)
    if rec is None:
        factor = int(RECOMMENDED_REPLAY.split(":")[1])
        rec = replay_policies(log, [ReplayPolicy(RECOMMENDED_REPLAY, factor)], cfg)[RECOMMENDED_REPLAY]
    return verdict(log, run, cfg, {n: r["headline"] for n, r in results.items()}, rec["headline"])


def _log_info(log: Any, run: Any) -> dict[str, Any]:
    """What ``replay.json`` records of the log and of what the replay took its run to be."""
    shape = run.shape
    return {
        "path": str(log.path),
        "groups": len(log),
        "rollouts": int(log.rollouts.sum()),
        "tokens": int(log.tokens.sum()) if log.tokens_known else None,
        "group_size": log.group_size,
        "header": log.header.to_dict() if log.header is not None else None,
        "policy": run.policy,
        "dynamic_sampling": run.dynamic_sampling,
        "step_loop": None if shape is None else {k: getattr(shape, k) for k in SHAPE_OPTIONS},
        "assumed": run.assumed,
        "overridden": run.overridden,
        "step_sim_na": run.sim_na,
        "warnings": run.warnings,
    }

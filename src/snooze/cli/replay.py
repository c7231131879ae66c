"""``snooze replay LOG --out DIR``: what would filter / snooze:k have saved on a logged run?"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

HELP = "Replay a reward log under filter and snooze:k and report the groups each would have skipped."


def _factors(text: str) -> list[int]:
    from snooze.cli._options import integer

    try:
        out = [integer(x) for x in text.split(",") if x.strip()]  # (each in 64 bits)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(
            f"{exc} (--factors: integers >= 0 separated by commas, e.g. 1,2,5,10)"
        ) from None
    if not out or any(k < 0 for k in out):
        raise argparse.ArgumentTypeError(f"{text!r}: expected one or more integers >= 0")
    return sorted(set(out))


SCHEDULER_OPTIONS = ("group_size", "reward_range", "easy_threshold", "hard_threshold")
"""Fields of :class:`~snooze.SchedulerConfig` the replay classifies groups with (``group_size``: the log's)."""

SHAPE_OPTIONS = ("batch_size", "gen_batch_size", "max_gen_rounds")
"""Fields of :class:`~snooze.analysis.StepShape`, the logged run's step loop (inferred when not given)."""


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
        "--factors", type=_factors, default=[1, 2, 5, 10], help="snooze factors to replay (default 1,2,5,10)"
    )
    parser.add_argument(
        "--snooze-hard", action="store_true", help="also replay snooze-hard:k (too-hard groups snoozed too)"
    )
    parser.add_argument("--no-plot", action="store_true", help="skip replay.png")
    classify = parser.add_argument_group("classification (SchedulerConfig fields)")
    add_options(classify, SchedulerConfig, SCHEDULER_OPTIONS[:1], unset="the log's first line")
    add_options(classify, SchedulerConfig, SCHEDULER_OPTIONS[1:])
    add_options(
        parser.add_argument_group("the logged run's step loop (StepShape fields)"),
        StepShape,
        SHAPE_OPTIONS,
        unset="inferred from the log",
    )


def _pct(value: object) -> str:
    return "n/a" if value is None else f"{100 * float(value):.1f}%"  # type: ignore[arg-type]


def _table(results: dict[str, dict[str, object]]) -> str:
    cols = (
        "policy",
        "skipped groups",
        "saved",
        "missed signal",
        "of signal",
        "@ equal signal",
        "step sim",
        "regressed",
    )
    widths = (16, 16, 8, 15, 11, 16, 10, 11)
    rows = ["".join(f"{c:>{w}}" if i else f"{c:<{w}}" for i, (c, w) in enumerate(zip(cols, widths)))]
    rows.append("-" * sum(widths))
    for name, r in results.items():
        cells = (
            name,
            f"{r['skipped_groups']:,}",
            _pct(r["saved_frac"]),
            f"{r['missed_signal_groups']:,}",
            _pct(r["missed_signal_frac"]),
            _pct(r["predicted_saved_frac"]),
            _pct(r.get("simulated", {}).get("saved_frac")),  # type: ignore[attr-defined]
            f"{r['regressed']:,}",
        )
        rows.append("".join(f"{c:>{w}}" if i else f"{c:<{w}}" for i, (c, w) in enumerate(zip(cells, widths))))
    return "\n".join(rows)


def _print_sim_note(results: dict[str, dict[str, Any]], shape: Any) -> None:
    if shape is None:
        print("step sim: n/a (no generation batch size could be inferred; pass --gen-batch-size)")
        return
    first = next(iter(results.values()))["simulated"]
    print(
        f"step sim: batch_size={shape.batch_size}, gen_batch_size={shape.gen_batch_size}, "
        f"max_gen_rounds={shape.max_gen_rounds}; generation saved over the steps both loops complete"
        + (
            ""
            if first["dapo_sim_matches_log"]
            else " -- WARNING: the loop over every line does not reproduce the logged steps; check these sizes"
        )
    )


def run(args: argparse.Namespace) -> int:
    from snooze.analysis import StepShape, policy_names, replay_policies
    from snooze.cli._options import build, naming_options, values
    from snooze.core.config import SchedulerConfig
    from snooze.logs import read_reward_log

    options = values(args, SCHEDULER_OPTIONS)
    cfg = build(SchedulerConfig, options)  # checked before the log is read
    log = read_reward_log(args.log, group_size=args.group_size, reward_range=cfg.reward_range)
    cfg = cfg.replace(group_size=log.group_size)
    shape_options = values(args, SHAPE_OPTIONS)
    with naming_options(StepShape, shape_options):
        shape = StepShape.infer(log, **shape_options)
    results = replay_policies(log, policy_names(args.factors, args.snooze_hard), cfg, shape)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "replay.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    n_prompts = len(set(zip(log.datasets, log.ids, strict=False)))
    print(
        f"{args.log}: {len(log):,} groups of {log.group_size} rollouts, {n_prompts:,} prompts, "
        f"steps {int(log.steps[0])}..{int(log.steps[-1])}"
    )
    print(_table(results))
    _print_sim_note(results, shape)
    if not args.no_plot:
        from snooze.plots import plot_replay

        plot_replay(results, out / "replay.png")
    print(f"wrote {out / 'replay.json'}" + ("" if args.no_plot else f" and {out / 'replay.png'}"))
    print(
        "caveat: assumes each prompt's outcomes would have been the same under the replayed policy "
        "(see docs/offline-analysis.md)"
    )
    return 0

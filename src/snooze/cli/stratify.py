"""``snooze stratify INPUT... --out DIR``: sort prompts by baseline pass rate and write a curriculum."""

from __future__ import annotations

import argparse

from snooze.cli._args import reward_range

HELP = "Stratify prompts by baseline pass rate; write prompts.csv/.parquet, curriculum.json and plots."


def _thresholds(text: str) -> tuple[float, float, float, float]:
    try:
        a, b, c, d = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected TOO_HARD,HARD,EASY,TOO_EASY, e.g. 0,0.25,0.75,1"
        ) from None
    return a, b, c, d


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="baseline completions, .jsonl or .parquet")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--group-size", type=int, default=8, help="G of the training run, for signal_prob (default 8)")
    parser.add_argument(
        "--thresholds",
        type=_thresholds,
        default=(0.0, 0.25, 0.75, 1.0),
        help="pass-rate cuts TOO_HARD,HARD,EASY,TOO_EASY (default 0,0.25,0.75,1)",
    )
    parser.add_argument(
        "--reward-range", type=reward_range, default=(0.0, 1.0), help="LOW,HIGH of rewards lists (default 0,1)"
    )
    parser.add_argument("--models", default=None, help="comma-separated baseline models that must be present")
    parser.add_argument("--keep-too-easy", action="store_true", help="do not drop too_easy prompts from the curriculum")
    parser.add_argument("--one-stage", action="store_true", help="do not postpone too_hard prompts to a second stage")
    parser.add_argument(
        "--advance-step",
        type=int,
        default=None,
        help="start stage 2 at this step (default: when efficiency < 0.25 for 3 steps)",
    )
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG plots")


def run(args: argparse.Namespace) -> int:
    from snooze.analysis.outputs import write_stratification
    from snooze.analysis.stratify import StratifyConfig, stratify

    too_hard, hard, easy, too_easy = args.thresholds
    cfg = StratifyConfig(
        group_size=args.group_size,
        too_hard=too_hard,
        hard=hard,
        easy=easy,
        too_easy=too_easy,
        reward_range=args.reward_range,
        drop_too_easy=not args.keep_too_easy,
        postpone_too_hard=not args.one_stage,
        advance_step=args.advance_step,
    )
    models = [m for m in args.models.split(",") if m] if args.models else None
    result = stratify(args.inputs, cfg, models)
    written = write_stratification(result, args.out, plots=not args.no_plot)
    cols = result.columns
    print(f"{len(cols['dataset']):,} prompts, models: {', '.join(result.models)}")
    print(
        f"{'dataset':<20}"
        + "".join(f"{s:>10}" for s in ("too_easy", "easy", "medium", "hard", "too_hard"))
        + f"{'signal_prob':>13}"
    )
    for name, mix in sorted(result.mix().items()):
        mean_sp = float(cols["signal_prob"][cols["dataset"] == name].mean())
        print(f"{name:<20}" + "".join(f"{mix[s]:>10,}" for s in mix) + f"{mean_sp:>13.3f}")
    for i, stage in enumerate(result.curriculum["stages"], start=1):
        weights = ", ".join(f"{d}={w:.3f}" for d, w in stage["weights"].items())
        print(f"stage {i} ({stage['name']}): weights {weights}")
    print("wrote " + ", ".join(str(p) for p in written))
    return 0

"""``snooze replay LOG --out DIR``: what would filter / snooze:k have saved on a logged run?"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from snooze.cli._args import reward_range
from snooze.core.errors import ConfigError

HELP = "Replay a reward log under filter and snooze:k and report the groups each would have skipped."


def _factors(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected integers separated by commas, e.g. 1,2,5,10") from None
    if not out or any(k < 0 for k in out):
        raise argparse.ArgumentTypeError(f"{text!r}: expected one or more integers >= 0")
    return sorted(set(out))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "log", metavar="LOG", help="reward log, JSONL, one line per generated group (docs/reward-log.md)"
    )
    parser.add_argument("--out", required=True, help="output folder for replay.json and replay.png")
    parser.add_argument(
        "--factors", type=_factors, default=[1, 2, 5, 10], help="snooze factors to replay (default 1,2,5,10)"
    )
    parser.add_argument(
        "--snooze-hard", action="store_true", help="also replay snooze-hard:k (too-hard groups snoozed too)"
    )
    parser.add_argument("--group-size", type=int, default=None, help="expected G (default: the first line's)")
    parser.add_argument(
        "--reward-range", type=reward_range, default=(0.0, 1.0), help="LOW,HIGH of valid rewards (default 0,1)"
    )
    parser.add_argument(
        "--easy-threshold", type=float, default=0.99, help="too easy at or above this fraction of the range"
    )
    parser.add_argument(
        "--hard-threshold", type=float, default=0.01, help="too hard at or below this fraction of the range"
    )
    parser.add_argument(
        "--batch-size", type=int, default=None, help="the logged run's batch_size (default: its gen batch size)"
    )
    parser.add_argument(
        "--gen-batch-size",
        type=int,
        default=None,
        help="the logged run's gen_batch_size (default: inferred, gcd of groups per step)",
    )
    parser.add_argument(
        "--max-gen-rounds",
        type=int,
        default=None,
        help="the logged run's max_gen_rounds (default: the most rounds a logged step took)",
    )
    parser.add_argument("--no-plot", action="store_true", help="skip replay.png")


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
    from snooze.core.config import SchedulerConfig
    from snooze.logs import read_reward_log

    log = read_reward_log(args.log, group_size=args.group_size, reward_range=args.reward_range)
    try:
        cfg = SchedulerConfig(
            group_size=log.group_size,
            reward_range=args.reward_range,
            easy_threshold=args.easy_threshold,
            hard_threshold=args.hard_threshold,
        )
    except ConfigError as exc:
        raise ConfigError(f"{exc} (from the command line)") from None
    shape = StepShape.infer(log, args.batch_size, args.gen_batch_size, args.max_gen_rounds)
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

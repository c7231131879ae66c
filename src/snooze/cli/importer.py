"""``snooze import FORMAT PATH --out LOG``: a verl, prime-rl or TRL run's rollout dump as a reward log."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = (
    "Turn a verl (trainer.rollout_data_dir), prime-rl (rollouts/) or TRL (completions/, log_completions=True) dump "
    "into a reward log for snooze replay."
)

OPTIONS = ("reward_range", "drop_incomplete", "not_filtered")
"""Fields of :class:`~snooze.logs.importers.ImportOptions` with their own defaults (``group_size``: the dump's)."""

VERL_ONLY = ("dataset", "dataset_field", "id_field")


def _weights(text: str) -> list[float]:
    """``--reward-weights``: finite numbers separated by commas (repeats allowed: ``1,1``)."""
    from snooze._kit.checks import finite_float

    out = [finite_float(_number(x)) for x in text.split(",")]
    if not text or any(w is None for w in out):
        raise argparse.ArgumentTypeError(f"{text!r}: finite numbers separated by commas, e.g. 1,0.2")
    return [float(w) for w in out if w is not None]


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from snooze.cli._options import add_options
    from snooze.cli._paths import output_file
    from snooze.logs.importers import FORMATS, ImportOptions

    parser.add_argument("format", choices=tuple(FORMATS), help="the framework that wrote the dump")
    parser.add_argument(
        "path",
        metavar="PATH",
        type=Path,
        help="verl: the trainer.rollout_data_dir folder (<step>.jsonl files); prime-rl: the run folder (rollouts/); "
        "trl: the output_dir (completions/completions_<step>.parquet)",
    )
    parser.add_argument("--out", required=True, type=output_file, help="the reward log to write (JSONL)")
    parser.add_argument("--force", action="store_true", help="write over an existing --out file")
    reading = parser.add_argument_group("reading the dump (ImportOptions fields)")
    reading.add_argument(
        "--reward-field",
        default=None,
        metavar="NAME",
        help="the field read as each rollout's reward, recorded in the header (verl: default score; its older "
        "trainer's acc, or any numeric field; prime-rl: one named reward's score, default the weighted sum; trl: "
        "one reward function's column, default the sum of them all)",
    )
    add_options(reading, ImportOptions, ("group_size",), unset="the size of the dump's complete groups")
    add_options(reading, ImportOptions, OPTIONS)
    parser.add_argument_group("trl only").add_argument(
        "--reward-weights",
        type=_weights,
        default=None,
        metavar="W1,W2,...",
        help="the run's GRPOConfig.reward_weights, one per reward column in the files' order (TRL does not write "
        "them; default: 1 each)",
    )
    verl = parser.add_argument_group("verl only")
    verl.add_argument("--dataset", default=None, help="dataset name of rows without --dataset-field (default: verl)")
    verl.add_argument(
        "--dataset-field",
        default=None,
        help="the field naming each row's dataset (default: data_source, when a row has it)",
    )
    verl.add_argument(
        "--id-field",
        default=None,
        help="the field holding each prompt's id, e.g. one the reward function dumps (default: the prompt text)",
    )


def run(args: argparse.Namespace) -> int:
    from snooze.cli._options import build, values
    from snooze.cli._paths import refuse_existing
    from snooze.core.errors import ConfigError
    from snooze.logs.importers import FORMATS, ImportOptions, write_reward_log

    opts = build(ImportOptions, {**values(args, ("group_size", *OPTIONS)), "reward_field": args.reward_field})
    verl_opts = {k: getattr(args, k) for k in VERL_ONLY if getattr(args, k) is not None}
    if args.reward_weights is not None:
        if args.format != "trl":
            raise ConfigError("--reward-weights: trl only (verl and prime-rl dump each rollout's weighted reward)")
        verl_opts["reward_weights"] = args.reward_weights
    elif args.format != "verl" and verl_opts:
        given = ", ".join("--" + k.replace("_", "-") for k in verl_opts)
        raise ConfigError(
            f"{given}: verl only (a prime-rl episode names its environment and task; TRL's rows are keyed by prompt)"
        )
    refuse_existing(args.out, args.force)
    groups, header, report = FORMATS[args.format](args.path, opts, **verl_opts)
    write_reward_log(args.out, groups, header)
    for line in report.lines():
        print(line)
    sizes = ", ".join(f"{k} {v}" for k, v in header.sizes().items()) or "batch sizes unknown"
    print(
        f"wrote {args.out}: {len(groups):,} groups; header: policy {header.policy}, dynamic sampling "
        f"{'yes' if header.dynamic_sampling else 'no'}, group_size {header.group_size}, {sizes}, "
        f"reward range [{header.reward_range[0]:g}, {header.reward_range[1]:g}]"
        + (f", rewards from field {header.reward_field!r}" if args.reward_field or args.format == "trl" else "")
    )
    for caveat in header.caveats:
        print(f"WARNING: {caveat}", file=sys.stderr)
    print(f"next: snooze replay {args.out} --out replay/")
    return 0

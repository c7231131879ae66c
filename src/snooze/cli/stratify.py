"""``snooze stratify INPUT... --out DIR``: sort prompts by baseline pass rate and write a curriculum."""

from __future__ import annotations

import argparse

HELP = "Stratify prompts by baseline pass rate; write prompts.csv/.parquet, curriculum.json and plots."


def _fields() -> tuple[str, ...]:
    import dataclasses

    from snooze.analysis.stratify import StratifyConfig

    return tuple(f.name for f in dataclasses.fields(StratifyConfig))


def _models(text: str) -> list[str]:
    from snooze.cli._options import comma_list

    return comma_list(text, str, "base,sft")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from snooze.analysis.stratify import StratifyConfig
    from snooze.cli._options import add_options
    from snooze.cli._paths import input_file, output_folder

    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        type=input_file,
        help="baseline completions: .jsonl, .csv or .parquet (docs/offline-analysis.md)",
    )
    parser.add_argument("--out", required=True, type=output_folder, help="output folder")
    parser.add_argument(
        "--models",
        default=None,
        type=_models,
        help="comma-separated baseline models that must be present (default: every model in the inputs)",
    )
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG plots")
    add_options(parser.add_argument_group("stratification (StratifyConfig fields)"), StratifyConfig, _fields())


def run(args: argparse.Namespace) -> int:
    from snooze.analysis.outputs import write_stratification
    from snooze.analysis.stratify import StratifyConfig, stratify
    from snooze.cli._options import build, values

    cfg = build(StratifyConfig, values(args, _fields()))
    result = stratify(args.inputs, cfg, args.models)
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

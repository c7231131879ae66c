"""``snooze compare --out DIR``: DAPO, filter and snoozing trained from one base model, side by side."""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

HELP = (
    "Train every policy (grpo, dynamic_sampling, filter, snooze at factors 5/1/2, predictive + figure-3 arms) "
    "from one base model and compare."
)


def _arms(text: str) -> list[str]:
    from snooze.cli._options import comma_list
    from snooze.experiments.compare import ARMS

    if text.strip() == "all":
        return list(ARMS)

    def arm(name: str) -> str:
        name = name.strip()  # ("grpo, filter" as typed in a shell)
        if name not in ARMS:
            raise argparse.ArgumentTypeError(f"{text!r}: arms must be 'all' or among {', '.join(ARMS)}")
        return name

    return comma_list(text, arm, "dynamic_sampling,snooze-f1-carry")


PROFILE_OPTIONS = (
    "seeds",
    "first_seed",
    "tasks",
    "fig3_task",
    "steps",
    "pool_size",
    "test_size",
    "temperature",
    "lr",
    "max_gen_rounds",
    "staleness",
)
"""Fields of :class:`~snooze.experiments.profiles.Profile` that override the chosen profile."""

TRAIN_OPTIONS = ("device", "checkpoint_every")
"""Fields of :class:`~snooze.trainer.config.TrainConfig` given to every run."""

ARM_OPTIONS = ("carry_surplus",)
"""Fields of :class:`~snooze.SchedulerConfig` set on every arm. Each policy's options (from the registry
of options classes) are set on the arms of that policy."""

_UNSET = "the arm's, else {default}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    import dataclasses

    from snooze.cli._options import add_options, add_policy_options, integer
    from snooze.cli._paths import input_file, output_folder
    from snooze.core.config import SchedulerConfig
    from snooze.core.options import POLICIES, options_class
    from snooze.experiments.profiles import PROFILES, Profile
    from snooze.trainer.config import TrainConfig

    parser.add_argument(
        "--out", required=True, type=output_folder, help="output folder (runs, summary.json, summary.md, figures)"
    )
    parser.add_argument(
        "--profile",
        choices=tuple(PROFILES),
        default="default",
        help="quick: CI smoke run (minutes); default: the reference experiment (docs/results.md); "
        "full: the default with 5 seeds; gpu: a larger model for --device cuda",
    )
    add_options(parser.add_argument_group("the profile's fields"), Profile, PROFILE_OPTIONS, unset="the profile's")
    add_options(parser.add_argument_group("every arm (SchedulerConfig fields)"), SchedulerConfig, ARM_OPTIONS)
    for policy in POLICIES:  # one group per policy with options: the flags of its options class
        cls = options_class(POLICIES, policy)
        if dataclasses.fields(cls):
            group = parser.add_argument_group(f"the {policy} arms ({cls.__name__})")
            add_policy_options(group, policy, unset=_UNSET)
    add_options(parser, TrainConfig, TRAIN_OPTIONS)
    parser.add_argument(
        "--jobs",
        type=integer,
        default=None,
        help="training runs at once, each in its own process (default: one per CPU core); results do not depend on it",
    )
    parser.add_argument(
        "--threads",
        type=integer,
        default=None,
        help="torch CPU threads per run (default 1); keep jobs x threads within the core count",
    )
    parser.add_argument(
        "--arms",
        type=_arms,
        default=None,
        help="comma-separated arms, or all (default: every arm but snooze-f1, snooze-f2, one-round and the screening "
        "arms dynamic_sampling-screen2 and snooze-f1-carry-screen2; the recommended setting, snooze-f1-carry, runs)",
    )
    parser.add_argument(
        "--cache",
        type=output_folder,
        default=None,
        help="warm-up cache folder (default $SNOOZE_CACHE_DIR or ~/.cache/snooze)",
    )
    parser.add_argument(
        "--curriculum",
        type=input_file,
        default=None,
        metavar="FILE",
        help="curriculum file (snooze stratify's curriculum.json) for the main arms; "
        "make it with snooze baseline/stratify on the same --tasks and pool/test sizes",
    )


def _check(args: argparse.Namespace) -> None:
    """Reject bad numbers before anything is written (the config fields are checked by their dataclasses)."""
    from snooze.core.errors import ConfigError

    for flag in ("threads", "jobs"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise ConfigError(f"--{flag} {value}: must be at least 1")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from snooze.cli._options import build, checked_policy_options, override, values
    from snooze.core.config import SchedulerConfig
    from snooze.core.options import POLICIES
    from snooze.experiments.compare import DEFAULT_ARMS, FIG3_ARMS, PROFILES, run_compare, summary_table, with_overrides
    from snooze.experiments.regime import regime_table
    from snooze.experiments.summary_file import read_regime
    from snooze.trainer.config import TrainConfig

    _check(args)
    settings: dict[str, Any] = values(args, ARM_OPTIONS)
    build(SchedulerConfig, settings)
    # each policy's options, checked now (by its options class), before anything is trained
    settings["options"] = {policy: checked_policy_options(args, policy) for policy in POLICIES}
    train_options = values(args, TRAIN_OPTIONS)
    build(TrainConfig, train_options)
    profile = override(PROFILES[args.profile], values(args, PROFILE_OPTIONS))
    if args.tasks and not args.fig3_task:
        profile = with_overrides(profile, fig3_task=args.tasks.split(",")[0])
    seeds = args.seeds or profile.seeds
    arms = args.arms or list(DEFAULT_ARMS)
    total = sum(profile.steps * (profile.fig3_seeds if a in FIG3_ARMS else seeds) for a in arms)
    jobs = args.jobs or max(1, os.cpu_count() or 1)
    bars: list[Any] = []  # made at the first step: a comparison refused before it trains prints only its error
    state: dict[str, Any] = {"t0": time.perf_counter()}

    def on_step(arm: str, seed: int, line: dict[str, Any]) -> None:
        if not bars:
            bars.append(tqdm(total=total, unit="step", desc="compare"))
        bars[0].set_postfix_str(f"{arm} seed{seed} rounds={line.get('gen/rounds')}", refresh=False)
        bars[0].update(1)

    print(
        f"snooze compare: profile {args.profile}, arms {', '.join(arms)}, {seeds} seed(s), {profile.steps} steps, "
        f"tasks {profile.tasks}, {jobs} job(s)"
    )
    if args.curriculum is not None:
        print(f"  curriculum {args.curriculum} on the main arms")
    try:
        summary = run_compare(
            args.out,
            profile,
            arms,
            seeds,
            settings,
            jobs=jobs,
            threads=args.threads,
            cache_dir=args.cache,
            device=args.device,
            curriculum=args.curriculum,
            checkpoint_every=train_options["checkpoint_every"],
            on_step=on_step,
        )
    finally:
        for bar in bars:
            bar.close()
    print(summary_table(summary, optimal_groups=profile.steps * profile.batch_size))
    regime = read_regime(args.out / "regime.json", "it was written by this command: rerun it")
    print("\nregime (DAPO and GRPO only; docs/results.md):\n" + regime_table(regime))
    print(f"\nwrote {args.out}/summary.json, summary.md and figures in {time.perf_counter() - state['t0']:.0f} s")
    return 0

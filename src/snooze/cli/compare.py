"""``snooze compare --out DIR``: DAPO, filter and snoozing trained from one base model, side by side."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

HELP = "Train every policy (grpo, dynamic_sampling, filter, snooze + figure-3 arms) from one base model and compare."

_ALL_ARMS = ("grpo", "dynamic_sampling", "filter", "snooze", "fig3-filter", "fig3-snooze", "fig3-snooze-quota")


def _arms(text: str) -> list[str]:
    out = [a.strip() for a in text.split(",") if a.strip()]
    bad = [a for a in out if a not in _ALL_ARMS]
    if not out or bad:
        raise argparse.ArgumentTypeError(f"{text!r}: arms must be among {', '.join(_ALL_ARMS)}")
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=Path, help="output folder (runs, summary.json, summary.md, figures)")
    from snooze.experiments.profiles import PROFILES

    parser.add_argument(
        "--profile", choices=tuple(PROFILES), default="default",
        help="quick: CI smoke run (minutes); default: the reference experiment (docs/reference-experiment.md); full: longer; gpu: a larger model for --device cuda",
    )  # fmt: skip
    parser.add_argument("--seeds", type=int, default=None, help="seeds per main arm (default: the profile's)")
    parser.add_argument("--tasks", default=None, help="task mix, e.g. rev:3-7,count:3-6 (default: the profile's)")
    parser.add_argument("--fig3-task", default=None, help="task split into easy/hard strata for figure 3 (default: the profile's)")
    parser.add_argument("--steps", type=int, default=None, help="training steps per arm (default: the profile's)")
    parser.add_argument("--pool-size", type=int, default=None, help="RL-pool prompts per task (default: the profile's)")
    parser.add_argument("--test-size", type=int, default=None, help="held-out prompts per task (default: the profile's)")
    parser.add_argument("--temperature", type=float, default=None, help="rollout sampling temperature (default: the profile's)")
    parser.add_argument("--factor", type=int, default=5, help="snooze factor of the snooze arms (default 5, as the seed)")
    parser.add_argument("--backoff", type=float, default=1.0, help="snooze arms: period x this per consecutive too-easy outcome (default 1.0, the seed's)")
    parser.add_argument(
        "--skip", choices=("counter", "history"), default="counter",
        help="snooze arms: counter (the seed's rule, default) or history (skip with probability p**G from the pass-rate history)",
    )  # fmt: skip
    parser.add_argument("--snooze-hard", action="store_true", help="snooze arms also snooze too-hard groups (measured worse on the default profile; docs/reference-experiment.md)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to train")
    parser.add_argument(
        "--jobs", type=int, default=None,
        help="training runs at once, each in its own process (default: one per CPU core); results do not depend on it",
    )  # fmt: skip
    parser.add_argument(
        "--threads", type=int, default=None,
        help="torch CPU threads per run (default 1); keep jobs x threads within the core count",
    )  # fmt: skip
    parser.add_argument("--arms", type=_arms, default=list(_ALL_ARMS), help="comma-separated arms (default: all)")
    parser.add_argument("--cache", type=Path, default=None, help="warm-up cache folder (default $SNOOZE_CACHE_DIR or ~/.cache/snooze)")
    parser.add_argument("--curriculum", type=Path, default=None, metavar="FILE", help="curriculum file (snooze stratify's curriculum.json) for the main arms; make it with snooze baseline/stratify on the same --tasks and pool/test sizes")


def _check(args: argparse.Namespace) -> None:
    """Reject bad numbers before anything is written."""
    from snooze.core.errors import ConfigError

    for flag in ("seeds", "steps", "threads", "jobs", "pool_size", "test_size"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise ConfigError(f"--{flag.replace('_', '-')} {value}: must be at least 1")
    if args.temperature is not None and not args.temperature > 0:
        raise ConfigError(f"--temperature {args.temperature}: must be > 0")
    if args.factor < 0:
        raise ConfigError(f"--factor {args.factor}: must be >= 0")
    if not args.backoff >= 1.0:
        raise ConfigError(f"--backoff {args.backoff}: must be >= 1.0 (1.0: a fixed period, as the seed)")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from snooze.experiments.compare import FIG3_ARMS, PROFILES, run_compare, summary_table, with_overrides
    from snooze.experiments.regime import regime_table

    _check(args)
    profile = with_overrides(
        PROFILES[args.profile], tasks=args.tasks, fig3_task=args.fig3_task, steps=args.steps, temperature=args.temperature,
        pool_size=args.pool_size, test_size=args.test_size,
    )  # fmt: skip
    if args.tasks and not args.fig3_task:
        profile = with_overrides(profile, fig3_task=args.tasks.split(",")[0])
    seeds = args.seeds or profile.seeds
    total = sum(profile.steps * (profile.fig3_seeds if a in FIG3_ARMS else seeds) for a in args.arms)
    jobs = args.jobs or max(1, os.cpu_count() or 1)
    bar = tqdm(total=total, unit="step", desc="compare")
    state: dict[str, Any] = {"t0": time.perf_counter()}

    def on_step(arm: str, seed: int, line: dict[str, Any]) -> None:
        bar.set_postfix_str(f"{arm} seed{seed} rounds={line.get('gen/rounds')}", refresh=False)
        bar.update(1)

    print(f"snooze compare: profile {args.profile}, arms {', '.join(args.arms)}, {seeds} seed(s), {profile.steps} steps, tasks {profile.tasks}, {jobs} job(s)")
    if args.curriculum is not None:
        print(f"  curriculum {args.curriculum} on the main arms")
    try:
        summary = run_compare(args.out, profile, args.arms, seeds, factor=args.factor, device=args.device, cache_dir=args.cache, on_step=on_step, curriculum=args.curriculum, snooze_hard=args.snooze_hard, backoff=args.backoff, threads=args.threads, skip=args.skip, jobs=jobs)
    finally:
        bar.close()
    print(summary_table(summary, optimal_groups=profile.steps * profile.batch_size))
    regime = json.loads((args.out / "regime.json").read_text())
    print("\nregime (DAPO and GRPO only; docs/reference-experiment.md):\n" + regime_table(regime))
    print(f"\nwrote {args.out}/summary.json, summary.md and figures in {time.perf_counter() - state['t0']:.0f} s")
    return 0

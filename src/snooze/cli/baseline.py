"""``snooze baseline``: baseline completions of the built-in tasks' RL pool, for ``snooze stratify``."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from snooze.core.errors import ConfigError

HELP = "Sample baseline completions of the built-in tasks with one or more checkpoints (input of snooze stratify)."


PROFILE_OPTIONS = ("temperature", "pool_size", "test_size")
"""Fields of :class:`~snooze.experiments.baseline.BaselineConfig` that a ``--profile`` sets when not given."""

OPTIONS = ("samples", "seed", "chunk")
"""The other fields of :class:`~snooze.experiments.baseline.BaselineConfig`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from snooze.cli._options import add_options
    from snooze.cli._paths import output_file, output_folder
    from snooze.experiments.baseline import BaselineConfig
    from snooze.experiments.profiles import PROFILES

    parser.add_argument(
        "--profile",
        choices=tuple(PROFILES),
        default=None,
        help="match a `snooze compare` profile: its tasks, pool and test sizes, temperature, and (with --warmup) "
        "its cached base model, so the curriculum's ids and pass rates fit `snooze compare --curriculum`",
    )
    parser.add_argument(
        "--tasks", default=None, help="task specs, e.g. add:1-3,rev:3-7 (default: the profile's, else add,rev)"
    )
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="[NAME=]PATH",
        help="checkpoint: a .pt state dict, a folder with model.pt, or a run folder of snooze compare or train() "
        "(its last checkpoint); repeat for several models",
    )
    parser.add_argument(
        "--warmup",
        action="store_true",
        help="also use the reference trainer's warm-up base model (trained once, then cached) as model 'base'",
    )
    parser.add_argument("--out", required=True, type=output_file, help="output JSONL file")
    parser.add_argument(
        "--cache",
        type=output_folder,
        default=None,
        help="warm-up cache folder, as for snooze compare (default $SNOOZE_CACHE_DIR or ~/.cache/snooze)",
    )
    sampling = parser.add_argument_group("sampling (BaselineConfig fields)")
    add_options(sampling, BaselineConfig, OPTIONS)
    add_options(sampling, BaselineConfig, PROFILE_OPTIONS, unset="the profile's, else {default}")


def _named(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep:
        name, path = Path(text).stem or Path(text).name, text
    if not name or "/" in name:
        raise ConfigError(f"--model {text!r}: the model name must be non-empty and without '/'; use NAME=PATH")
    return name, path


def _profile_model(name: str, cache: Path | None) -> Any:
    """The base model ``snooze compare --profile NAME`` trains from (warmed up once, then cached)."""
    from snooze.experiments.compare import PROFILES, profile_base

    print(f"warm-up base model of profile {name!r} (cached after the first run)...", flush=True)
    return _loaded(*profile_base(PROFILES[name], cache))


def _warmup_model(specs: list[Any], cfg: Any, cache: Path | None) -> Any:
    """The trainer's default-size model warmed up on ``specs``, kept apart from their pools and test splits."""
    from snooze.trainer.model import ModelConfig
    from snooze.trainer.tasks import task_splits
    from snooze.trainer.warmup import WarmupConfig, warmup

    pools, tests = task_splits(specs, cfg.pool_size, cfg.test_size, cfg.seed)
    exclude = {r["prompt"] for split in (pools, tests) for recs in split.values() for r in recs}
    model_cfg = ModelConfig()
    print("warm-up base model (cached after the first run)...", flush=True)
    return _loaded(model_cfg, warmup(specs, exclude, WarmupConfig(seed=cfg.seed), model_cfg, cache_dir=cache))


def _loaded(model_cfg: Any, result: Any) -> Any:
    """A :class:`TinyGPT` holding a warm-up's weights, in eval mode; says which warm-up it is."""
    from snooze.trainer.model import TinyGPT

    model = TinyGPT(model_cfg)
    model.load_state_dict(result.state_dict)
    print(
        f"  base: {result.steps} steps, val accuracy {result.val_accuracy:.3f}" + (" (cached)" if result.cached else "")
    )
    return model.eval()


def run(args: argparse.Namespace) -> int:
    import torch

    from snooze.cli._options import build, values
    from snooze.experiments.baseline import (
        BaselineConfig,
        baseline_completions,
        load_checkpoint,
        task_pool,
        write_completions,
    )
    from snooze.trainer.tasks import parse_tasks

    torch.set_num_threads(os.cpu_count() or 1)
    if not args.model and not args.warmup:
        raise ConfigError("no models: pass --model [NAME=]PATH (repeatable) and/or --warmup")
    profile = None
    if args.profile is not None:
        from snooze.experiments.profiles import PROFILES

        profile = PROFILES[args.profile]
        if args.seed != 0:
            raise ConfigError(
                f"--profile {args.profile} builds its pools with seed 0 (as snooze compare does); drop --seed"
            )

    from_profile = {name: getattr(profile, name) for name in PROFILE_OPTIONS} if profile is not None else {}
    cfg = build(BaselineConfig, {**values(args, OPTIONS), **from_profile, **values(args, PROFILE_OPTIONS)})
    tasks = args.tasks if args.tasks is not None else (profile.tasks if profile is not None else "add,rev")
    if (
        profile is not None
        and args.warmup
        and (tasks, cfg.pool_size, cfg.test_size) != (profile.tasks, profile.pool_size, profile.test_size)
    ):
        raise ConfigError(
            f"--profile {args.profile} --warmup samples the profile's own base model, which was warmed up apart from "
            f"its tasks ({profile.tasks}) and pool/test sizes ({profile.pool_size}/{profile.test_size}); "
            "drop --tasks/--pool-size/--test-size, or pass the model with --model"
        )
    specs = parse_tasks(tasks)
    pools = task_pool(specs, cfg)
    models: dict[str, Any] = {}
    if args.warmup:
        models["base"] = (
            _profile_model(args.profile, args.cache) if profile is not None else _warmup_model(specs, cfg, args.cache)
        )
    for text in args.model:
        name, path = _named(text)
        if name in models:
            raise ConfigError(f"--model {text!r}: model name {name!r} is used twice; name them NAME=PATH")
        models[name] = load_checkpoint(path)
    t0 = time.perf_counter()
    rows = baseline_completions(
        models, pools, cfg, progress=lambda m, d: print(f"  sampling {m} on {d}...", flush=True)
    )
    write_completions(rows, args.out)
    print(
        f"wrote {len(rows):,} rows ({len(models)} model(s) x {sum(map(len, pools.values())):,} prompts x "
        f"{cfg.samples} samples) to {args.out} in {time.perf_counter() - t0:.1f}s"
    )
    for name in models:
        mine = [r for r in rows if r["model"] == name]
        rate = sum(sum(r["rewards"]) for r in mine) / max(1, cfg.samples * len(mine))
        print(f"  {name}: mean pass rate {rate:.3f}")
    return 0

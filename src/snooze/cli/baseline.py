"""``snooze baseline``: baseline completions for ``snooze stratify``: of the built-in tasks' RL pool with the
reference model's checkpoints, or (``--dataset``) of a training run's own dataset with any Hugging Face causal LM
(:mod:`snooze.experiments.hf_baseline`)."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from snooze.core.errors import ConfigError

HELP = (
    "Sample baseline completions (input of snooze stratify): of the built-in tasks with reference checkpoints, or "
    "of your dataset (--dataset) with any Hugging Face causal LM."
)


PROFILE_OPTIONS = ("temperature", "pool_size", "test_size")
"""Fields of :class:`~snooze.experiments.baseline.BaselineConfig` that a ``--profile`` sets when not given."""

OPTIONS = ("samples", "seed", "chunk")
"""The other fields of :class:`~snooze.experiments.baseline.BaselineConfig`."""

DATASET_ONLY: dict[str, Any] = {"reward": None, "max_new_tokens": 256, "reward_range": (0.0, 1.0)}
"""The options of ``--dataset`` alone (dest -> its value when not given), refused without ``--dataset``."""

TASKS_ONLY = ("warmup", "profile", "tasks", "pool_size", "test_size", "cache")
"""The options of the built-in tasks alone (dests), refused with ``--dataset``."""


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
        "(its last checkpoint); with --dataset, a Hugging Face causal LM (a local folder or a hub name); "
        "repeat for several models",
    )
    _add_dataset_options(parser)
    parser.add_argument("--out", required=True, type=output_file, help="output JSONL file")
    parser.add_argument("--force", action="store_true", help="write over an existing --out file")
    parser.add_argument(
        "--cache",
        type=output_folder,
        default=None,
        help="warm-up cache folder, as for snooze compare (default $SNOOZE_CACHE_DIR or ~/.cache/snooze)",
    )
    sampling = parser.add_argument_group("sampling (BaselineConfig fields)")
    add_options(sampling, BaselineConfig, OPTIONS)
    add_options(sampling, BaselineConfig, PROFILE_OPTIONS, unset="the profile's, else {default}")


def _add_dataset_options(parser: argparse.ArgumentParser) -> None:
    """``--dataset`` and what goes with it (a Hugging Face causal LM as ``--model``)."""
    from snooze.cli._options import _pair, integer
    from snooze.cli._paths import input_file

    own = parser.add_argument_group("your dataset (--dataset, with any Hugging Face causal LM as --model)")
    own.add_argument(
        "--dataset",
        type=input_file,
        default=None,
        metavar="FILE",
        help="the training run's dataset, JSONL or Parquet: verl's (data_source, prompt, reward_model, extra_info) "
        "or TRL's (prompt, optional id and answer columns); ids as the verl or TRL adapter names the rows",
    )
    own.add_argument(
        "--reward",
        default=None,
        metavar="FILE.py:NAME",
        help="reward function: verl's custom reward form (compute_score(data_source, solution_str, ground_truth, "
        "extra_info)) or TRL's (f(prompts, completions, **columns)); default: 1 when the row's answer is in the "
        "completion",
    )
    own.add_argument(
        "--max-new-tokens",
        type=integer,
        default=None,
        help=f"tokens generated per completion (default {DATASET_ONLY['max_new_tokens']})",
    )
    own.add_argument(
        "--reward-range",
        type=_pair,
        default=None,
        metavar="LOW,HIGH",
        help="where the reward function's rewards lie (default {:g},{:g}); scaled to [0, 1] for stratify. ".format(
            *DATASET_ONLY["reward_range"]
        )
        + "A negative LOW needs the = form: --reward-range=-1,1.",
    )
    parser.add_argument(
        "--warmup",
        action="store_true",
        help="also use the reference trainer's warm-up base model (trained once, then cached) as model 'base'",
    )


def _given(args: argparse.Namespace, dests: Iterable[str]) -> list[str]:
    """The flags of those options given on the command line (a flag left out is ``None``, or ``False``)."""
    return ["--" + d.replace("_", "-") for d in dests if getattr(args, d) is not None and getattr(args, d) is not False]


def _check_mode(args: argparse.Namespace) -> None:
    """Refuse the options of the other mode: ``--dataset``'s without it, the built-in tasks' with it."""
    if args.dataset is None and _given(args, DATASET_ONLY):
        raise ConfigError(
            f"{', '.join(_given(args, DATASET_ONLY))}: for --dataset (your dataset, with a Hugging Face model); "
            "the built-in tasks have their own verifier, rewards and completion length: drop them, or add --dataset"
        )
    if args.dataset is not None and _given(args, TASKS_ONLY):
        raise ConfigError(
            f"{', '.join(_given(args, TASKS_ONLY))}: for the built-in tasks; --dataset samples your dataset's prompts"
        )
    if args.dataset is None and args.cache is not None and not args.warmup:
        raise ConfigError("--cache: the warm-up cache, used only with --warmup; add --warmup or drop --cache")


def _dataset_option(args: argparse.Namespace, dest: str) -> Any:
    """A ``--dataset`` option's value: as given, else its default (:data:`DATASET_ONLY`)."""
    value = getattr(args, dest)
    return DATASET_ONLY[dest] if value is None else value


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
    from snooze.cli._paths import refuse_existing
    from snooze.experiments.baseline import (
        BaselineConfig,
        baseline_completions,
        load_checkpoint,
        task_pool,
        write_completions,
    )
    from snooze.trainer.tasks import parse_tasks

    _check_mode(args)
    torch.set_num_threads(os.cpu_count() or 1)
    if args.dataset is not None:
        refuse_existing(args.out, args.force)  # before any model is loaded or run
        return _run_hf(args)
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
    refuse_existing(args.out, args.force)  # after the arguments' own errors, before any model is loaded or run
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


def _hf_label(text: str) -> tuple[str, str]:
    """``NAME=PATH`` or a path or hub name (its last part is the model's name in the rows)."""
    name, sep, path = text.partition("=")
    if not sep:
        name, path = text.rstrip("/").rsplit("/", 1)[-1], text
    if not name or "/" in name:
        raise ConfigError(f"--model {text!r}: the model name must be non-empty and without '/'; use NAME=PATH")
    return name, path


def _run_hf(args: argparse.Namespace) -> int:
    """``--dataset``: baseline completions of the dataset's prompts from Hugging Face causal LMs."""
    from snooze._kit.checks import check_reward_range
    from snooze.cli._options import build, values
    from snooze.experiments.baseline import BaselineConfig, write_completions
    from snooze.experiments.hf_baseline import hf_completions, load_reward, read_prompts

    if not args.model:
        raise ConfigError("--dataset needs --model [NAME=]NAME_OR_PATH (a Hugging Face causal LM; repeatable)")
    cfg = build(BaselineConfig, {**values(args, OPTIONS), **values(args, ("temperature",))})
    reward_range = check_reward_range(_dataset_option(args, "reward_range"), "--reward-range")
    reward = load_reward(args.reward) if args.reward is not None else None
    rows, kind = read_prompts(args.dataset)
    print(f"{args.dataset}: {len(rows):,} prompts, named as the {kind} adapter names them")
    out: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    labels = [_hf_label(text) for text in args.model]
    if len({n for n, _ in labels}) < len(labels):
        raise ConfigError("two --model share a name; name them NAME=PATH")
    for name, path in labels:
        print(f"  sampling {name} ({path})...", flush=True)
        out += hf_completions(
            path,
            name,
            rows,
            cfg.samples,
            cfg.temperature,
            _dataset_option(args, "max_new_tokens"),
            cfg.chunk,
            cfg.seed,
            reward,
            reward_range,
        )
    write_completions(out, args.out)
    print(
        f"wrote {len(out):,} rows ({len(labels)} model(s) x {len(rows):,} prompts x {cfg.samples} samples) to "
        f"{args.out} in {time.perf_counter() - t0:.1f}s"
    )
    for name, _ in labels:
        mine = [r for r in out if r["model"] == name]
        rate = sum(sum(r["rewards"]) for r in mine) / max(1, cfg.samples * len(mine))
        print(f"  {name}: mean pass rate {rate:.3f}")
    return 0

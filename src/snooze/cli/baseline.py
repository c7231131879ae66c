"""``snooze baseline``: baseline completions of the built-in tasks' RL pool, for ``snooze stratify``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from snooze.core.errors import ConfigError

HELP = "Sample baseline completions of the built-in tasks with one or more checkpoints (input of snooze stratify)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tasks", default="add,rev", help="task specs, e.g. add:1-3,rev:3-7 (as for training)")
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="[NAME=]PATH",
        help="checkpoint (.pt state dict or folder with model.pt); repeat for several models",
    )
    parser.add_argument(
        "--warmup",
        action="store_true",
        help="also use the reference trainer's warm-up base model (trained once, then cached) as model 'base'",
    )
    parser.add_argument("--out", required=True, help="output JSONL file")
    parser.add_argument("--samples", type=int, default=16, help="completions per prompt and model (default 16)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1.0)")
    parser.add_argument("--pool-size", type=int, default=500, help="RL-pool prompts per task (match the training run)")
    parser.add_argument("--test-size", type=int, default=200, help="held-out prompts per task (match the training run)")
    parser.add_argument("--seed", type=int, default=0, help="task-split and sampling seed (match the training run)")


def _named(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep:
        name, path = Path(text).stem or Path(text).name, text
    if not name or "/" in name:
        raise ConfigError(f"--model {text!r}: the model name must be non-empty and without '/'; use NAME=PATH")
    return name, path


def _warmup_model(specs: list[Any], pools: dict[str, list[dict[str, Any]]], cfg: Any) -> Any:
    from snooze.trainer.model import ModelConfig, TinyGPT
    from snooze.trainer.tasks import make_split
    from snooze.trainer.warmup import WarmupConfig, warmup

    exclude = {r["prompt"] for recs in pools.values() for r in recs}
    exclude |= {r["prompt"] for s in specs for r in make_split(s, "test", cfg.test_size, cfg.seed)}
    model_cfg = ModelConfig()
    print("warm-up base model (cached after the first run)...", flush=True)
    result = warmup(specs, exclude, WarmupConfig(seed=cfg.seed), model_cfg)
    model = TinyGPT(model_cfg)
    model.load_state_dict(result.state_dict)
    print(
        f"  base: {result.steps} steps, val accuracy {result.val_accuracy:.3f}" + (" (cached)" if result.cached else "")
    )
    return model.eval()


def run(args: argparse.Namespace) -> int:
    import torch

    from snooze.analysis.baseline import (
        BaselineConfig,
        baseline_completions,
        load_checkpoint,
        task_pool,
        write_completions,
    )
    from snooze.trainer.tasks import parse_tasks

    torch.set_num_threads(2)
    if not args.model and not args.warmup:
        raise ConfigError("no models: pass --model [NAME=]PATH (repeatable) and/or --warmup")
    cfg = BaselineConfig(
        samples=args.samples,
        temperature=args.temperature,
        pool_size=args.pool_size,
        test_size=args.test_size,
        seed=args.seed,
    )
    specs = parse_tasks(args.tasks)
    pools = task_pool(specs, cfg)
    models: dict[str, Any] = {}
    if args.warmup:
        models["base"] = _warmup_model(specs, pools, cfg)
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

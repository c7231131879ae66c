"""The reference experiment behind ``snooze compare``: every policy, one base model, several seeds.

Arms (each a :class:`snooze.SchedulerConfig` over the same data, started from the same cached
warm-up, trained for the same number of steps by :func:`snooze.trainer.loop.train`):

- ``grpo``, ``dynamic_sampling``, ``filter``, ``snooze`` (factor ``--factor``) on the task mix;
- figure 3: an easy and a hard stratum (levels split in two) of one task at equal weight, under
  ``filter`` (``fig3-filter``), ``snooze`` (``fig3-snooze``) and ``snooze`` with ``mix="quota"``
  (``fig3-snooze-quota``).

``curriculum`` (a curriculum file, as ``snooze stratify`` writes it) is given to every main arm, a
fresh :class:`snooze.core.curriculum.Curriculum` per arm and seed; the figure-3 arms train on strata
with other dataset names and run without it.

Output under ``out``: ``<arm>/seed<k>/{metrics,rewards}.jsonl``, ``summary.json``, ``summary.md``,
``run_meta.json`` and the figures drawn by :func:`snooze.plots.write_compare_figures`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from snooze.core.config import SchedulerConfig
from snooze.core.curriculum import Curriculum
from snooze.core.errors import ConfigError

__all__ = ["Profile", "PROFILES", "MAIN_ARMS", "FIG3_ARMS", "run_compare", "summary_table", "check_curriculum", "profile_base"]

logger = logging.getLogger(__name__)

MAIN_ARMS: tuple[str, ...] = ("grpo", "dynamic_sampling", "filter", "snooze")
FIG3_ARMS: tuple[str, ...] = ("fig3-filter", "fig3-snooze", "fig3-snooze-quota")


@dataclass(frozen=True)
class Profile:
    """The size of one comparison."""

    tasks: str
    """Comma-separated task specs of the main arms (``family:lo-hi``)."""

    fig3_task: str
    """The task whose level range is split into easy and hard strata for figure 3 (one of ``tasks``)."""

    pool_size: int
    """RL prompts per task: finite, so the too-easy side shows up within the run."""

    test_size: int
    """Held-out prompts per task."""

    steps: int
    """Training steps of every arm."""

    eval_every: int
    """Steps between held-out evaluations."""

    batch_size: int
    """Signal groups per training step."""

    group_size: int
    """Rollouts per prompt (G)."""

    seeds: int
    """Seeds per main arm (figure-3 arms run the first seed only)."""

    lr: float
    """GRPO learning rate."""

    n_layer: int
    """Transformer blocks of the policy."""

    d_model: int
    """Width of the policy."""

    warmup_target: float
    """Mean held-out-style accuracy the supervised warm-up stops at."""

    max_gen_rounds: int = 8
    """Generation rounds per step before training on a partial batch."""

    temperature: float = 1.0
    """Sampling temperature of the rollouts. Lower makes mastered prompts all-correct sooner, which
    is when DAPO starts to waste generation (the regime of the seed's figures)."""


PROFILES: dict[str, Profile] = {
    # CI: every arm, every file, a few steps. Numbers from it mean nothing.
    "quick": Profile("rev:3-5", "rev:3-5", 48, 48, steps=8, eval_every=4, batch_size=4, group_size=4, seeds=1, lr=1e-4,
                     n_layer=2, d_model=48, warmup_target=0.3, max_gen_rounds=4),
    # The reference experiment (docs/reference-experiment.md).
    # lr 1e-4: 1e-3 made this base's held-out accuracy fall (0.62 -> 0.39 in 50 steps); T 0.7: at 1.0 ~80% of
    # groups keep signal for 100 steps, so DAPO never wastes more than its second round (see the doc).
    # 500 steps: the gap between DAPO and snoozing widens with training (one 600-step run, seed 0: 1.17x at
    # step 100, 1.41x at 300, 1.63x at 500, 1.76x at 600); 500 keeps the whole comparison near 10 minutes.
    "default": Profile("rev:3-7,count:3-6", "rev:3-7", 300, 200, steps=500, eval_every=25, batch_size=16, group_size=8, seeds=2,
                       lr=1e-4, n_layer=2, d_model=64, warmup_target=0.5, temperature=0.7),
}


def _arm_config(
    arm: str,
    profile: Profile,
    factor: int,
    strata: Sequence[str],
    snooze_hard: bool = False,
    backoff: float = 1.0,
    skip: str = "counter",
) -> SchedulerConfig:
    base = SchedulerConfig(batch_size=profile.batch_size, group_size=profile.group_size, max_gen_rounds=profile.max_gen_rounds, snooze_factor=factor)
    policy = arm.removeprefix("fig3-").removesuffix("-quota")
    cfg = base.replace(policy=policy)
    if policy == "snooze":
        cfg = cfg.replace(snooze_hard=snooze_hard, backoff=backoff, skip=skip)
    if arm.startswith("fig3-"):
        cfg = cfg.replace(weights={s: 1.0 for s in strata}, mix="quota" if arm.endswith("-quota") else "stream")
    return cfg


def _data(profile: Profile, tasks: str) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]], set[str]]:
    from snooze.trainer.tasks import parse_tasks, task_splits

    # seed 0, as every compare profile always used: the ids (and snooze baseline's default) stay the same
    pools, tests = task_splits(parse_tasks(tasks), profile.pool_size, profile.test_size, seed=0)
    banned = {r["prompt"] for recs in (*pools.values(), *tests.values()) for r in recs}
    return pools, tests, banned


def _strata(profile: Profile, pools: Mapping[str, list[dict[str, Any]]], tests: Mapping[str, list[dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Easy and hard strata of the figure-3 task: its pool and test split divided by level."""
    from snooze.trainer.tasks import TaskSpec

    spec = TaskSpec.parse(profile.fig3_task)
    if spec.name not in pools:
        raise ConfigError(f"fig3 task {spec.name} is not among the tasks {sorted(pools)}: add it to --tasks")
    out_pools, out_tests = {}, {}
    for part, stratum in zip(("easy", "hard"), spec.strata()):
        name = f"{part}:{stratum.name}"
        out_pools[name] = [r for r in pools[spec.name] if stratum.lo <= r["level"] <= stratum.hi]
        out_tests[name] = [r for r in tests[spec.name] if stratum.lo <= r["level"] <= stratum.hi]
    return out_pools, out_tests


def check_curriculum(path: Path, pools: Mapping[str, Sequence[Mapping[str, Any]]], profile: Profile) -> Curriculum:
    """Load the curriculum file and check that every dataset and prompt id it names is in ``pools``.

    Fails before the warm-up, with the ``snooze baseline`` call that writes matching ids.
    """
    cur = Curriculum.from_file(path)
    named: dict[str, set[Any]] = {}
    for name, ids in cur.drop.items():
        named.setdefault(name, set()).update(ids)
    for stage in cur.stages:
        for name in stage.weights or {}:
            named.setdefault(name, set())
        for name, ids in stage.exclude.items():
            named.setdefault(name, set()).update(ids)
    redo = (
        f"write it for this task mix: snooze baseline --tasks {profile.tasks} --pool-size {profile.pool_size} "
        f"--test-size {profile.test_size} --seed 0 ..., then snooze stratify"
    )
    unknown = sorted(set(named) - set(pools))
    if unknown:
        raise ConfigError(f"--curriculum {path}: dataset(s) {unknown} are not in the task mix {sorted(pools)}; {redo}")
    for name, ids in named.items():
        bad = sorted(map(str, ids - {r["id"] for r in pools[name]}))
        if bad:
            raise ConfigError(
                f"--curriculum {path}: {len(bad)} id(s) of {name!r} are not in its pool of {len(pools[name])} "
                f"(e.g. {bad[:3]}); {redo}"
            )
    return cur


def profile_base(
    profile: Profile, cache_dir: Path | None = None, device: str = "cpu", banned: set[str] | None = None
) -> tuple[Any, Any]:
    """The base model every arm of ``profile`` starts from: ``(ModelConfig, WarmupResult)``.

    The supervised warm-up on the profile's tasks, kept apart from its pools and test splits, cached
    by its configuration (so ``snooze baseline --profile`` samples the very model ``snooze compare``
    trains from)."""
    from snooze.trainer.model import ModelConfig
    from snooze.trainer.tasks import parse_tasks
    from snooze.trainer.tokenizer import CharTokenizer
    from snooze.trainer.warmup import WarmupConfig, warmup

    if banned is None:  # the prompts of the profile's pools and test splits (run_compare has them already)
        _, _, banned = _data(profile, profile.tasks)
    model_cfg = ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=profile.n_layer, d_model=profile.d_model)
    wcfg = WarmupConfig(target_accuracy=profile.warmup_target)
    return model_cfg, warmup(parse_tasks(profile.tasks), banned, wcfg, model_cfg, cache_dir=cache_dir, device=device)


def run_compare(
    out: Path,
    profile: Profile,
    arms: Sequence[str],
    seeds: int,
    factor: int = 5,
    device: str = "cpu",
    cache_dir: Path | None = None,
    on_step: Callable[[str, int, dict[str, Any]], None] | None = None,
    curriculum: Path | None = None,
    snooze_hard: bool = False,
    backoff: float = 1.0,
    threads: int | None = None,
    skip: str = "counter",
) -> dict[str, dict[str, Any]]:
    """Run every arm x seed into ``out``; write ``summary.json``/``summary.md`` and figures; return the summary.

    ``curriculum``: a curriculum file for the main arms (each run loads its own copy).
    ``snooze_hard``: the snooze arms also snooze too-hard groups (``SchedulerConfig.snooze_hard``).
    ``backoff``: the snooze arms' period grows by this factor per consecutive too-easy outcome.
    ``skip``: the snooze arms' skipping rule (``SchedulerConfig.skip``: ``counter`` or ``history``).
    ``threads``: torch CPU threads (default: every core). Two runs sharing the cores should split them:
    oversubscribed (two runs of 2 threads on 2 cores), a run took 9-10 s per step against 0.26 s alone."""
    import torch

    from snooze.trainer.grpo import GRPOConfig
    from snooze.trainer.loop import TrainConfig, read_result, train

    unknown = sorted(set(arms) - set(MAIN_ARMS) - set(FIG3_ARMS))
    if unknown:
        raise ConfigError(f"unknown arm(s) {unknown}: choose from {', '.join(MAIN_ARMS + FIG3_ARMS)}")
    torch.set_num_threads(threads or os.cpu_count() or 1)
    out.mkdir(parents=True, exist_ok=True)
    pools, tests, banned = _data(profile, profile.tasks)
    if curriculum is not None:
        if not any(a in MAIN_ARMS for a in arms):
            raise ConfigError(f"--curriculum applies to the main arms ({', '.join(MAIN_ARMS)}) only; none is selected")
        check_curriculum(curriculum, pools, profile)
    strata_pools, strata_tests = _strata(profile, pools, tests) if any(a in FIG3_ARMS for a in arms) else ({}, {})
    model_cfg, base = profile_base(profile, cache_dir, device, banned)
    runs: dict[str, list[Path]] = {}
    for arm in arms:
        fig3 = arm in FIG3_ARMS
        data, test = (strata_pools, strata_tests) if fig3 else (pools, tests)
        sched_cfg = _arm_config(arm, profile, factor, list(data), snooze_hard, backoff, skip)
        for seed in range(1 if fig3 else seeds):
            cfg = TrainConfig(
                steps=profile.steps, eval_every=profile.eval_every, seed=seed, device=device, temperature=profile.temperature, grpo=GRPOConfig(lr=profile.lr)
            )
            run_dir = out / arm / f"seed{seed}"
            cb = (lambda line, arm=arm, seed=seed: on_step(arm, seed, line)) if on_step is not None else None
            cur = Curriculum.from_file(curriculum) if curriculum is not None and not fig3 else None  # stateful: one per run
            train(run_dir, data, test, sched_cfg, cfg, model_cfg, base.state_dict, on_step=cb, curriculum=cur)
            runs.setdefault(arm, []).append(run_dir)
    summary = {arm: _summarise([read_result(d) for d in dirs]) for arm, dirs in runs.items()}
    meta = {"profile": asdict(profile), "factor": factor, "snooze_hard": snooze_hard, "backoff": backoff, "skip": skip, "warmup": {"steps": base.steps, "val_accuracy": base.val_accuracy, "key": base.key}}
    if curriculum is not None:
        meta["curriculum"] = {"path": str(curriculum), "sha256": hashlib.sha256(Path(curriculum).read_bytes()).hexdigest(), "arms": [a for a in runs if a in MAIN_ARMS]}
    else:
        meta["curriculum"] = None
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "run_meta.json").write_text(json.dumps(meta, indent=1, default=str))
    (out / "summary.md").write_text(summary_table(summary, markdown=True) + "\n")
    _figures(out, runs)
    return summary


def _summarise(results: Sequence[Any]) -> dict[str, Any]:
    def mean(xs: Sequence[float]) -> float:
        xs = [x for x in xs if not math.isnan(x)]
        return sum(xs) / len(xs) if xs else math.nan

    return {
        "total_gen_groups": mean([r.totals.get("total/gen_groups", math.nan) for r in results]),
        "total_rollouts": mean([r.totals.get("total/rollouts", math.nan) for r in results]),
        "final_test_accuracy": mean([r.final_accuracy for r in results]),
        "test_accuracy_by_seed": [r.final_accuracy for r in results],
        "final_test_accuracy_by_task": {k: mean([r.final_by_task.get(k, math.nan) for r in results]) for k in results[0].final_by_task},
        "base_test_accuracy": mean([r.base_accuracy for r in results]),
        "steps": max(r.steps for r in results),
        "wall_seconds": sum(r.wall_seconds for r in results),
    }


def summary_table(summary: Mapping[str, Mapping[str, Any]], markdown: bool = False) -> str:
    """One row per arm: generated groups (and vs DAPO), accuracy base -> final, wall time."""
    ref = summary.get("dynamic_sampling", {}).get("total_gen_groups")
    head = ["arm", "gen groups", "vs DAPO", "base acc", "final acc", "by seed", "steps", "wall s"]
    rows = []
    for arm, s in summary.items():
        ratio = f"{ref / s['total_gen_groups']:.2f}x fewer" if ref and s["total_gen_groups"] and not arm.startswith("fig3") else "-"
        by_seed = " ".join(f"{a:.3f}" for a in s["test_accuracy_by_seed"])
        rows.append([arm, f"{s['total_gen_groups']:.0f}", ratio, f"{s['base_test_accuracy']:.3f}", f"{s['final_test_accuracy']:.3f}", by_seed, str(s["steps"]), f"{s['wall_seconds']:.0f}"])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(r, widths)) for r in [head, *rows])


def _figures(out: Path, runs: Mapping[str, list[Path]]) -> list[Path]:
    try:
        from snooze.plots import write_compare_figures
    except ImportError:
        logger.warning("figures skipped: snooze.plots is not available")
        return []
    return write_compare_figures(out, runs)


def with_overrides(profile: Profile, **changes: Any) -> Profile:
    """The profile with the given fields changed (``None`` values are ignored)."""
    return replace(profile, **{k: v for k, v in changes.items() if v is not None})

"""The reference experiment behind ``snooze compare``: every policy, one base model, several seeds.

Arms (each a :class:`snooze.SchedulerConfig` over the same data, started from the same cached
warm-up, trained for the same number of steps by :func:`snooze.trainer.loop.train`):

- ``grpo``, ``dynamic_sampling``, ``filter``, ``snooze`` (factor ``--factor``, 5), ``snooze-f1`` and
  ``snooze-f2`` (factors 1 and 2) on the task mix;
- partial groups (docs/concepts.md "Partial groups"): ``dynamic_sampling-screen2`` (DAPO) and
  ``snooze-f1-carry-screen2`` (the recommended setting), each with ``screen_size=2``: two screening rollouts of a
  prompt first, its other ``group_size - 2`` only when the two disagree (:data:`SCREEN_ARMS`; not run by default);
- figure 3: an easy and a hard stratum (levels split in two) of one task at equal weight, under
  ``filter`` (``fig3-filter``), ``snooze`` (``fig3-snooze``) and ``snooze`` with ``mix="quota"``
  (``fig3-snooze-quota``).

``curriculum`` (a curriculum file, as ``snooze stratify`` writes it) is given to every main arm, a
fresh :class:`snooze.curriculum.Curriculum` per arm and seed; the figure-3 arms train on strata
with other dataset names and run without it.

Output under ``out``: ``<arm>/seed<k>/{metrics,rewards}.jsonl``, ``summary.json``, ``summary.md``,
``run_meta.json`` and the figures drawn by :func:`snooze.plots.write_compare_figures`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from snooze._kit.checks import as_int
from snooze._kit.files import read_regular
from snooze.core.config import RECOMMENDED, SchedulerConfig
from snooze.core.errors import ConfigError
from snooze.curriculum import Curriculum
from snooze.experiments.profiles import PROFILES, Profile, model_config, train_config, warmup_config, with_overrides
from snooze.experiments.summary import summarise, summary_table
from snooze.experiments.summary_file import RECOMMENDED_ARM
from snooze.logs import METRICS_FILE

__all__ = [
    "Profile",
    "PROFILES",
    "Arm",
    "arm_of",
    "ARMS",
    "DEFAULT_ARMS",
    "MAIN_ARMS",
    "FIG3_ARMS",
    "FACTOR_ARMS",
    "SCREEN_ARMS",
    "RECOMMENDED_ARM",
    "run_compare",
    "summary_table",
    "check_curriculum",
    "profile_base",
    "with_overrides",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Arm:
    """One arm of the comparison: a named scheduler config over the task mix (or, ``fig3``, over the
    figure-3 strata at equal weight). ``settings``: ``SchedulerConfig`` keywords of the arm, its policy's
    options as a mapping among them (``{"options": {"factor": 1}}``); they win over the comparison's own
    (``run_compare``'s ``settings``). ``defaults``: options of the arm's policy that the comparison's own
    override (the ``snooze`` arms run the design note's factor 5 unless ``--snooze-factor`` says otherwise).
    ``cost``: start order with several jobs (higher first: the ones that generate most). ``screen``: partial groups
    of at most this many screening rollouts and at most half the profile's group (``screen_size=min(screen, G // 2)``:
    4 of 8 or of 16, 2 of the quick profile's 4); 0: the settings say."""

    name: str
    policy: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    fig3: bool = False
    cost: int = 0
    defaults: Mapping[str, Any] = field(default_factory=dict)
    screen: int = 0

    def config(
        self, profile: Profile, strata: Sequence[str], settings: Mapping[str, Any] | None = None
    ) -> SchedulerConfig:
        """The arm's ``SchedulerConfig`` under ``profile``: the profile's sizes, the comparison's
        ``settings`` (``SchedulerConfig`` fields for every arm; under ``"options"``, each policy's options by
        policy name: an arm takes its own policy's), then the arm's own; figure-3 arms weigh the ``strata``
        equally. The audit is off (``audit=0.0``) unless ``settings`` turn it on: an arm measures its policy
        alone, and the audit's own cost is measured apart (``benchmarks/audit_truth.py``)."""
        base: dict[str, Any] = {
            "batch_size": profile.batch_size,
            "group_size": profile.group_size,
            "max_gen_rounds": profile.max_gen_rounds,
            "audit": 0.0,
        }
        if self.fig3:
            base["weights"] = {s: 1.0 for s in strata}
        shared = dict(settings or {})
        by_policy = shared.pop("options", None) or {}
        own = dict(self.settings)
        if self.screen:
            own["screen_size"] = min(self.screen, profile.group_size // 2)
        options = {**self.defaults, **by_policy.get(self.policy, {}), **own.pop("options", {})}
        return SchedulerConfig(**{**base, **shared, **own}, policy=self.policy, options=options)


_RECOMMENDED_SETTINGS = {k: v for k, v in RECOMMENDED.items() if k != "policy"}
DESIGN_NOTE_SNOOZE: Mapping[str, Any] = {"factor": 5}
"""The design note's snoozing factor, which the ``snooze`` and figure-3 arms reproduce (the library's default,
``SnoozeOptions.factor``, is the recommended 1)."""

ARMS: dict[str, Arm] = {
    a.name: a
    for a in (
        Arm("grpo", "grpo", cost=0),
        Arm("dynamic_sampling", "dynamic_sampling", cost=7),
        Arm("filter", "filter", cost=3),
        Arm("snooze", "snooze", cost=4, defaults=DESIGN_NOTE_SNOOZE),
        Arm("snooze-f1", "snooze", {"options": {"factor": 1}}, cost=6),
        Arm("snooze-f2", "snooze", {"options": {"factor": 2}}, cost=5),
        Arm("predictive", "predictive", cost=2),
        # issue 40's candidate, frozen on the development regimes (research/retention_dev.py, arm f1-carry) and run
        # as a user gets it: the audit at SchedulerConfig's default
        Arm(RECOMMENDED_ARM, "snooze", {**_RECOMMENDED_SETTINGS, "audit": 0.05}, cost=6),
        # plain GRPO's cost (one round a step, every group trained on, zero-signal ones as padding) with too-easy
        # prompts skipped before rollout: TRL's one-round mode
        Arm("one-round", "snooze", {"options": {"factor": 1}, "max_gen_rounds": 1, "on_short": "pad", "audit": 0.05}),
        # partial groups (issue 52): DAPO and the recommended setting with 2 screening rollouts of a prompt first, its
        # rest only when they disagree; every rollout, a stopped screen's 2 too, is in the summary's rollouts
        Arm("dynamic_sampling-screen2", "dynamic_sampling", {"screen_size": 2}, cost=6),
        Arm(f"{RECOMMENDED_ARM}-screen2", "snooze", {**_RECOMMENDED_SETTINGS, "audit": 0.05, "screen_size": 2}, cost=5),
        # issue 52's candidate: the recommended setting with a screen of 4 rollouts (half a group at G=8, a quarter at
        # G=16; 2 at the quick profile's G=4), its rounds holding DAPO's rollouts (gen_batch_size unset: batch_size *
        # G / k screens a round)
        Arm(f"{RECOMMENDED_ARM}-screen4", "snooze", {**_RECOMMENDED_SETTINGS, "audit": 0.05}, cost=5, screen=4),
        Arm("fig3-filter", "filter", fig3=True, cost=1),
        Arm("fig3-snooze", "snooze", fig3=True, cost=8, defaults=DESIGN_NOTE_SNOOZE),
        Arm("fig3-snooze-quota", "snooze", {"mix": "quota"}, fig3=True, cost=9, defaults=DESIGN_NOTE_SNOOZE),
    )
}
"""Every arm ``snooze compare`` knows, in the order of its table."""
MAIN_ARMS: tuple[str, ...] = tuple(n for n, a in ARMS.items() if not a.fig3)
FIG3_ARMS: tuple[str, ...] = tuple(n for n, a in ARMS.items() if a.fig3)
FACTOR_ARMS: dict[str, int] = {
    n: a.settings["options"]["factor"] for n, a in ARMS.items() if "factor" in a.settings.get("options", {})
}
"""Snooze arms at a fixed factor (the ``snooze`` arm takes ``--snooze-factor``, by default
:data:`DESIGN_NOTE_SNOOZE`)."""
SCREEN_ARMS: tuple[str, ...] = tuple(
    n for n, a in ARMS.items() if a.screen or a.settings.get("screen_size") is not None
)
"""Arms with partial groups (``screen_size`` set): an arm of the registry plus ``-screen<k>``."""
DEFAULT_ARMS: tuple[str, ...] = tuple(
    a for a in ARMS if (a not in FACTOR_ARMS or a == RECOMMENDED_ARM) and a not in SCREEN_ARMS
)
"""The arms run when ``--arms`` is not given: all but the factor sweep, the one-round arm and the screening arms (the
recommended setting's arm runs), so the default profile keeps its budget of about 18 minutes on 2 cores (``--arms all``
adds snooze at factors 1 and 2, the one-round arm and the screening arms)."""


def arm_of(arm: str | Arm) -> Arm:
    """An arm by name (or the :class:`Arm` itself); an unknown name is a :class:`ConfigError`."""
    if isinstance(arm, Arm):
        return arm
    if arm not in ARMS:
        raise ConfigError(f"unknown arm {arm!r}: choose from {', '.join(ARMS)}")
    return ARMS[arm]


def _data(
    profile: Profile, tasks: str
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]], set[str]]:
    from snooze.trainer.tasks import parse_tasks, task_splits

    # seed 0, as every compare profile always used: the ids (and snooze baseline's default) stay the same
    pools, tests = task_splits(parse_tasks(tasks), profile.pool_size, profile.test_size, seed=0)
    banned = {r["prompt"] for recs in (*pools.values(), *tests.values()) for r in recs}
    return pools, tests, banned


def _strata(
    profile: Profile, pools: Mapping[str, list[dict[str, Any]]], tests: Mapping[str, list[dict[str, Any]]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Easy and hard strata of the figure-3 task: its pool and test split divided by level."""
    from snooze.trainer.tasks import TaskSpec

    spec = TaskSpec.parse(profile.fig3_task)
    if spec.name not in pools:
        raise ConfigError(f"fig3 task {spec.name} is not among the tasks {sorted(pools)}: add it to --tasks")
    out_pools, out_tests = {}, {}
    for part, stratum in zip(("easy", "hard"), spec.strata(profile.fig3_split)):
        name = f"{part}:{stratum.name}"
        out_pools[name] = [r for r in pools[spec.name] if stratum.lo <= r["level"] <= stratum.hi]
        out_tests[name] = [r for r in tests[spec.name] if stratum.lo <= r["level"] <= stratum.hi]
    return out_pools, out_tests


def check_curriculum(path: Path, pools: Mapping[str, Sequence[Mapping[str, Any]]], profile: Profile) -> Curriculum:
    """Load the curriculum file and check that every dataset and prompt id it names is in ``pools``.

    Fails before the warm-up, with the ``snooze baseline`` call that writes matching ids.
    """
    try:
        cur = Curriculum.from_file(path)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason}); a curriculum is a JSON file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the curriculum file ({exc.strerror})") from None
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
    from snooze.trainer.tasks import parse_tasks
    from snooze.trainer.warmup import warmup

    if banned is None:  # the prompts of the profile's pools and test splits (run_compare has them already)
        _, _, banned = _data(profile, profile.tasks)
    model_cfg = model_config(profile)
    return model_cfg, warmup(
        parse_tasks(profile.tasks), banned, warmup_config(profile), model_cfg, cache_dir=cache_dir, device=device
    )


def _base_accuracy(
    profile: Profile, model_cfg: Any, state: Mapping[str, Any], tests: Mapping[str, Any], device: str
) -> dict[str, dict[str, float]]:
    """The base model's held-out accuracy on every test set (main tasks and strata): greedy and, with
    ``eval_samples``, sampled."""
    from snooze.trainer.evaluate import accuracy_by_task, sampled_accuracy_by_task
    from snooze.trainer.model import TinyGPT

    model = TinyGPT(model_cfg).to(device)
    model.load_state_dict(state)
    out = {"greedy": accuracy_by_task(model, tests)}
    if profile.eval_samples > 0:
        out["sampled"] = sampled_accuracy_by_task(model, tests, profile.eval_samples, profile.temperature)
    return out


def _seed_counts(arms: Sequence[Arm], seeds: int, seeds_of: Mapping[str, int]) -> dict[str, int]:
    """Each arm's number of seeds: ``seeds_of``'s where it names the arm, else ``seeds``; a name of no chosen arm,
    or a count below 1, is a :class:`ConfigError` (nothing runs)."""
    names = {a.name for a in arms}
    unknown = sorted(set(seeds_of) - names)
    if unknown:
        raise ConfigError(f"seeds given for {unknown}, which are not among the arms run ({', '.join(sorted(names))})")
    given = {
        a.name: (seeds_of[a.name], f"seeds_of[{a.name!r}]") if a.name in seeds_of else (seeds, "seeds") for a in arms
    }
    return {name: as_int(n, what, 1) for name, (n, what) in given.items()}


def run_compare(
    out: Path,
    profile: Profile,
    arms: Sequence[str | Arm],
    seeds: int,
    settings: Mapping[str, Any] | None = None,
    *,
    seeds_of: Mapping[str, int] | None = None,
    jobs: int = 1,
    threads: int | None = None,
    cache_dir: Path | None = None,
    device: str = "cpu",
    curriculum: Path | None = None,
    checkpoint_every: int = 50,
    on_step: Callable[[str, int, dict[str, Any]], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run every arm x seed into ``out``; write ``summary.json``/``summary.md``, ``regime.json`` and figures.

    Returns the summary.

    ``arms``: names in :data:`ARMS` or :class:`Arm` objects of your own. ``settings``: ``SchedulerConfig``
    keywords for every arm, each policy's options by policy name under ``"options"`` (``{"carry_surplus": True,
    "options": {"snooze": {"factor": 3}, "predictive": {"margin": 0.3}}}``: each arm takes its policy's; an
    arm's own settings win).
    ``seeds_of``: seeds of some arms by name, in place of ``seeds`` (the family runs DAPO and a candidate on more
    seeds than the other arms; pairing with DAPO takes the seeds both have).
    ``curriculum``: a curriculum file for the main arms (each run loads its own copy).
    ``checkpoint_every``: steps between each run's checkpoints (a killed comparison, rerun, resumes from them).
    ``jobs``: runs trained at once, each in its own worker process (1: one after another, in this process).
    ``threads``: torch CPU threads of each run (default 1). A run's numbers depend on its thread count,
    not on ``jobs``; keep ``jobs x threads`` at most the core count (oversubscribed, two runs of 2 threads
    on 2 cores took 9-10 s per step against 0.26 s alone). The warm-up and the base model's evaluation
    run here with ``threads`` threads too: the base's weights depend on the thread count (one warm-up of
    the default profile on 2 threads differed from the 1-thread one by up to 0.026 in a weight), so a
    fixed count gives every machine the same base whatever ``jobs`` is."""
    import torch

    from snooze.experiments.runner import RunSpec, run_all

    t0 = time.perf_counter()
    chosen = [arm_of(a) for a in arms]
    counts = _seed_counts(chosen, seeds, seeds_of or {})
    settings = dict(settings or {})
    threads = threads or 1
    pools, tests, banned = _data(profile, profile.tasks)
    strata_pools, strata_tests = _strata(
        profile, pools, tests
    )  # for the regime's criterion 5 even without figure-3 arms
    configs = {
        a.name: a.config(profile, list(strata_pools if a.fig3 else pools), settings) for a in chosen
    }  # checked before anything runs
    if curriculum is not None:
        if all(a.fig3 for a in chosen):
            raise ConfigError(f"--curriculum applies to the main arms ({', '.join(MAIN_ARMS)}) only; none is selected")
        check_curriculum(curriculum, pools, profile)
    out.mkdir(parents=True, exist_ok=True)  # after the checks: a refused comparison writes nothing
    torch.set_num_threads(threads)
    model_cfg, base = profile_base(profile, cache_dir, device, banned)
    base_acc = _base_accuracy(profile, model_cfg, base.state_dict, {**tests, **strata_tests}, device)
    specs = []
    for arm in sorted(chosen, key=lambda a: -a.cost) if jobs > 1 else chosen:
        n_seeds = profile.fig3_seeds if arm.fig3 else counts[arm.name]
        for seed in range(profile.first_seed, profile.first_seed + n_seeds):
            specs.append(
                RunSpec(
                    arm.name,
                    seed,
                    out / arm.name / f"seed{seed}",
                    "fig3" if arm.fig3 else "main",
                    configs[arm.name],
                    train_config(profile, seed, device, checkpoint_every),
                    None if arm.fig3 else curriculum,
                )
            )
    data = {"main": (pools, tests), "fig3": (strata_pools, strata_tests)}
    resumed = sum(
        (s.run_dir / METRICS_FILE).exists() for s in specs
    )  # runs this invocation does not train from the start
    run_all(specs, data, model_cfg, base.state_dict, jobs=jobs, threads=threads, on_step=on_step)
    runs = {arm.name: [s.run_dir for s in specs if s.arm == arm.name] for arm in chosen}
    fig3 = {a.name for a in chosen if a.fig3}
    summary = _write_outputs(out, profile, runs, pools, strata_pools, base_acc, time.perf_counter() - t0, resumed, fig3)
    meta = {
        "profile": asdict(profile),
        "settings": settings,
        "arms": {n: c.to_dict() for n, c in configs.items()},
        "jobs": jobs,
        "threads": threads,
        "warmup": {
            "steps": base.steps,
            "val_accuracy": base.val_accuracy,
            "val_by_task": base.val_by_task,
            "task_steps": base.task_steps,
            "key": base.key,
            "cached": base.cached,
            "seconds": base.seconds,
        },
        "base_accuracy": base_acc,
        "wall_seconds": time.perf_counter() - t0,
        "resumed_runs": resumed,
    }
    if curriculum is not None:
        meta["curriculum"] = {
            "path": str(curriculum),
            "sha256": hashlib.sha256(read_regular(curriculum)).hexdigest(),
            "arms": [a for a in runs if a not in fig3],
        }
    else:
        meta["curriculum"] = None
    (out / "run_meta.json").write_text(json.dumps(meta, indent=1, default=str))
    return summary


def _write_outputs(
    out: Path,
    profile: Profile,
    runs: Mapping[str, list[Path]],
    pools: Mapping[str, Any],
    strata_pools: Mapping[str, Any],
    base_acc: Mapping[str, Mapping[str, float]],
    wall: float,
    resumed: int = 0,
    fig3: set[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """``summary.json``, ``summary.md``, ``regime.json`` and the figures, from the run folders. ``wall``:
    this invocation's seconds; ``resumed``: runs that had logs when it started (then ``wall`` is not the
    comparison's wall time, and ``regime.json`` says so instead of reporting it)."""
    from snooze.experiments.regime import regime_checks
    from snooze.logs import read_metrics
    from snooze.trainer.loop import read_result

    fig3 = set(FIG3_ARMS) if fig3 is None else fig3

    def prompts(arm: str) -> int:
        return sum(len(v) for v in (strata_pools if arm in fig3 else pools).values())

    summary = {arm: summarise([read_result(d) for d in dirs], prompts(arm)) for arm, dirs in runs.items()}
    if "dynamic_sampling" in summary:
        summary["dynamic_sampling"]["oracle_groups"] = _oracle(runs["dynamic_sampling"], summary["dynamic_sampling"])
    optimal = profile.steps * profile.batch_size
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "summary.md").write_text(summary_table(summary, markdown=True, optimal_groups=optimal) + "\n")
    kind = "sampled" if "sampled" in base_acc else "greedy"
    strata = {k: v for k, v in base_acc[kind].items() if k in strata_pools}
    records = {arm: [read_metrics(d) for d in runs[arm]] for arm in ("dynamic_sampling", "grpo") if arm in runs}
    regime = regime_checks(records, {a: summary[a] for a in records}, strata, wall, resumed_runs=resumed)
    (out / "regime.json").write_text(json.dumps(regime, indent=1))
    _figures(out, runs)
    return summary


def _oracle(dirs: Sequence[Path], dapo: Mapping[str, Any]) -> dict[str, Any]:
    """The oracle floor per DAPO seed (:mod:`snooze.experiments.oracle`).

    Its groups trained on plus its zero-signal first looks.
    """
    from snooze.experiments.oracle import oracle_groups
    from snooze.experiments.summary import stat
    from snooze.logs import REWARDS_FILE, read_reward_log

    trained = dapo["train_groups"]["by_seed"]
    return stat([oracle_groups(read_reward_log(d / REWARDS_FILE), int(t)) for d, t in zip(dirs, trained)])


def _figures(out: Path, runs: Mapping[str, list[Path]]) -> list[Path]:
    try:
        from snooze.plots import write_compare_figures
    except ImportError:
        logger.warning("figures skipped: snooze.plots is not available")
        return []
    return write_compare_figures(out, runs)

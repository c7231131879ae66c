"""The regime family: the reference experiment repeated in regimes nobody tuned a policy for.

Each regime is a :class:`~snooze.experiments.profiles.Profile`, chosen by the criteria of
:mod:`snooze.experiments.regime` on DAPO (``dynamic_sampling``) and plain ``grpo`` alone, before any
skipping arm was run in it. Together they span the task mix (two tasks, one task), the level ranges,
the pool size (300 to 3,000 prompts), the rollout temperature (0.4, 0.7), one saturated regime (a
pool DAPO uses up: most of its late generation is thrown away, every step at ``max_gen_rounds``), and
three that move forgetting: a third of the learning rate (two regimes) and a model 8x larger, and the group
size (16 rollouts a prompt, DAPO's own, against 8 elsewhere).

:func:`run_family` runs every regime with :func:`~snooze.experiments.compare.run_compare` into
``out/<regime>/``; :mod:`snooze.experiments.family_table` turns the folders into the family's table
(ratio of generated groups to DAPO's and late accuracy gap, paired by seed) and frontier figures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from snooze.experiments.profiles import PROFILES, Profile

__all__ = ["FAMILY", "FAMILY_ARMS", "FAMILY_SEEDS_OF", "run_family"]

_BASE = PROFILES["default"]

FAMILY: dict[str, Profile] = {
    # rev:3-8 + sort:3-7, 1,000 prompts per task, T 0.4: the reference experiment's own regime.
    "default": _BASE,
    # The same tasks sampled at T 0.7: more slips on mastered prompts, so fewer groups are all-correct.
    "temp-0.7": replace(_BASE, temperature=0.7),
    # 1,500 prompts per task (3,000 in all): each prompt visited about half as often.
    "large-pool": replace(_BASE, pool_size=1500, warmup_eval_every=10),
    # One task, 300 prompts, 8 groups per step for 120 steps: a small pool visited many times.
    "small-pool": replace(
        _BASE, tasks="rev:3-8", fig3_task="rev:3-8", pool_size=300, batch_size=8, steps=120, eval_every=10
    ),
    # One task, a wider level range of the other family.
    "one-task": replace(_BASE, tasks="sort:3-8", fig3_task="sort:3-8", fig3_split=None, pool_size=1500),
    # Easy levels and a large pool: DAPO masters it, then spends most of each step on all-correct groups.
    "saturated": replace(_BASE, tasks="rev:3-6", fig3_task="rev:3-6", fig3_split=None, pool_size=3000),
    # Regimes that move forgetting (research/family_candidates.py, DAPO and GRPO only, seeds 0-2). The default
    # regime at a third of the learning rate: smaller updates, as an LLM's.
    "lr-1e-4": replace(_BASE, lr=1e-4),
    # The other lr-1e-4 regime: of the three candidates that met the criteria (large-pool, one-task, temp-0.7
    # at lr 1e-4), the one where DAPO wastes most late (criterion 4: 5.7 rounds a step in the last 10%).
    "one-task-lr-1e-4": replace(
        _BASE, tasks="sort:3-8", fig3_task="sort:3-8", fig3_split=None, pool_size=1500, lr=1e-4
    ),
    # The default regime with a model 8x larger (4 layers x 128): more to lose on prompts it stops seeing.
    "4x128": replace(_BASE, n_layer=4, d_model=128),
    # G=16, DAPO's own group size (issue 52; research/family_candidates.py, DAPO and GRPO only, seeds 0-2): the
    # default regime with 8 groups of 16 a step, so a step's rollouts stay the family's 128.
    "g16": replace(_BASE, group_size=16, batch_size=8),
}
"""The family's regimes, by name. Each fixed before any skipping arm was run in it."""

FAMILY_ARMS: tuple[str, ...] = (
    "dynamic_sampling",
    "snooze-f1-carry",
    "snooze-f1-carry-screen4",
    "grpo",
    "one-round",
    "snooze-f1",
)
"""The arms of the family's report: DAPO and plain GRPO (the criteria), issue 40's candidate (the recommended setting,
reported on seeds 0-4 with DAPO), issue 52's candidate (the recommended setting with a screen of 4, seeds 0-4), the
one-round mode, and snoozing at factor 1 without the carried surplus (the recommended setting's other half)."""
FAMILY_SEEDS_OF: dict[str, int] = {"dynamic_sampling": 5, "snooze-f1-carry": 5, "snooze-f1-carry-screen4": 5}
"""The arms the report runs on seeds 0-4 (the others on 0-2)."""


def run_family(
    out: Path,
    regimes: Sequence[str] | None = None,
    arms: Sequence[str] = FAMILY_ARMS,
    seeds: int = 3,
    first_seed: int = 0,
    jobs: int = 2,
    threads: int = 1,
    cache_dir: Path | None = None,
    on_regime: Callable[[str, dict[str, Any]], None] | None = None,
    seeds_of: Mapping[str, int] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run ``arms`` x ``seeds`` in every regime into ``out/<regime>/`` (``seeds_of``: some arms' own number of
    seeds); return each regime's summary.

    A rerun resumes: finished runs are read back, killed ones continue from their checkpoints."""
    from snooze.core.errors import ConfigError
    from snooze.experiments.compare import run_compare

    names = list(regimes) if regimes else list(FAMILY)
    unknown = sorted(set(names) - set(FAMILY))
    if unknown:
        raise ConfigError(f"unknown regime(s) {unknown}: choose from {', '.join(FAMILY)}")
    summaries = {}
    for name in names:
        profile = replace(FAMILY[name], first_seed=first_seed)
        summaries[name] = run_compare(
            out / name, profile, list(arms), seeds, seeds_of=seeds_of, jobs=jobs, threads=threads, cache_dir=cache_dir
        )
        if on_regime is not None:
            on_regime(name, summaries[name])
    return summaries

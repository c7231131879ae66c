"""How ``batch_size``, ``gen_batch_size``, ``max_gen_rounds`` and the group size decide what skipping saves:
the table of docs/sizing.md, measured on the toy of the README's quick start.

The toy (numpy only, no model): a pool of ``--prompts`` prompts, a share ``--solved`` of them always solved
(every rollout right: the too-easy prompts that pile up late in a run), the others right with a chance drawn
once per prompt, uniform in [0.05, 0.95]. Nothing learns, so each setting reaches a steady state; every
setting runs DAPO (``policy="dynamic_sampling"``) and the recommended skipping setting
(``snooze.RECOMMENDED``: snoozing at factor 1, the surplus carried) on the same pool and seeds. Per step,
over the steps after the first ``--warm`` (means over ``--seeds`` seeds): DAPO's generation rounds, groups
generated, groups trained; the recommended setting's the same; and the generation it saves (1 - its groups
generated / DAPO's). Prints two Markdown tables (about 20 s): the default setting on pools with more and
more solved prompts (``--pools``), then each knob changed on its own on the pool with ``--solved`` solved::

    PYTHONPATH=src python benchmarks/sizing.py
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

import numpy as np

import snooze

SKIPPING = snooze.RECOMMENDED
"""The skipping setting measured: the recommended one."""


@dataclass(frozen=True)
class Setting:
    batch_size: int = 32
    gen_batch_size: int = 32
    max_gen_rounds: int = 8
    group_size: int = 8


SETTINGS = [
    Setting(),
    Setting(gen_batch_size=48),
    Setting(gen_batch_size=64),
    Setting(gen_batch_size=96),
    Setting(gen_batch_size=16),
    Setting(max_gen_rounds=2),
    Setting(max_gen_rounds=4),
    Setting(group_size=4),
    Setting(group_size=16),
]
"""The default setting, then one knob changed at a time."""


def pool(prompts: int, solved: float, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    p = np.where(rng.random(prompts) < solved, 1.0, rng.uniform(0.05, 0.95, prompts))
    return [{"id": i, "p": float(x)} for i, x in enumerate(p)]


def run(setting: Setting, policy: dict, records: list[dict], steps: int, warm: int, seed: int) -> dict[str, float]:
    """Per-step means over the steps after ``warm``: rounds, groups generated, groups trained."""
    config = snooze.SchedulerConfig(
        batch_size=setting.batch_size,
        gen_batch_size=setting.gen_batch_size,
        max_gen_rounds=setting.max_gen_rounds,
        group_size=setting.group_size,
        **policy,
    )
    sched = snooze.Scheduler({"toy": records}, config, seed=seed)
    rng = np.random.default_rng(seed + 1)
    G = setting.group_size

    def rollout(cands: list) -> np.ndarray:  # [len(cands), G] rewards, each right with its prompt's chance
        p = np.array([c.record["p"] for c in cands])[:, None]
        return (rng.random((len(cands), G)) < p).astype(float)

    rows = [sched.step(rollout).metrics for _ in range(steps)][warm:]
    return {k: float(np.mean([m[key] for m in rows])) for k, key in (
        ("rounds", "gen/rounds"), ("generated", "gen/groups"), ("trained", "train/groups"))}  # fmt: skip


def measure(setting: Setting, prompts: int, solved: float, steps: int, warm: int, seeds: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, policy in (("dapo", {"policy": "dynamic_sampling"}), ("skip", SKIPPING)):
        per_seed = [run(setting, policy, pool(prompts, solved, s), steps, warm, s) for s in range(seeds)]
        for k in per_seed[0]:
            out[f"{name}_{k}"] = float(np.mean([r[k] for r in per_seed]))
    out["saved"] = 1 - out["skip_generated"] / out["dapo_generated"]
    return out


def table(results: list[tuple[str, Setting, dict[str, float]]]) -> str:
    head = (
        "| solved | batch_size | gen_batch_size | max_gen_rounds | G | DAPO rounds | DAPO generated | DAPO trained "
        "| recommended rounds | recommended generated | recommended trained | generation saved |"
    )
    lines = [head, "|" + "---|" * 12]
    for pool_name, s, r in results:
        lines.append(
            f"| {pool_name} | {s.batch_size} | {s.gen_batch_size} | {s.max_gen_rounds} | {s.group_size} "
            f"| {r['dapo_rounds']:.2f} | {r['dapo_generated']:.1f} | {r['dapo_trained']:.1f} "
            f"| {r['skip_rounds']:.2f} | {r['skip_generated']:.1f} | {r['skip_trained']:.1f} "
            f"| {round(100 * r['saved'])}% |"  # (an int: a saving of -0.1% is 0%, never -0%)
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", type=int, default=1000, help="prompts in the pool")
    p.add_argument("--solved", type=float, default=0.7, help="share of the pool every rollout solves (knob table)")
    p.add_argument("--pools", default="0.3,0.5,0.7,0.9", help="shares solved of the pool table, comma-separated")
    p.add_argument("--steps", type=int, default=120, help="steps per run")
    p.add_argument("--warm", type=int, default=20, help="first steps left out of the means")
    p.add_argument("--seeds", type=int, default=3, help="seeds per setting and policy")
    p.add_argument("--json", action="store_true", help="print the numbers as one JSON object after the table")
    args = p.parse_args(argv)
    runs = (args.prompts, args.steps, args.warm, args.seeds)
    by_pool = [(f"{x:.0%}", SETTINGS[0], measure(SETTINGS[0], args.prompts, x, *runs[1:])) for x in _shares(args.pools)]
    by_knob = [(f"{args.solved:.0%}", s, measure(s, args.prompts, args.solved, *runs[1:])) for s in SETTINGS]
    print(
        f"pools of {args.prompts} prompts, a share always solved, the rest right with a chance in [0.05, 0.95]; "
        f"{args.steps} steps, the first {args.warm} left out, {args.seeds} seeds; per step:\n"
    )
    print(table(by_pool) + "\n")
    print(table(by_knob))
    if args.json:
        print(json.dumps([{"solved": name, **s.__dict__, **r} for name, s, r in by_pool + by_knob]))


def _shares(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


if __name__ == "__main__":
    main()

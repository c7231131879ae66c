"""How ``batch_size``, ``gen_batch_size``, ``max_gen_rounds`` and the group size decide what skipping saves:
the table of docs/sizing.md, measured on the toy of the README's quick start.

The toy (numpy only, no model): a pool of ``--prompts`` prompts, a share ``--solved`` of them always solved
(every rollout right: the too-easy prompts that pile up late in a run), the others right with a chance drawn
once per prompt, uniform in [0.05, 0.95]. Nothing learns, so each setting reaches a steady state; every
setting runs DAPO (``policy="dynamic_sampling"``) and snoozing (``policy="snooze", options={"factor": 1}``)
on the same pool and seeds. Per step, over the steps after the first ``--warm`` (means over ``--seeds``
seeds): DAPO's generation rounds, groups generated, groups trained; snoozing's the same; and the
generation snoozing saves (1 - its groups generated / DAPO's). Prints a Markdown table (about 20 s)::

    PYTHONPATH=src python benchmarks/sizing.py
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

import numpy as np

import snooze

SKIPPING = {"policy": "snooze", "options": {"factor": 1}}
"""The skipping setting measured (docs/sizing.md marks where the recommended one goes)."""


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


def table(results: list[tuple[Setting, dict[str, float]]]) -> str:
    head = (
        "| batch_size | gen_batch_size | max_gen_rounds | G | DAPO rounds | DAPO generated | DAPO trained "
        "| snooze f1 rounds | snooze f1 generated | snooze f1 trained | generation saved |"
    )
    lines = [head, "|" + "---|" * 11]
    for s, r in results:
        lines.append(
            f"| {s.batch_size} | {s.gen_batch_size} | {s.max_gen_rounds} | {s.group_size} "
            f"| {r['dapo_rounds']:.2f} | {r['dapo_generated']:.1f} | {r['dapo_trained']:.1f} "
            f"| {r['skip_rounds']:.2f} | {r['skip_generated']:.1f} | {r['skip_trained']:.1f} "
            f"| {100 * r['saved']:.0f}% |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", type=int, default=1000, help="prompts in the pool")
    p.add_argument("--solved", type=float, default=0.7, help="share of the pool every rollout solves")
    p.add_argument("--steps", type=int, default=120, help="steps per run")
    p.add_argument("--warm", type=int, default=20, help="first steps left out of the means")
    p.add_argument("--seeds", type=int, default=3, help="seeds per setting and policy")
    p.add_argument("--json", action="store_true", help="print the numbers as one JSON object after the table")
    args = p.parse_args(argv)
    results = [(s, measure(s, args.prompts, args.solved, args.steps, args.warm, args.seeds)) for s in SETTINGS]
    print(
        f"pool: {args.prompts} prompts, {args.solved:.0%} always solved, the rest right with a chance in "
        f"[0.05, 0.95]; {args.steps} steps, the first {args.warm} left out, {args.seeds} seeds; per step:"
    )
    print(table(results))
    if args.json:
        print(json.dumps([{**s.__dict__, **r} for s, r in results]))


if __name__ == "__main__":
    main()

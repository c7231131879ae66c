"""The replay's estimate of DAPO's rounds per step from a plain GRPO log, against DAPO run on the log's own model.

    nice -n 19 env PYTHONPATH=src python benchmarks/dapo_rounds_fork.py --out runs/dapo-fork --seeds 3 \
        --forks-per-window 5 --threads 1

``benchmarks/dapo_rounds_truth.py`` compares the estimate with a paired DAPO run that trained its own model;
late, the two models have drifted apart. This one measures the estimator alone. For each seed it trains the
``grpo`` arm of ``snooze compare --profile default`` (the same base, configuration and seed, so the same run),
stopping at ``--forks-per-window`` steps spread evenly over each of three windows of 10% of the steps (the
verdict's early window, steps 0-29; a middle one, 135-164; the verdict's late window, 270-299; one fork: the
window's middle step) to keep the model of that step (the run's committed checkpoint, resumed afterwards).
From each of those models it runs the ``dynamic_sampling`` arm for
``--fork-steps`` steps at a learning rate of ``--fork-lr`` (1e-9: AdamW moves each weight by about that a step,
so every step samples the fork's model; the largest weight change is printed), with the scheduler seeded
``seed + 1000`` (a prompt stream of its own, not the GRPO run's first draws).

Per window and seed it prints the estimate (:func:`snooze.analysis.stepsim.expected_rounds` at the GRPO
log's share of groups with signal over the window, at the verdict's batch, generation batch and round limit:
for the early and late windows exactly the numbers ``snooze replay`` prints), DAPO's actual rounds per step
(groups per step over the generation batch, from the forks' reward logs, averaged over the window's forks) and
the ratio; and, as a diagnostic, the formula at the forks' own signal share (what the estimate would be
without the window's sampling noise and the model's drift over the window). Then the mean ratio per window
and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from snooze.analysis.logrun import logged_run
from snooze.analysis.stepsim import expected_rounds
from snooze.analysis.verdict import dapo_rounds_of
from snooze.core.classify import SIGNAL, classify
from snooze.core.config import SchedulerConfig
from snooze.experiments.compare import ARMS, profile_base
from snooze.experiments.profiles import PROFILES, train_config
from snooze.logs import REWARDS_FILE, read_reward_log
from snooze.trainer import checkpoint as ckpt
from snooze.trainer.config import GRPOConfig, TrainConfig
from snooze.trainer.loop import train
from snooze.trainer.tasks import parse_tasks, task_splits

WINDOWS = {"early": (0.0, 0.1), "middle": (0.45, 0.55), "late": (0.9, 1.0)}
"""Fork windows as fractions of the run's steps; the fork is at the window's middle step."""
FORK_SEED = 1000
"""Added to the run's seed for the fork's scheduler and sampler."""


def _signal(path: Path) -> tuple[np.ndarray, np.ndarray, SchedulerConfig]:
    log = read_reward_log(path)
    cfg = SchedulerConfig(group_size=log.group_size, reward_range=log.header.reward_range)
    signal = classify(log.rewards, cfg.reward_range, cfg.easy_threshold, cfg.hard_threshold, cfg.signal_tol) == SIGNAL
    return np.asarray(log.steps), signal, cfg


def _committed_step(run_dir: Path) -> tuple[int, Path | None]:
    folder = ckpt.committed(run_dir / "checkpoint")
    if folder is None:
        return 0, None
    return json.loads((folder / "trainer.json").read_text())["step"], folder


def _grpo_with_forks(out: Path, seed: int, fork_steps: list[int], data: tuple, base: dict, model_cfg) -> Path:
    """Train the grpo arm of ``seed`` to the end, keeping its weights at each of ``fork_steps`` in ``out/weights``."""
    profile = PROFILES["default"]
    pools, tests = data
    run_dir = out / "grpo" / f"seed{seed}"
    sched = ARMS["grpo"].config(profile, list(pools))
    cfg = train_config(profile, seed)
    for stop in [*fork_steps, profile.steps]:
        kept = out / "weights" / f"seed{seed}-step{stop}.pt"
        done, _ = _committed_step(run_dir)
        if stop < profile.steps and kept.exists():
            continue
        if done > stop:
            raise SystemExit(f"{run_dir} is at step {done}, past fork {stop}, and {kept} is missing: use a new --out")
        if stop > done:
            train(run_dir, pools, tests, sched, cfg, model_cfg, base, stop_after=stop - done)
        done, folder = _committed_step(run_dir)
        assert done == stop, (done, stop)
        if stop < profile.steps:
            kept.parent.mkdir(parents=True, exist_ok=True)
            state = torch.load(folder / "model.pt", map_location="cpu", weights_only=True)
            torch.save(state, kept)
    return run_dir


def _fork(out: Path, seed: int, step: int, data: tuple, model_cfg, fork_steps: int, lr: float) -> dict:
    """DAPO from the GRPO run's weights at ``step``: its rounds per step and signal share, and how far it moved."""
    profile = PROFILES["default"]
    pools, tests = data
    start = torch.load(out / "weights" / f"seed{seed}-step{step}.pt", map_location="cpu", weights_only=True)
    run_dir = out / "fork" / f"step{step}" / f"seed{seed}"
    sched = ARMS["dynamic_sampling"].config(profile, list(pools))
    cfg = TrainConfig(
        steps=fork_steps,
        eval_every=fork_steps,
        checkpoint_every=0,
        seed=seed + FORK_SEED,
        temperature=profile.temperature,
        grpo=GRPOConfig(lr=lr, updates_per_batch=profile.updates_per_batch),
    )
    train(run_dir, pools, tests, sched, cfg, model_cfg, start)
    _, folder = _committed_step(run_dir)
    end = torch.load(folder / "model.pt", map_location="cpu", weights_only=True)
    moved = max(float((end[k] - start[k]).abs().max()) for k in start)
    log = read_reward_log(run_dir / REWARDS_FILE)
    gen = log.header.gen_batch_size
    _, groups = np.unique(np.asarray(log.steps), return_counts=True)
    steps, signal, _ = _signal(run_dir / REWARDS_FILE)
    return {"rounds": float(np.mean(groups / gen)), "signal_share": float(signal.mean()), "max_weight_change": moved}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder of the runs (resumed when rerun)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 of the default profile")
    parser.add_argument("--fork-steps", type=int, default=30, help="DAPO steps run from each fork")
    parser.add_argument("--fork-lr", type=float, default=1e-9, help="the forks' learning rate (tiny: the model stays)")
    parser.add_argument(
        "--forks-per-window", type=int, default=1, help="forks spread evenly over each window (1: its middle step)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()
    for name in ("seeds", "fork_steps", "forks_per_window", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.forks_per_window > 30:
        parser.error("--forks-per-window must be at most 30 (the steps of a window)")
    if not 0 < args.fork_lr < float("inf"):
        parser.error("--fork-lr must be a finite number above 0 (the trainer's learning rate)")
    torch.set_num_threads(args.threads)
    profile = PROFILES["default"]
    pools, tests = task_splits(parse_tasks(profile.tasks), profile.pool_size, profile.test_size, seed=0)
    banned = {r["prompt"] for recs in (*pools.values(), *tests.values()) for r in recs}
    model_cfg, base = profile_base(profile, None, "cpu", banned)
    n = profile.steps
    bounds = {w: (round(a * n), round(b * n)) for w, (a, b) in WINDOWS.items()}  # steps [lo, hi)
    k = args.forks_per_window
    forks = {w: [lo + (2 * i + 1) * (hi - lo) // (2 * k) for i in range(k)] for w, (lo, hi) in bounds.items()}
    rows = []
    for seed in range(args.seeds):
        t0 = time.perf_counter()
        every = sorted({s for f in forks.values() for s in f})
        grpo = _grpo_with_forks(args.out, seed, every, (pools, tests), base.state_dict, model_cfg)
        log = read_reward_log(grpo / REWARDS_FILE)
        steps, signal, classes = _signal(grpo / REWARDS_FILE)
        verdict = dapo_rounds_of(log, logged_run(log), classes)
        batch, gen, cap = verdict["batch_size"], verdict["gen_batch_size"], verdict["max_gen_rounds"]
        for window, at in forks.items():
            lo, hi = bounds[window]
            mine = (steps >= lo) & (steps < hi)
            share = float(signal[mine].mean())
            estimate = expected_rounds(share, batch, gen, cap)
            if window in verdict:  # the verdict's own windows: the number snooze replay prints
                assert abs(verdict[window]["rounds"] - estimate) < 1e-9, (window, verdict[window], estimate)
            runs = [
                _fork(args.out, seed, step, (pools, tests), model_cfg, args.fork_steps, args.fork_lr) for step in at
            ]
            rounds = float(np.mean([f["rounds"] for f in runs]))
            fork_share = float(np.mean([f["signal_share"] for f in runs]))
            formula = float(np.mean([expected_rounds(f["signal_share"], batch, gen, cap) for f in runs]))
            rows.append({
                "seed": seed, "window": window, "grpo_steps": [lo, hi - 1], "fork_steps": at,
                "grpo_signal_share": share, "estimate": estimate, "dapo_rounds": rounds,
                "ratio": estimate / rounds, "fork_signal_share": fork_share, "formula_at_fork_share": formula,
                "max_weight_change": max(f["max_weight_change"] for f in runs),
                "per_fork": [{"step": s, **f} for s, f in zip(at, runs)],
            })  # fmt: skip
        print(f"seed {seed}: {time.perf_counter() - t0:.0f} s", flush=True)
    print(
        f"{'seed':<6}{'window':<8}{'GRPO steps':>12}{'forks':>6}{'GRPO signal':>13}{'estimate':>10}{'DAPO ran':>10}"
        f"{'ratio':>8}{'fork signal':>13}{'formula there':>15}{'max dw':>10}"
    )
    for r in rows:
        span = f"{r['grpo_steps'][0]}..{r['grpo_steps'][1]}"
        print(
            f"{r['seed']:<6}{r['window']:<8}{span:>12}{len(r['fork_steps']):>6}{r['grpo_signal_share']:>13.3f}"
            f"{r['estimate']:>10.2f}{r['dapo_rounds']:>10.2f}{r['ratio']:>8.3f}{r['fork_signal_share']:>13.3f}"
            f"{r['formula_at_fork_share']:>15.2f}{r['max_weight_change']:>10.1e}"
        )
    for window in forks:
        ratios = [r["ratio"] for r in rows if r["window"] == window]
        formula = [r["formula_at_fork_share"] / r["dapo_rounds"] for r in rows if r["window"] == window]
        print(
            f"{window}: mean estimate / DAPO {np.mean(ratios):.3f} (seeds {min(ratios):.3f} to {max(ratios):.3f}); "
            f"formula at the fork's share / DAPO {np.mean(formula):.3f}"
        )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()

"""``snooze replay``'s headline against the truth: a DAPO run of the reference trainer, replayed under
``snooze:1`` and ``snooze:5``, beside real snooze runs at factors 1 and 5 on the same seeds.

    PYTHONPATH=src .venv/bin/python benchmarks/replay_truth.py --out runs/replay-truth --first-seed 100 --seeds 3

Runs ``snooze compare --arms dynamic_sampling,snooze-f1,snooze --jobs 1 --threads 1`` into ``--out`` (the
default profile: 300 steps, batch 16, G = 8; about 25 s a run on one free core; runs already there are
resumed, so a second call only reads them), then for each seed replays the DAPO arm's reward log as
``snooze replay`` does (its header gives the run's loop) and prints, per policy: the headline (groups the
policy would have generated for the log's signal groups, with its 95% bootstrap interval over the log's
prompts), the real arm's ``total/gen_groups``, whether it lies inside the interval, and the error. For the
record it also prints two other estimates: the step simulation (``snooze replay``'s details) and a
per-step rounds model (each logged step's kept-line signal rate, smoothed over 11 steps, through DAPO's
round loop in expectation, scaled by what the same model gives for the DAPO log itself).
"""

from __future__ import annotations

import argparse
import json
from math import comb
from pathlib import Path

import numpy as np

from snooze.analysis import policy_names, replay_policies
from snooze.analysis._chains import Encounters, walk
from snooze.analysis.logrun import logged_run
from snooze.analysis.replay import _classify, _replayable
from snooze.cli.main import main as snooze
from snooze.core.classify import SIGNAL
from snooze.core.config import SchedulerConfig
from snooze.logs import read_reward_log

ARMS = {1: "snooze-f1", 5: "snooze"}  # factor -> the compare arm that trains it


def _real(run: Path) -> int:
    return int(json.loads(run.joinpath("metrics.jsonl").read_text().splitlines()[-1])["total/gen_groups"])


def _rounds(r: float, batch: int, gen: int, max_rounds: int) -> float:
    """Expected rounds of DAPO's step loop when each round of ``gen`` groups gives Binomial(gen, r) signal groups."""
    pmf = np.array([comb(gen, j) * r**j * (1 - r) ** (gen - j) for j in range(gen + 1)])
    dist = np.zeros(batch + 1)
    dist[0] = 1.0  # signal groups so far, capped at the batch
    expected = 0.0
    for _ in range(max_rounds):
        expected += dist[:batch].sum()
        nxt = np.zeros(batch + 1)
        nxt[batch] = dist[batch]
        for have in np.flatnonzero(dist[:batch]):
            np.add.at(nxt, np.minimum(have + np.arange(gen + 1), batch), dist[have] * pmf)
        dist = nxt
    return expected


def _rounds_model(log, skipped: np.ndarray, signal: np.ndarray, shape, window: int = 5) -> float:  # noqa: ANN001
    steps = log.steps - log.steps.min()
    n = int(steps.max()) + 1
    per = [
        np.bincount(steps, weights=w, minlength=n) for w in (~skipped, ~skipped & signal, np.ones_like(signal), signal)
    ]
    pol = dapo = 0.0
    for t in range(n):
        lo, hi = max(0, t - window), min(n, t + window + 1)
        kept, kept_sig, every, every_sig = (float(x[lo:hi].sum()) for x in per)
        args = (shape.batch_size, shape.gen_batch_size, shape.max_gen_rounds)
        pol += _rounds(kept_sig / max(kept, 1.0), *args)
        dapo += _rounds(every_sig / every, *args)
    return len(log) * pol / dapo


def _row(seed: int, log_path: Path, out: Path) -> list[dict]:
    log = read_reward_log(log_path)
    run = logged_run(log)
    policies = [p for p in policy_names(sorted(ARMS)) if p.factor in ARMS]
    results = replay_policies(log, policies, SchedulerConfig(group_size=log.group_size), run.shape)
    cfg = SchedulerConfig(group_size=log.group_size)
    outcomes = _classify(log, cfg)
    prompt, keys = log.prompt_index()
    rows = []
    for pol in policies:
        skipped, _ = walk(
            Encounters(prompt, len(keys)), _replayable(pol, log.group_size), outcomes, log.rewards, (0, 1)
        )
        h = results[pol.name]["headline"]
        real = _real(out / ARMS[pol.factor] / f"seed{seed}")
        lo, hi = h["groups_interval"]
        rows.append(
            {
                "seed": seed,
                "policy": pol.name,
                "log": len(log),
                "estimate": h["groups"],
                "interval": [lo, hi],
                "real": real,
                "inside": lo <= real <= hi,
                "error": h["groups"] / real - 1,
                "step_sim_saved": results[pol.name].get("simulated", {}).get("saved_frac"),
                "real_saved": 1 - real / len(log),
                "rounds_model": _rounds_model(log, skipped, outcomes == SIGNAL, run.shape),
                "header": log.header is not None,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="snooze compare's output folder (made or resumed)")
    parser.add_argument("--first-seed", type=int, default=100, help="first seed (dev seeds: 100 and up)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds")
    args = parser.parse_args()
    arms = "dynamic_sampling," + ",".join(ARMS.values())
    compare = ["compare", "--out", str(args.out), "--arms", arms, "--first-seed", str(args.first_seed)]
    if snooze([*compare, "--seeds", str(args.seeds), "--jobs", "1", "--threads", "1"]) != 0:
        raise SystemExit("snooze compare failed")
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        rows += _row(seed, args.out / "dynamic_sampling" / f"seed{seed}" / "rewards.jsonl", args.out)
    print("\nseed  policy    DAPO log  replay headline [95% interval]    real  inside  error   rounds model  (error)")
    for r in rows:
        lo, hi = r["interval"]
        print(
            f"{r['seed']:<5} {r['policy']:<9} {r['log']:>8,}  {r['estimate']:>8,.0f} [{lo:>6,.0f} .. {hi:>6,.0f}]"
            f"  {r['real']:>6,}  {'yes' if r['inside'] else 'no':>6}  {100 * r['error']:+5.1f}%  "
            f"{r['rounds_model']:>12,.0f}  ({100 * (r['rounds_model'] / r['real'] - 1):+.1f}%)"
        )
    inside = sum(r["inside"] for r in rows)
    mean_abs = np.mean([abs(r["error"]) for r in rows])
    mean_rounds = np.mean([abs(r["rounds_model"] / r["real"] - 1) for r in rows])
    print(f"\nreal generation inside the headline's interval: {inside} of {len(rows)}")
    print(f"mean |error|: headline {100 * mean_abs:.1f}%, rounds model {100 * mean_rounds:.1f}%")
    sims = [r for r in rows if r["step_sim_saved"] is not None]
    for r in sims:
        print(
            f"  step sim, {r['policy']} seed {r['seed']}: saved {100 * r['step_sim_saved']:.1f}% "
            f"(real saving over the whole run {100 * r['real_saved']:.1f}%)"
        )
    (args.out / "replay_truth.json").write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {args.out / 'replay_truth.json'}")


if __name__ == "__main__":
    main()

"""Why ``snooze/saved/*`` reads low against the paired DAPO run: the gap split into what the estimator gets
wrong about its own run and how far the two runs' models drift apart.

For each development regime and seed, DAPO and a skipping arm (default: the recommended setting with the
audit on) are trained as ``research/retention_dev.py`` trains them (same profiles, seeds, base model and
thread count, so the metrics are the same runs'), and after every update the whole training pool and the
test split are scored by the pass-rate oracle (``research/pass_rate_oracle.py``: a prompt's exact chance of
a signal group, ``q = 1 - p**G - (1 - p)**G``, from one teacher-forced pass; nothing of it is trained on or
counted as generation). From the pool's mean ``q`` at each step, ``oracle`` is the number of groups DAPO's
dynamic sampling generates on average to fill that step's batch *on this run's model* (``expected_rounds``,
the formula ``snooze/saved/*`` uses). Per pair of runs::

    estimate / DAPO's true groups = (estimate / oracle of the arm's model)       the estimator, on its own run
                                  x (oracle of the arm's model / oracle of DAPO's model)    the models drift
                                  x (oracle of DAPO's model / DAPO's true groups)          the formula, checked

The estimate is recomputed from the run's per-step metrics by this version's estimator
(``snooze.core.saved.saved_from_metrics``; it decides nothing in the run), beside the one the run logged.

    .venv/bin/python research/saved_gap.py --out runs/saved_gap --regimes dev-mix,dev-rev,dev-small

About 20 minutes for the three regimes at 3 seeds with ``--jobs 2`` on 2 cores. ``--family`` takes the
family's regimes and arms instead, at any seed: a check after the family's report (it reproduces the
reported runs exactly, so their gap can be split), never a design input::

    .venv/bin/python research/saved_gap.py --family --regimes one-task --first-seed 0 --seeds 5 \\
        --out runs/saved_gap_family

Each run folder gets ``oracle.jsonl`` (per step: the pool's and the test split's mean ``q`` and mean pass
rate); the table and a JSON object are printed and written to ``saved_gap.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pass_rate_oracle import pass_rates

from snooze.analysis import signal_prob
from snooze.core.saved import Shape, expected_rounds, saved_from_metrics
from snooze.experiments.compare import ARMS as FAMILY_ARMS
from snooze.experiments.compare import _data, profile_base
from snooze.experiments.family import FAMILY
from snooze.experiments.profiles import train_config
from snooze.logs import read_metrics
from snooze.trainer import loop
from snooze.trainer.model import TinyGPT
from snooze.trainer.rollout import Roller

DAPO = "dynamic_sampling"


def _regimes(family: bool) -> dict[str, Any]:
    """The regimes by name: the development ones, or (``--family``, a check after the report) the family's."""
    if family:
        return FAMILY
    from retention_dev import DEV_REGIMES  # (it registers the research policy "spaced": only when asked for)

    return DEV_REGIMES


def _arms(family: bool) -> dict[str, Any]:
    """The arms by name: ``retention_dev.py``'s, or ``snooze compare``'s (the family's)."""
    if family:
        return FAMILY_ARMS
    from retention_dev import ARMS

    return ARMS


_MODEL: dict[str, Any] = {}


class _CapturingRoller(Roller):
    def __init__(self, model: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(model, *args, **kwargs)
        _MODEL["model"] = model


def _score(records: list[dict[str, Any]], temperature: float, group: int) -> dict[str, float]:
    p = pass_rates(_MODEL["model"], records, temperature)
    return {"q": float(signal_prob(p, group).mean()), "pass": float(p.mean())}


def _one(job: tuple[str, str, int, Path, Path, bool]) -> Path:
    """Train one run (``regime``, ``arm``, ``seed``) into ``run_dir`` with the oracle scoring every step."""
    regime, arm, seed, run_dir, cache, family = job
    torch.set_num_threads(1)
    profile = replace(_regimes(family)[regime], first_seed=seed)
    pools, tests, banned = _data(profile, profile.tasks)
    model_cfg, base = profile_base(profile, cache, "cpu", banned)
    pool = [r for recs in pools.values() for r in recs]
    test = [r for recs in tests.values() for r in recs]
    cfg = _arms(family)[arm].config(profile, list(pools), {})
    tcfg = train_config(profile, seed, "cpu", 50)
    loop.Roller = _CapturingRoller  # type: ignore[misc]  # this worker's hook: the model being trained
    rows: list[dict[str, Any]] = []

    def scored(step: int) -> None:
        t, g = profile.temperature, profile.group_size
        rows.append({"step": step, "pool": _score(pool, t, g), "test": _score(test, t, g)})

    def on_step(line: dict[str, Any]) -> None:
        if not rows:
            return
        scored(int(line["step"]) + 1)  # the model after this step's update: the one that generates the next

    _MODEL["model"] = TinyGPT(model_cfg)
    _MODEL["model"].load_state_dict(base.state_dict)  # (copied in: the run's own model is built from it again)
    scored(0)  # the base model: the one that generates step 0
    loop.train(run_dir, pools, tests, cfg, tcfg, model_cfg, base.state_dict, resume=False, on_step=on_step)
    lines = [json.dumps(r) for r in rows]
    (run_dir / "oracle.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return run_dir


def _read(run_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A run's metrics lines and its oracle rows (one per step, and one for the model after the last update)."""
    rows = [json.loads(x) for x in (run_dir / "oracle.jsonl").read_text(encoding="utf-8").splitlines()]
    return read_metrics(run_dir / loop.METRICS_FILE), rows


def _oracle_groups(rows: list[dict[str, Any]], steps: int, shape: Shape) -> float:
    """DAPO's expected groups over the run's ``steps`` steps at each step's pool signal chance (row t: step t)."""
    return sum(shape.gen * expected_rounds(shape.batch, shape.gen, r["pool"]["q"], shape.rounds) for r in rows[:steps])


def _quarters(rows: list[dict[str, Any]], part: str, key: str) -> list[float]:
    n = len(rows)
    return [float(np.mean([r[part][key] for r in rows[k * n // 4 : (k + 1) * n // 4]])) for k in range(4)]


def _late(rows: list[dict[str, Any]], part: str, key: str) -> float:
    """The mean over the second half of the rows (the oracle's rows: one per step, and the final model)."""
    return float(np.mean([r[part][key] for r in rows[len(rows) // 2 :]]))


def decompose(out: Path, regimes: list[str], arm: str, seeds: list[int], family: bool = False) -> dict[str, Any]:
    """Per regime and seed: the estimate, the oracles and DAPO's true groups, and the three factors."""
    result: dict[str, Any] = {}
    for regime in regimes:
        prof = _regimes(family)[regime]
        cfg = _arms(family)[DAPO].config(prof, [], {})
        shape = Shape(cfg.batch_size, cfg.gen_size, cfg.max_gen_rounds)
        for seed in seeds:
            (lines, mine), (ref_lines, ref) = (_read(out / regime / a / f"seed{seed}") for a in (arm, DAPO))
            own = lines[-1]
            est, true = own["total/saved_dapo_groups"], ref_lines[-1]["total/gen_groups"]
            now = saved_from_metrics(lines, shape)
            o_arm, o_dapo = _oracle_groups(mine, len(lines), shape), _oracle_groups(ref, len(ref_lines), shape)
            result[f"{regime}/seed{seed}"] = {
                "estimate_logged": est,
                "estimate": now,
                "dapo_true": true,
                "own": own["total/gen_groups"],
                "oracle_arm": o_arm,
                "oracle_dapo": o_dapo,
                "logged_over_true": est / true,
                "logged_estimator": est / o_arm,
                "estimate_over_true": now / true,
                "estimator": now / o_arm,
                "drift": o_arm / o_dapo,
                "formula": o_dapo / true,
                **{
                    f"{part}_{key}": {"arm": _quarters(mine, part, key), "dapo": _quarters(ref, part, key)}
                    for part in ("pool", "test")
                    for key in ("q", "pass")
                },
                "late_pass_gap": _late(mine, "pool", "pass") - _late(ref, "pool", "pass"),
                "late_pool_q_ratio": _late(mine, "pool", "q") / _late(ref, "pool", "q"),
                "late_test_q_ratio": _late(mine, "test", "q") / _late(ref, "test", "q"),
            }
    return result


FACTORS = ("logged_over_true", "logged_estimator", "estimate_over_true", "estimator", "drift", "formula")
"""The columns: the run's logged estimate (the version that ran it) and this version's, each over DAPO's true groups
and over the oracle of its own model; the drift between the models; the formula checked on DAPO's run."""


def _table(result: dict[str, Any]) -> str:
    lines = [
        "| regime/seed | logged / DAPO's true | logged / own oracle | estimate / DAPO's true | = estimate / own "
        "oracle | x drift | x formula | pool q late, arm / DAPO | test q late, arm / DAPO |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, r in result.items():
        cells = " | ".join(f"{r[f]:.3f}" for f in FACTORS)
        pool, test = r["pool_q"], r["test_q"]
        lines.append(
            f"| {key} | {cells} | {pool['arm'][3]:.3f} / {pool['dapo'][3]:.3f} | {test['arm'][3]:.3f} / "
            f"{test['dapo'][3]:.3f} |"
        )
    geo = [math.exp(float(np.mean([math.log(r[f]) for r in result.values()]))) for f in FACTORS]
    lines.append("| geometric mean | " + " | ".join(f"{g:.3f}" for g in geo) + " | | |")
    return "\n".join(lines)


SPREAD = ("late_pass_gap", "late_pool_q_ratio", "late_test_q_ratio")
"""Where the drift comes from, over the second half of the steps: the pool's mean pass rate, arm minus DAPO's
model, and the mean chance of a signal group of the pool and of the test split, arm over DAPO's model. Equal
pass rates with a higher signal chance mean DAPO's model is more polarised (more prompts all right or all wrong)."""


def _spread_table(result: dict[str, Any]) -> str:
    """Per regime, the lowest and highest seed of each ``SPREAD`` column."""
    lines = [
        "| regime | pool pass rate, arm - DAPO | pool signal chance, arm / DAPO | test signal chance, arm / DAPO |",
        "|---|---|---|---|",
    ]
    for regime in dict.fromkeys(key.split("/")[0] for key in result):
        rows = [r for key, r in result.items() if key.split("/")[0] == regime]
        cells = [(min(r[c] for r in rows), max(r[c] for r in rows)) for c in SPREAD]
        lines.append(
            f"| {regime} | "
            + " | ".join(
                f"{lo:+.3f} to {hi:+.3f}" if c == SPREAD[0] else f"{lo:.2f}-{hi:.2f}"
                for c, (lo, hi) in zip(SPREAD, cells)
            )
            + " |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/saved_gap"))
    parser.add_argument("--regimes", default="dev-mix,dev-rev,dev-small")
    parser.add_argument(
        "--arm",
        default=None,
        help="the skipping arm (default: retention_dev.py's f1-carry-audit; --family: snooze-f1-carry)",
    )
    parser.add_argument(
        "--family",
        action="store_true",
        help="the family's regimes and arms at any seed: a check after the report, which chooses nothing",
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=Path("runs/cache"))
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    if args.first_seed < 100 and not args.family:
        parser.error("--first-seed must be at least 100: seeds 0-4 are the report's, never the design's")
    regimes, arm = args.regimes.split(","), args.arm or ("snooze-f1-carry" if args.family else "f1-carry-audit")
    unknown = sorted(set(regimes) - set(_regimes(args.family))) + ([arm] if arm not in _arms(args.family) else [])
    if unknown:
        parser.error(f"unknown regime(s) or arm: {unknown}")
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    if not args.table_only:
        jobs = [
            (regime, a, seed, args.out / regime / a / f"seed{seed}", args.cache, args.family)
            for regime in regimes
            for a in (DAPO, arm)
            for seed in seeds
            if not (args.out / regime / a / f"seed{seed}" / "oracle.jsonl").exists()
        ]
        for regime in regimes:  # the base models, warmed up (or read from the cache) once, before the workers
            profile = _regimes(args.family)[regime]
            torch.set_num_threads(1)
            profile_base(profile, args.cache, "cpu", _data(profile, profile.tasks)[2])
        with mp.get_context("spawn").Pool(args.jobs) as pool:
            for done in pool.imap_unordered(_one, jobs):
                print("done", done, flush=True)
    result = decompose(args.out, regimes, arm, seeds, args.family)
    print(_table(result))
    print(_spread_table(result))
    (args.out / "saved_gap.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: {f: v[f] for f in FACTORS} for k, v in result.items()}))


if __name__ == "__main__":
    main()

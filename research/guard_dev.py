"""Issue 49's guard, developed on the alarm's development runs: each skipping arm with the guard (the scheduler's
default since the guard exists) beside the same arm without it (the runs ``research/alarm_runs.py`` made before the
guard existed, the audit at 0.05 in both), each paired with DAPO on the same seed.

    nice -n 19 .venv/bin/python research/guard_dev.py --run --part 0/2     # the guarded runs: this in one shell,
    nice -n 19 .venv/bin/python research/guard_dev.py --run --part 1/2     # this in another
    .venv/bin/python research/guard_dev.py                                  # the table
    .venv/bin/python research/guard_dev.py --family runs/family             # the alarm on a family run, labelled

``--run`` trains only the runs whose alarm fires: a guarded run is bit-identical to the unguarded one until the step
after its alarm (``tests/core/test_guard.py``), so where the shipped rule (``alarm_dev.shipped_alarm``, the
scheduler's constants) does not fire on the unguarded run's own logs, that run is linked in as the guarded one, and
DAPO's runs are linked in too. The replica reads returns from the reward log where the scheduler reads its memory's
flags, and the two fire a step or so apart, so a run whose score came within ``--verify`` (0.85) of firing is trained
too. The table's "alarm fired" column is read from the guarded runs' own ``snooze/audit/alarm``.

Per arm and regime: DAPO's rollouts over the arm's (geometric mean over the paired seeds), the mean late gap to DAPO
in points (held-out avg@8, the last three evaluations), and how many runs the alarm fired in (the guard acts from the
next step); then the arm pooled over the regimes: the geometric mean saving, the mean gap with its 90% interval over
the pairs (t), and the worst regime. Only seeds present in all three runs (DAPO, guarded, unguarded) count.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

DAPO = "dynamic_sampling"


def read(run: Path) -> dict[str, Any] | None:
    """A finished run's rollouts, late accuracy (``snooze.logs.late_evaluations``) and alarm step (``None``: never);
    ``None`` if unfinished."""
    from snooze.logs import late_evaluations

    cfg_file, metrics_file = run / "config.json", run / "metrics.jsonl"
    if not cfg_file.exists() or not metrics_file.exists():
        return None
    cfg = json.loads(cfg_file.read_text())
    steps, g = int(cfg["train"]["steps"]), int(cfg["scheduler"]["group_size"])
    lines = [json.loads(x) for x in metrics_file.read_text().splitlines() if x.strip()]
    train = [x for x in lines if "gen/groups" in x][:steps]
    if len(train) < steps:
        return None
    evals = [x for x in lines if x.get("eval/sampled_accuracy") is not None]
    late = float(np.mean([x["eval/sampled_accuracy"] for x in late_evaluations(evals)]))
    alarm = [x.get("snooze/audit/alarm", 0) for x in train]
    return {
        "rollouts": sum(x.get("gen/rollouts", x["gen/groups"] * g) for x in train),
        "late": late,
        "fired": alarm.index(1) if 1 in alarm else None,
    }


def cells(guarded: Path, unguarded: Path, arm: str) -> dict[str, list[tuple[dict, dict, dict]]]:
    """Per regime: (DAPO, unguarded, guarded) runs of the seeds all three finished."""
    out: dict[str, list[tuple[dict, dict, dict]]] = {}
    for regime_dir in sorted(p for p in guarded.iterdir() if (p / arm).is_dir()):
        for seed_dir in sorted((regime_dir / arm).glob("seed*")):
            runs = (
                read(regime_dir / DAPO / seed_dir.name),
                read(unguarded / regime_dir.name / arm / seed_dir.name),
                read(seed_dir),
            )
            if all(r is not None for r in runs):
                out.setdefault(regime_dir.name, []).append(runs)  # type: ignore[arg-type]
    return out


def _geo(x: list[float]) -> float:
    return float(np.exp(np.mean(np.log(x))))


def table(guarded: Path, unguarded: Path, arm: str) -> str:
    rows = cells(guarded, unguarded, arm)
    out = [
        f"\n{arm}: unguarded -> guarded\n",
        "| regime | pairs | alarm fired | saving (DAPO rollouts / arm's) | late gap to DAPO (points) |",
        "|---|---|---|---|---|",
    ]
    pooled: dict[str, list[float]] = {"s_u": [], "s_g": [], "g_u": [], "g_g": []}
    worst = {"u": math.inf, "g": math.inf}
    for regime, runs in rows.items():
        s_u = _geo([d["rollouts"] / u["rollouts"] for d, u, _ in runs])
        s_g = _geo([d["rollouts"] / g["rollouts"] for d, _, g in runs])
        gap_u = [100 * (u["late"] - d["late"]) for d, u, _ in runs]
        gap_g = [100 * (g["late"] - d["late"]) for d, _, g in runs]
        fired = [g["fired"] for _, _, g in runs if g["fired"] is not None]
        steps = ", ".join(str(f) for f in fired)
        out.append(
            f"| {regime} | {len(runs)} | {len(fired)}{f' (steps {steps})' if fired else ''} | {s_u:.2f}x -> {s_g:.2f}x "
            f"| {np.mean(gap_u):+.2f} -> {np.mean(gap_g):+.2f} |"
        )
        pooled["s_u"].append(s_u)
        pooled["s_g"].append(s_g)
        pooled["g_u"] += gap_u
        pooled["g_g"] += gap_g
        worst["u"], worst["g"] = min(worst["u"], float(np.mean(gap_u))), min(worst["g"], float(np.mean(gap_g)))
    if not rows:
        return "\n".join([*out, "(no finished runs)"])
    from snooze.experiments.family_table import mean_interval

    _, lo_u, hi_u = mean_interval(pooled["g_u"])
    _, lo_g, hi_g = mean_interval(pooled["g_g"])
    out.append(
        f"| **pooled** | {len(pooled['g_g'])} | | {_geo(pooled['s_u']):.2f}x -> {_geo(pooled['s_g']):.2f}x | "
        f"{np.mean(pooled['g_u']):+.2f} ({lo_u:+.1f} to {hi_u:+.1f}) -> {np.mean(pooled['g_g']):+.2f} "
        f"({lo_g:+.1f} to {hi_g:+.1f}); worst regime {worst['u']:+.2f} -> {worst['g']:+.2f} |"
    )
    return "\n".join(out)


def family_alarms(root: Path, arm: str) -> str:
    """The scheduler's own alarm on a family run (``benchmarks/family.py --out ROOT``): per regime, the arm's mean late
    gap to DAPO over the paired seeds, the cell's label (healthy: -0.5 or better; harmful: -1.5 or worse; issue 49),
    and the runs whose ``snooze/audit/alarm`` fired (at which step); then the false alarms on healthy runs and the
    detections of harmful ones. The alarm's step is the same guarded or not (the guard acts from the next step)."""
    out = [
        f"\n{arm} on {root}: the scheduler's own alarm\n",
        "| regime | pairs | mean late gap (points) | label | alarm fired (steps of the run's) |",
        "|---|---|---|---|---|",
    ]
    counts = {"healthy": [0, 0], "harmful": [0, 0]}
    for regime_dir in sorted(p for p in root.iterdir() if (p / arm).is_dir()):
        pairs = [(read(regime_dir / DAPO / seed.name), read(seed)) for seed in sorted((regime_dir / arm).glob("seed*"))]
        pairs = [(d, a) for d, a in pairs if d is not None and a is not None]
        if not pairs:
            continue
        gap = float(np.mean([100 * (a["late"] - d["late"]) for d, a in pairs]))
        label = "healthy" if gap >= -0.5 else "harmful" if gap <= -1.5 else "between"
        fired = [a["fired"] for _, a in pairs if a["fired"] is not None]
        if label in counts:
            counts[label][0] += len(fired)
            counts[label][1] += len(pairs)
        steps = f" ({', '.join(str(f) for f in fired)})" if fired else ""
        out.append(f"| {regime_dir.name} | {len(pairs)} | {gap:+.2f} | {label} | {len(fired)}{steps} |")
    (fa, healthy), (det, harmful) = counts["healthy"], counts["harmful"]
    out.append(f"\nfalse alarms on healthy runs: {fa}/{healthy}; detected harmful runs: {det}/{harmful}")
    return "\n".join(out)


def plan(
    unguarded: Path, arms: list[str], seeds: tuple[int, int], verify: float
) -> dict[tuple[str, str, int], int | None]:
    """Each unguarded run of ``arms`` (seeds in the inclusive range) -> the step the shipped alarm fires on its logs,
    or -1 where it does not fire but comes within ``verify`` of firing (its score's peak, 1 at the threshold): the
    logs' replica of the rule counts returns from the reward log, the scheduler from its memory's flags, and the two
    differ by a step or so, so a near miss is trained too."""
    import alarm_dev

    fn = alarm_dev.shipped_alarm()
    out: dict[tuple[str, str, int], int | None] = {}
    for r in alarm_dev.read_runs(unguarded, seeds):
        if r.arm in arms:
            x = fn(r.s)
            fired = alarm_dev.fire_step(x, 1.0)
            near = fired is None and np.isfinite(x).any() and float(np.nanmax(x)) >= verify
            out[(r.regime, r.arm, r.seed)] = -1 if near else fired
    return out


def run(
    guarded: Path, unguarded: Path, arms: list[str], seeds: tuple[int, int], part: tuple[int, int], verify: float
) -> None:
    """Link DAPO's runs and the runs whose alarm never fires; train this ``part`` of the others (guard on)."""
    from dataclasses import replace

    from alarm_runs import ALARM_REGIMES, ARMS

    from snooze.experiments.compare import run_compare

    todo = []
    for (regime, arm, seed), fired in sorted(plan(unguarded, arms, seeds, verify).items()):
        for name in (DAPO, arm) if fired is None else (DAPO,):
            link = guarded / regime / name / f"seed{seed}"
            if not link.exists() and not link.is_symlink():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to((unguarded / regime / name / f"seed{seed}").resolve())
        if fired is not None:
            stale = guarded / regime / arm / f"seed{seed}"
            if stale.is_symlink():  # linked by an earlier plan: train it now
                stale.unlink()
            todo.append((regime, arm, seed, fired))
    for regime, arm, seed, fired in todo[part[0] :: part[1]]:
        said = "a near miss" if fired == -1 else f"at step {fired}"
        print(f"== {regime} {arm} seed {seed} (alarm predicted {said})", flush=True)
        profile = replace(ALARM_REGIMES[regime], first_seed=seed)
        run_compare(guarded / regime, profile, [ARMS[DAPO], ARMS[arm]], 1, jobs=1, threads=1)


def main() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # research/ is not a package
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--guarded", type=Path, default=Path("/work/runs/guard_dev"))
    parser.add_argument("--unguarded", type=Path, default=Path("/work/runs/alarm"))
    parser.add_argument("--arms", default="snooze-f1-carry,snooze-f5")
    parser.add_argument("--seeds", default="100-102", help="FIRST-LAST (inclusive)")
    parser.add_argument("--run", action="store_true", help="train the guarded runs whose alarm fires")
    parser.add_argument("--part", default="0/1", help="I/N: train every N-th run from the I-th (parallel processes)")
    parser.add_argument("--verify", type=float, default=0.85, help="also train runs whose alarm came this close")
    parser.add_argument("--family", type=Path, default=None, help="a family run's folder: its alarms, labelled")
    args = parser.parse_args()
    seeds = tuple(int(x) for x in args.seeds.split("-"))
    i, n = (int(x) for x in args.part.split("/"))
    if args.family is not None:
        for arm in args.arms.split(","):
            if any((p / arm).is_dir() for p in args.family.iterdir()):
                print(family_alarms(args.family, arm))
        return
    if args.run:
        run(args.guarded, args.unguarded, args.arms.split(","), seeds, (i, n), args.verify)  # type: ignore[arg-type]
        return
    for arm in args.arms.split(","):
        print(table(args.guarded, args.unguarded, arm))


if __name__ == "__main__":
    main()

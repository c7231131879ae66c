"""Step time with every prompt asleep: a step's cost must not depend on the size of the counters.

    PYTHONPATH=src python benchmarks/asleep_step_time.py [--steps 1000] [--prompts 16]

Every group is too easy and a round draws as many prompts as there are (16, in 8 rounds a step), so
every round starts with every prompt asleep and must count counters down until one wakes. Measured side
by side in one run, ``--steps`` steps each:

- ``stream``: one dataset, ``SnoozeOptions.factor`` 10 and 10**7 (before the fix, a round walked the counters
  down one epoch at a time: about 10**7 passes for one prompt at 10**7);
- ``quota``: two datasets in quota mix with ``backoff=2`` (periods double at each too-easy outcome up to
  ``max``; before the fix step time grew 0.1 -> 26.8 s in eight steps), factors 10 and 10**7.

and each of them again with the audit on (``--audits``, default 1e-3 and 0.05: before the leap held under
the audit, any share above 0 turned it off and the step time grew as 1/share).

Printed: the median and max step time of each, the ratio factor 10**7 / factor 10, the ratio audit on /
audit off at each factor, and for each run the ratio of its last 100 steps' median to its first 100
(flat: about 1). The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import snooze
from snooze.core.policies.snooze import MAX_PERIOD


def run(mix: str, factor: int, steps: int, prompts: int, audit: float = 0.0) -> dict[str, float]:
    names = ["a"] if mix == "stream" else ["a", "b"]
    data = {n: snooze.Source.from_ids(n, range(prompts // len(names))) for n in names}  # 16 prompts in all
    cfg = snooze.SchedulerConfig(
        batch_size=16,
        group_size=4,
        options=snooze.SnoozeOptions(factor=factor, backoff=2.0 if mix == "quota" else 1.0, max=MAX_PERIOD),
        mix=mix,
        max_gen_rounds=8,
        audit=audit,
    )
    sched = snooze.Scheduler(data, cfg, seed=0)
    easy = np.ones((cfg.gen_size, cfg.group_size))

    def roll(cands: snooze.Candidates) -> np.ndarray:
        return easy[: len(cands)]

    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        sched.step(roll)
        times.append(time.perf_counter() - t0)
    head, tail = statistics.median(times[:100]), statistics.median(times[-100:])
    m = sched.metrics()
    return {
        "median_s": statistics.median(times),
        "max_s": max(times),
        "late_over_early": tail / head,
        "skipped_per_step": m["total/skipped"] / steps,
        "groups_per_step": m["total/gen_groups"] / steps,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--audits", default="1e-3,0.05", help="audit shares run beside audit off (comma-separated)")
    args = ap.parse_args()
    audits = [0.0] + [float(a) for a in args.audits.split(",") if a]
    out: dict[str, object] = {"steps": args.steps, "prompts": args.prompts}
    print(
        f"{'run':<8}{'factor':>10}{'audit':>8}{'median ms':>12}{'max ms':>10}"
        f"{'last/first 100':>16}{'skipped/step':>16}{'groups/step':>13}"
    )
    for mix in ("stream", "quota"):
        res = {(f, a): run(mix, f, args.steps, args.prompts, a) for f in (10, 10**7) for a in audits}
        for (f, a), r in res.items():
            print(
                f"{mix:<8}{f:>10}{a:>8g}{1e3 * r['median_s']:>12.3f}{1e3 * r['max_s']:>10.2f}"
                f"{r['late_over_early']:>16.2f}{r['skipped_per_step']:>16.4g}{r['groups_per_step']:>13.1f}"
            )
        ratio = res[(10**7, 0.0)]["median_s"] / res[(10, 0.0)]["median_s"]
        print(f"{mix}: step time ratio, factor 10**7 / factor 10 (median, audit off): {ratio:.2f}")
        on_off = {f"{f}@{a:g}": res[(f, a)]["median_s"] / res[(f, 0.0)]["median_s"] for (f, a) in res if a}
        print(
            f"{mix}: step time ratio, audit on / audit off (median): "
            + ", ".join(f"{k} {v:.2f}" for k, v in on_off.items())
        )
        out[mix] = {f"{f}@{a:g}": r for (f, a), r in res.items()} | {
            "ratio_1e7_over_10": ratio,
            "audit_on_over_off": on_off,
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()

"""Replay's memory on a large log: the headline's bootstrap in chunks against every 100 resamples at once.

    PYTHONPATH=src python benchmarks/replay_memory.py [--prompts 1000000] [--encounters 2] [--old]

Builds a reward log in memory (``--prompts`` prompts of one dataset, each met ``--encounters`` times, G = 8,
rewards mixing easy, hard and signal groups), then, in a fresh process each, replays the CLI's five policies
(``filter``, ``snooze:1,2,5,10``, 1,000 resamples) and prints its wall and CPU seconds, the process's peak
RSS, its RSS with the log alone (before the replay), and the difference: what the replay itself takes.
``--old`` adds the same with the bootstrap as it was before issue 51, 100 resamples' draws and counts at
once (about 1.2 GB more at 300,000 prompts and 2.6 GB at 1M: leave it out on a small machine); both give the
same interval, which the last line checks. One JSON line per run at the end.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

MEASURE = """
import json, resource, sys, time
import numpy as np
from snooze.analysis import estimate
from snooze.analysis.replay import policy_names, replay_policies
from snooze.logs import RewardLog

prompts, encounters, old = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "old"
rng = np.random.default_rng(0)
n = prompts * encounters
ids = np.tile(np.arange(prompts), encounters)  # every prompt met once per pass, in order
rate = np.repeat(rng.random(prompts)[None, :], encounters, axis=0).ravel()  # a pass rate per prompt
rewards = (rng.random((n, 8)) < rate[:, None]).astype(np.float64)
log = RewardLog("bench", np.arange(n) // 1024, ["d"] * n, ids.tolist(), rewards, np.arange(1, n + 1))
del ids, rate, rewards


def old_resampled(cols, resamples, seed):  # before issue 51: 100 resamples' draws, offsets and counts at once
    n_prompts = cols.shape[0]
    rng = np.random.default_rng(seed)
    boots = []
    for start in range(0, resamples, 100):
        b = min(100, resamples - start)
        draws = rng.integers(0, n_prompts, size=(b, n_prompts)) + n_prompts * np.arange(b)[:, None]
        counts = np.bincount(draws.ravel(), minlength=b * n_prompts).reshape(b, n_prompts)
        boots.append(counts.astype(np.float64) @ cols)
    return np.concatenate(boots)


if old:
    estimate._resampled = old_resampled
with open("/proc/self/status") as f:
    before = next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
t0, c0 = time.perf_counter(), time.process_time()
out = replay_policies(log, policy_names([1, 2, 5, 10]))
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
h = out["snooze:1"]["headline"]
print(json.dumps({"prompts": prompts, "groups": n, "bootstrap": "100 resamples a chunk (before)" if old else "chunked",
                  "log_rss_mb": before / 1024, "peak_rss_mb": peak / 1024, "replay_mb": (peak - before) / 1024,
                  "wall_s": wall, "cpu_s": cpu, "snooze1_saved_interval": h["saved_interval"]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=1_000_000)
    parser.add_argument("--encounters", type=int, default=2)
    parser.add_argument("--old", action="store_true", help="also measure the bootstrap before issue 51")
    args = parser.parse_args()
    rows = []
    for mode in ["new", "old"] if args.old else ["new"]:
        argv = [sys.executable, "-c", MEASURE, str(args.prompts), str(args.encounters), mode]
        done = subprocess.run(argv, capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    head = f"{'bootstrap':<32}{'prompts':>10}{'groups':>11}{'log RSS MB':>12}{'peak RSS MB':>13}{'replay MB':>11}"
    print(head + f"{'wall s':>8}{'CPU s':>8}")
    for r in rows:
        print(
            f"{r['bootstrap']:<32}{r['prompts']:>10,}{r['groups']:>11,}{r['log_rss_mb']:>12.0f}{r['peak_rss_mb']:>13.0f}"
            f"{r['replay_mb']:>11.0f}{r['wall_s']:>8.1f}{r['cpu_s']:>8.1f}"
        )
    if len(rows) == 2:
        same = rows[0]["snooze1_saved_interval"] == rows[1]["snooze1_saved_interval"]
        print(f"the same interval both ways: {same}")
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()

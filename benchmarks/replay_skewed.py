"""Replay on a skewed reward log (issue 27 item 5): one prompt logged 20,000 times beside 20,000 prompts
logged once, 40,000 valid lines. The replay must stay linear in the log: under 2 s and 200 MB.

    PYTHONPATH=src python benchmarks/replay_skewed.py [--hot 20000] [--singles 20000] [--group-size 8]

Times are measured without tracemalloc (it slows numpy's small allocations several-fold), the peaks
in a second pass with it. Writes the log to a temporary folder with :class:`snooze.logs.RewardLogWriter` (so it is a log the
library itself writes), reads it, then replays ``filter`` and ``snooze:1,2,5,10`` (the CLI's default
policies) as ``snooze replay`` does. Prints the seconds and peak Python memory (tracemalloc) of the read
and of the replay, the process's peak RSS, and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from snooze.analysis.replay import policy_names, replay_policies
from snooze.logs import RewardLogWriter, read_reward_log


def write_log(path: Path, hot: int, singles: int, group_size: int, seed: int = 0) -> int:
    """The skewed log: line ``2i`` is the hot prompt, line ``2i + 1`` single prompt ``i`` (while both last)."""
    rng = np.random.default_rng(seed)
    n = hot + singles
    ids: list[object] = []
    h = s = 0
    while h < hot or s < singles:
        if h < hot:
            ids.append("hot")
            h += 1
        if s < singles:
            ids.append(s)
            s += 1
    rewards = (rng.random((n, group_size)) < rng.random((n, 1))).astype(float)  # a mix of easy, hard and signal groups
    with RewardLogWriter(path) as log:
        for start in range(0, n, 1000):  # 1,000 groups a step
            part = slice(start, start + 1000)
            log.write(start // 1000, ["d"] * len(ids[part]), ids[part], rewards[part])
    return n


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hot", type=int, default=20_000, help="times the hot prompt is logged")
    parser.add_argument("--singles", type=int, default=20_000, help="prompts logged once")
    parser.add_argument("--group-size", type=int, default=8)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rewards.jsonl"
        lines = write_log(path, args.hot, args.singles, args.group_size)
        t0 = time.perf_counter()
        log = read_reward_log(path)
        read_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        results = replay_policies(log, policy_names([1, 2, 5, 10]))
        replay_s = time.perf_counter() - t0
        per_policy = {}
        for pol in policy_names([1, 2, 5, 10]):
            t1 = time.perf_counter()
            replay_policies(log, [pol])
            per_policy[pol.name] = round(time.perf_counter() - t1, 3)
        tracemalloc.start()  # memory in a second pass: tracemalloc slows numpy's small allocations several-fold
        read_reward_log(path)
        _, read_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        replay_policies(log, policy_names([1, 2, 5, 10]))
        _, replay_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    out = {
        "lines": lines,
        "prompts": args.singles + 1,
        "depth": args.hot,
        "read_s": round(read_s, 3),
        "replay_s": round(replay_s, 3),
        "read_peak_mb": round(read_peak / 2**20, 1),
        "replay_peak_mb": round(replay_peak / 2**20, 1),
        "process_peak_rss_mb": round(rss / 2**20, 1),
        "policies": len(results),
        "per_policy_s": per_policy,
    }
    print(
        f"{lines} lines, {out['prompts']} prompts, depth {args.hot}: read {read_s:.2f} s (peak {out['read_peak_mb']} MB), "
        f"replay of {len(results)} policies {replay_s:.2f} s (peak {out['replay_peak_mb']} MB); process peak RSS {out['process_peak_rss_mb']} MB"
    )
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()

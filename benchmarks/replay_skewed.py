"""Replay on a skewed reward log: one prompt logged 20,000 times beside 20,000 prompts
logged once, 40,000 valid lines. ``snooze replay`` must take under 2 s and 200 MB.

    PYTHONPATH=src python benchmarks/replay_skewed.py [--hot 20000] [--singles 20000] [--group-size 8]

Writes the log to a temporary folder with :class:`snooze.logs.RewardLogWriter` (a log the library itself
writes), then measures, side by side, the old path and the new one, each in a fresh process:

- ``old``: every depth of encounters one vectorised report (``snooze.analysis._chains.walk`` with
  ``lone=0``, no transition cache), and every line through the guarded JSON reader (no fast path);
- ``new``: the library as it is (deep prompts walked alone with the cache, the writer's lines read
  from a pattern match).

For each: the replay alone of ``filter`` and ``snooze:1,2,5,10`` (the CLI's default policies), the read
and that replay, and ``snooze replay LOG --out DIR --no-plot`` as a whole process (start-up and imports
included). Wall and CPU seconds, and the process's peak RSS (of the whole child process, so the replay
alone's includes the read before it). Then the cost of importing matplotlib (what ``snooze replay``
without ``--no-plot`` adds, once), the skip counts of both paths (which must be equal), and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from snooze.logs import RewardLogWriter

OLD = (
    "import snooze.analysis._chains as chains, snooze.logs._reward_log as rl\n"
    "chains.LONE = 0\n"  # every depth together, no cache
    "rl._canonical = lambda text: None\n"  # every line through the JSON reader
)
MEASURE = """
import json, resource, sys, time
from snooze.analysis.replay import policy_names, replay_policies
from snooze.logs import read_reward_log
path, what = sys.argv[1], sys.argv[2]
t0, c0 = time.perf_counter(), time.process_time()
log = read_reward_log(path)
if what == "replay":
    t0, c0 = time.perf_counter(), time.process_time()
out = replay_policies(log, policy_names([1, 2, 5, 10]))
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
skipped = {k: v["skipped_groups"] for k, v in out.items()}
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "rss_kb": rss, "skipped": skipped}))
"""
CLI = "from snooze.cli.main import main\nraise SystemExit(main(sys.argv[1:]))\n"


def write_log(path: Path, hot: int, singles: int, group_size: int, seed: int = 0) -> int:
    """The skewed log: line ``2i`` is the hot prompt (id -1), line ``2i + 1`` single prompt ``i`` (while both last);
    integer ids all (a dataset's ids are all integers or all strings)."""
    rng = np.random.default_rng(seed)
    n = hot + singles
    ids: list[int] = []
    h = s = 0
    while h < hot or s < singles:
        if h < hot:
            ids.append(-1)
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


def _child(code: str, args: list[str]) -> tuple[float, float, float, str]:
    """Run ``code`` in a fresh Python with ``args``: wall s, CPU s (user + system) and peak RSS MB of that
    process alone (``os.wait4``), and its stdout."""
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", "import sys\n" + code, *args], stdout=out)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise SystemExit(f"child failed ({proc.returncode}): {code[:60]!r} {args}")
        out.seek(0)
        text = out.read()
    rss = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024) / 2**20
    return wall, usage.ru_utime + usage.ru_stime, rss, text


def _row(wall: float, cpu: float, rss: float) -> dict[str, float]:
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "rss_mb": round(rss, 1)}


def _measure(path: Path, out: Path) -> dict[str, dict[str, dict[str, float]]]:
    rows: dict[str, dict[str, dict[str, float]]] = {"old": {}, "new": {}}
    skipped = {}
    for mode in ("old", "new"):
        prelude = OLD if mode == "old" else ""
        for what in ("replay", "read+replay"):
            _, _, _, text = _child(prelude + MEASURE, [str(path), what])
            got = json.loads(text)
            skipped[mode] = got["skipped"]
            rows[mode][what] = _row(got["wall_s"], got["cpu_s"], got["rss_kb"] / 1024)
        wall, cpu, rss, _ = _child(prelude + CLI, ["replay", str(path), "--out", str(out / mode), "--no-plot"])
        rows[mode]["cli --no-plot"] = _row(wall, cpu, rss)
    wall, cpu, rss, _ = _child("import matplotlib.pyplot", [])
    bare = _child("pass", [])
    rows["matplotlib"] = {"import": _row(wall - bare[0], cpu - bare[1], rss)}
    assert skipped["old"] == skipped["new"], skipped
    rows["skipped"] = skipped  # type: ignore[assignment]
    return rows


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hot", type=int, default=20_000, help="times the hot prompt is logged")
    parser.add_argument("--singles", type=int, default=20_000, help="prompts logged once")
    parser.add_argument("--group-size", type=int, default=8)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rewards.jsonl"
        lines = write_log(path, args.hot, args.singles, args.group_size)
        rows = _measure(path, Path(tmp))
    print(f"{lines} lines, {args.singles + 1} prompts, depth {args.hot}; 5 policies (filter, snooze:1,2,5,10)")
    print(f"{'':16}{'old wall s':>11}{'CPU s':>8}{'RSS MB':>8}   {'new wall s':>11}{'CPU s':>8}{'RSS MB':>8}")
    for what in ("replay", "read+replay", "cli --no-plot"):
        old, new = rows["old"][what], rows["new"][what]
        cells = [f"{old['wall_s']:>11.3f}{old['cpu_s']:>8.3f}{old['rss_mb']:>8.1f}"]
        cells.append(f"{new['wall_s']:>11.3f}{new['cpu_s']:>8.3f}{new['rss_mb']:>8.1f}")
        print(f"{what:16}{cells[0]}   {cells[1]}")
    mpl = rows["matplotlib"]["import"]
    print(
        f"import matplotlib.pyplot (what the plot adds, once): {mpl['wall_s']:.3f} s wall, {mpl['cpu_s']:.3f} s CPU "
        f"beyond a bare Python; its process peaks at {mpl['rss_mb']:.1f} MB RSS"
    )
    print("skipped groups (old = new):", rows["skipped"]["new"])
    out = {"lines": lines, "prompts": args.singles + 1, "depth": args.hot, **rows}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()

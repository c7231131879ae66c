"""Kill -9 harness of the reference trainer: ``snooze compare --profile quick`` SIGKILLed and rerun.

    python benchmarks/kill9_trainer.py --kills 30

First one uninterrupted run of the command (the reference). Then *series*: the same command into a
fresh ``--out`` and a fresh warm-up cache, SIGKILLed, rerun, SIGKILLed, ... until a rerun finishes;
then every arm's ``metrics.jsonl`` (timing fields aside), ``rewards.jsonl`` (byte for byte) and
``summary.json`` (timing aside) are compared with the reference's (``_kill9_checks.py``). Series follow
one another until ``--kills`` kills are spent. The command is::

    snooze compare --profile quick --threads 1 --jobs 1 --checkpoint-every 3 --out OUT --cache CACHE

Kills come at two kinds of moment:

- *random*: a uniform delay after the start, up to the reference's wall time (so some land while
  the command starts, trains, writes figures);
- *aimed*: the worker SIGKILLs itself at the ``n``-th time (``n`` random in 1..3) it reaches a point
  of the trainer's commit protocol (``POINTS``). The points are hooked by wrapping, in the worker
  only, the functions of ``snooze.trainer.checkpoint`` and ``snooze.logs`` that do each step (no
  hook in the library). The first kill of each series is aimed at the warm-up cache (the base model
  written, its ``meta.json`` not yet).

After every kill, for each arm, the harness checks what a rerun will keep: the arm's logs exist
only with a committed checkpoint, and their lines of the committed steps match the reference's.

Workers are forked from this process (``--spawn fork``, the default: torch and snooze already
imported, so a restart costs little), or fresh interpreters (``--spawn exec``: random kills hit the
real ``snooze`` executable). The last line printed is one JSON object; exit status 1 when any arm
differs from the reference, a rerun failed, or a crash-time check failed. ``--sabotage no-cutback``
runs workers whose resume does not cut the logs back (to show the harness sees the duplicates).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _kill9_checks import crash_check, final_check

POINTS = ("aside", "renamed", "committed", "logged", "cutback")
"""Aimed kill points: a step folder written aside and fsynced but not renamed into place; renamed but
``LATEST`` not replaced; ``LATEST`` replaced, older folders not yet removed; a step's metrics line
written, its checkpoint not committed; a log cut back on resume, written aside but not renamed."""
WARMUP = "warmup"
ALL = ("random", WARMUP, *POINTS)


def command(out: Path, cache: Path, extra: list[str]) -> list[str]:
    return [
        "compare",
        "--profile",
        "quick",
        "--threads",
        "1",
        "--jobs",
        "1",
        "--checkpoint-every",
        "3",
        "--out",
        str(out),
        "--cache",
        str(cache),
        *extra,
    ]


# -- the worker ---------------------------------------------------------------------------------
def _arm(point: str, nth: int, sabotage: str) -> None:
    """In a worker: SIGKILL this process the ``nth`` time it reaches ``point`` (none: ``point == ""``)."""
    import snooze.trainer._resume as resume
    import snooze.trainer.checkpoint as ck
    import snooze.trainer.loop as loop
    import snooze.trainer.warmup as wu
    from snooze.logs import MetricsLogWriter

    seen = collections.Counter()

    def hit(where: str) -> None:
        seen[where] += 1
        if where == point and seen[where] == nth:
            os.kill(os.getpid(), signal.SIGKILL)

    def wrap(owner: Any, name: str, before: str = "", after: str = "", when: Any = None) -> None:
        original = getattr(owner, name)

        def hooked(*args: Any, **kw: Any) -> Any:
            on = when is None or when(*args)
            if before and on:
                hit(before)
            out = original(*args, **kw)
            if after and on:
                hit(after)
            return out

        setattr(owner, name, hooked)

    wrap(ck, "_manifest", after="aside")
    wrap(
        ck,
        "_write_atomic",
        before="renamed",
        when=lambda path, *_: path.name == "LATEST" and path.parent.name == "checkpoint",
    )
    wrap(ck, "_prune", before="committed")
    wrap(MetricsLogWriter, "write", after="logged")
    wrap(os, "replace", before="cutback", when=lambda src, dst: str(dst).endswith(".jsonl"))
    wrap(wu, "write_atomic", before=WARMUP)
    if sabotage == "no-cutback":
        loop.reconcile_logs = lambda run_dir, step: None  # type: ignore[assignment]
    assert resume  # imported so that the patched names are the ones the loop calls


def worker(args: list[str], point: str, nth: int, sabotage: str) -> int:
    from snooze.cli.main import main

    _arm(point, nth, sabotage)
    return main(args)


# -- the harness --------------------------------------------------------------------------------
class Run:
    """One ``snooze compare`` process: forked from this one, or a fresh interpreter."""

    def __init__(self, args: list[str], point: str, nth: int, how: str, sabotage: str, log: Path) -> None:
        self.t0 = time.monotonic()
        with open(log, "ab") as fh:
            if how == "exec":
                if point or sabotage:
                    cmd = [
                        sys.executable,
                        str(Path(__file__).resolve()),
                        "--worker",
                        "--kill-at",
                        point,
                        "--nth",
                        str(nth),
                    ]
                    cmd += ["--sabotage", sabotage, "--", *args]
                else:
                    exe = Path(sys.executable).with_name("snooze")
                    cmd = [str(exe), *args] if exe.exists() else [sys.executable, "-m", "snooze.cli.main", *args]
                self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(cmd, stdout=fh, stderr=fh)
                self.pid = self.proc.pid
                return
            self.proc = None
            pid = os.fork()
            if pid == 0:  # the child: run the command, never return into the harness
                code = 1
                try:
                    os.dup2(fh.fileno(), 1)
                    os.dup2(fh.fileno(), 2)
                    code = worker(args, point, nth, sabotage)
                except BaseException:  # noqa: BLE001 - report anything, then leave without cleanup
                    import traceback

                    traceback.print_exc()
                finally:
                    os._exit(code)
            self.pid = pid

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code (negative: killed by that signal), or ``None`` if still running after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.proc is not None:
                code = self.proc.poll()
            else:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                code = os.waitstatus_to_exitcode(status) if pid else None
            if code is not None:
                self.code = code
                return code
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(0.01)

    def kill(self) -> int:
        os.kill(self.pid, signal.SIGKILL)
        return int(self.wait())


def _kill_plan(rng: random.Random, j: int, i: int, points: tuple[str, ...]) -> tuple[str, int]:
    """Kill ``j`` of a series (``i`` overall): ``(point, nth)``; ``("", 0)`` for a random moment. Aimed and
    random kills alternate (when both are asked for); the aimed ones take the points in turn."""
    if j == 0 and WARMUP in points:
        return WARMUP, 1
    aimed = [p for p in POINTS if p in points]
    mixed = "random" in points
    if aimed and (not mixed or i % 2 == 0):
        point = aimed[(i // 2 if mixed else i) % len(aimed)]
        return point, rng.randint(1, 2 if point == "cutback" else 3)  # a resume cuts back two logs per run begun
    return "", 0


def series(
    root: Path,
    ref: Path,
    ref_wall: float,
    rng: random.Random,
    kills_left: int,
    start: int,
    how: str,
    sabotage: str,
    extra: list[str],
    points: tuple[str, ...],
) -> dict[str, Any]:
    """Kill the command until a rerun finishes (or ``kills_left`` are spent, then finish it); compare."""
    out, cache, log = root / "out", root / "cache", root / "runs.log"
    root.mkdir(parents=True)
    args = command(out, cache, extra)
    stats: collections.Counter[str] = collections.Counter()
    j = 0
    while j < kills_left:
        point, nth = _kill_plan(rng, j, start + j, points)
        proc = Run(args, point, nth, how, sabotage, log)
        code = proc.wait() if point else proc.wait(timeout=rng.uniform(0.0, ref_wall))
        if code is None:
            code = proc.kill()
        if code == 0:
            stats["finished"] += 1
            break
        if code != -signal.SIGKILL:
            stats["rerun_failed"] += 1
            break
        j += 1
        stats["kills"] += 1
        stats[f"kills_{point or 'random'}"] += 1
        stats.update(crash_check(out, ref))
    if not stats["finished"] and not stats["rerun_failed"]:
        code = Run(args, "", 0, how, sabotage, log).wait()
        stats["finished" if code == 0 else "rerun_failed"] += 1
    stats.update(final_check(out, ref))
    if stats["rerun_failed"]:
        sys.stderr.write(log.read_text()[-3000:])
    return dict(stats)


def reference(ref: Path, how: str, extra: list[str]) -> float:
    """The uninterrupted run into ``ref`` (kept if it is there already); its wall time in seconds."""
    wall = ref / "wall_seconds"
    if not wall.exists():
        shutil.rmtree(ref, ignore_errors=True)
        ref.mkdir(parents=True)
        start = time.monotonic()
        if Run(command(ref / "out", ref / "cache", extra), "", 0, how, "", ref / "run.log").wait() != 0:
            raise RuntimeError(f"the reference run failed:\n{(ref / 'run.log').read_text()[-3000:]}")
        wall.write_text(f"{time.monotonic() - start:.3f}\n")
    return float(wall.read_text())


def harness(
    kills: int,
    seed: int,
    how: str,
    sabotage: str,
    extra: list[str],
    keep: Path | None,
    ref: Path | None,
    points: tuple[str, ...] = ALL,
) -> dict[str, Any]:
    rng = random.Random(seed)
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="snooze-kill9-trainer-", dir=keep))
    try:
        ref = ref if ref is not None else tmp / "ref"
        ref_wall = reference(ref, how, extra)
        total: collections.Counter[str] = collections.Counter()
        n = 0
        while total["kills"] < kills and not total["rerun_failed"]:
            got = series(
                tmp / f"series{n}",
                ref / "out",
                ref_wall,
                rng,
                kills - total["kills"],
                total["kills"],
                how,
                sabotage,
                extra,
                points,
            )
            total.update(got)
            total["series"] += 1
            n += 1
            print(
                f"series {n}: {json.dumps(got)}", file=sys.stderr, flush=True
            )  # progress (the result is the last stdout line)
    finally:
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    keys = (
        "kills",
        "kills_random",
        *(f"kills_{p}" for p in (WARMUP, *POINTS)),
        "series",
        "finished",
        "rerun_failed",
        "arms_compared",
        "arms_differing",
        "arms_missing",
        "summary_differs",
        "metrics_lines",
        "reward_lines",
        "lost",
        "mismatched",
        "orphan_logs",
    )
    return {
        **{k: total[k] for k in keys},
        "reference_s": round(ref_wall, 1),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def _preload() -> None:
    """Import what the command imports, once, before workers are forked (a restart then costs little)."""
    import matplotlib.pyplot  # noqa: F401
    import torch._dynamo  # noqa: F401  (the optimizer imports it on first use: ~5 s)

    import snooze.cli.compare  # noqa: F401
    import snooze.experiments.compare  # noqa: F401
    import snooze.plots  # noqa: F401
    import snooze.trainer.loop  # noqa: F401


def _points(text: str) -> tuple[str, ...]:
    out = tuple(x for x in text.split(",") if x)
    if not out or set(out) - set(ALL):
        raise argparse.ArgumentTypeError(f"{text!r}: choose among {','.join(ALL)}")
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=30, help="SIGKILLs to deliver, over as many series as it takes")
    p.add_argument("--seed", type=int, default=0, help="seed of the kill plan and timings")
    p.add_argument(
        "--spawn", choices=("fork", "exec"), default="fork", help="fork workers, or start fresh interpreters"
    )
    p.add_argument("--sabotage", choices=("", "no-cutback"), default="", help="break the workers on purpose")
    p.add_argument("--keep", type=Path, default=None, help="work in a folder under this one and keep it (to inspect)")
    p.add_argument(
        "--reference",
        type=Path,
        default=None,
        help="folder of the uninterrupted run: made there if missing, reused if not",
    )
    p.add_argument(
        "--points", type=_points, default=ALL, help=f"kinds of kill moment, comma-separated (default: {','.join(ALL)})"
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--kill-at", default="", help=argparse.SUPPRESS)
    p.add_argument("--nth", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(extra, args.kill_at, args.nth, args.sabotage)
    if args.spawn == "fork":
        _preload()
    out = harness(args.kills, args.seed, args.spawn, args.sabotage, extra, args.keep, args.reference, args.points)
    print(json.dumps(out))
    bad = out["arms_differing"] + out["arms_missing"] + out["summary_differs"] + out["rerun_failed"]
    return 1 if bad or out["lost"] or out["mismatched"] or out["orphan_logs"] or not out["arms_compared"] else 0


if __name__ == "__main__":
    sys.exit(main())

"""Kill -9 harness: a training loop checkpointing every step is SIGKILLed at random moments and resumed.

    python benchmarks/kill9.py --kills 100

A worker subprocess (this file with ``--worker``) runs the step loop of ``_driver.py`` and calls
``Scheduler.save`` after every finished step and after the first generation round of every step
(so some checkpoints hold candidates out for rollout, which a resumed worker re-rolls from
``Scheduler.pending_candidates()``). The harness kills it with SIGKILL, restarts it, and repeats;
then lets it finish. Two kills in three land at a random moment after the worker started (about
one in ten while it is still loading); every third is aimed, in turn, at a point of the commit
protocol (``POINTS``): after a step's log line, inside ``save`` before and after ``LATEST`` is
replaced, and right after a mid-step checkpoint. After every kill the harness checks that each
committed step's log line is on disk and matches the reference.

The training log is crash-safe by construction (a write-ahead log): the line for step k is written
and fsynced *before* the checkpoint that ends step k; a restarted worker first rewrites the log
without the lines of steps its checkpoint has not committed (atomically: write aside, rename).
The checker compares the final log with an uninterrupted in-process reference run: every
(step, dataset, id) trained on must appear exactly as often as in the reference.

The last line printed is one JSON object: kills, missing, duplicated, unexpected, resumes, ...
Exit status 1 when anything is missing, duplicated or unexpected.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _driver as D  # noqa: E402

import snooze  # noqa: E402
from snooze.core.checkpoint import load_state  # noqa: E402

SIZES = (300, 500, 700)
SEED = 7


def _config() -> snooze.SchedulerConfig:
    return D.config(batch_size=8, gen_batch_size=8, group_size=4)


# -- the worker -------------------------------------------------------------------------------
def _recover_log(path: Path, committed_step: int) -> None:
    """Keep only complete lines of committed steps (``step < committed_step``); atomic rewrite."""
    if not path.exists():
        return
    keep = []
    for raw in path.read_bytes().split(b"\n"):
        try:
            row = json.loads(raw)
        except ValueError:
            continue  # a torn last line
        if row["step"] < committed_step:
            keep.append(raw)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(b"".join(line + b"\n" for line in keep))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _append(fh: Any, row: dict[str, Any]) -> None:
    fh.write(json.dumps(row) + "\n")
    fh.flush()
    os.fsync(fh.fileno())


POINTS = ("after-log", "before-commit", "after-commit", "mid-step")
"""Targeted kill points: after step k's log line, before its LATEST commit, after it (before the old
files are pruned), and right after a mid-step checkpoint (candidates pending)."""


_ARMED = {"point": "", "on": False, "commit": False}
"""In a worker: where to kill itself, whether it may yet, and whether the running ``save`` is the one
that commits a finished step (only that save carries the "before-commit"/"after-commit" points; the
mid-step save before it in the same step must not, or the kill lands where nothing is at stake)."""


def _hit(where: str) -> None:
    if _ARMED["on"] and where == _ARMED["point"]:
        os.kill(os.getpid(), signal.SIGKILL)


def _commit_step(sched: snooze.Scheduler, ckpt: Path) -> None:
    """The save that commits a finished step: the only one the in-``save`` kill points aim at."""
    _ARMED["commit"] = True
    try:
        sched.save(ckpt)
    finally:
        _ARMED["commit"] = False


def _arm(point: str) -> None:
    """Make this (worker) process SIGKILL itself at ``point`` once armed; hooks the checkpoint
    writer for the two points inside ``save``."""
    import snooze._kit.checkpoint as ck  # the protocol's module: save_state writes through its names

    write, prune = ck._write_atomic, ck._prune

    def write_hooked(path: Path, data: bytes) -> None:
        if path.name == "LATEST" and _ARMED["commit"]:
            _hit("before-commit")
        write(path, data)

    def prune_hooked(root: Path, keep: str) -> None:
        if _ARMED["commit"]:
            _hit("after-commit")
        prune(root, keep)

    ck._write_atomic, ck._prune = write_hooked, prune_hooked
    _ARMED["point"] = point


def worker(root: Path, steps: int, ready: Callable[[], None], sabotage: str = "", kill_at: str = "") -> None:
    """Resume from ``root/ckpt`` and train until ``steps``. ``sabotage`` breaks it on purpose so the
    harness can show it catches the break: ``skip-recovery`` keeps uncommitted log lines,
    ``log-after-save`` writes a step's log line after the checkpoint that commits it.
    ``kill_at`` (``POINTS``) makes the worker SIGKILL itself there in its second step."""
    ckpt, log_path = root / "ckpt", root / "train.log"
    sched = snooze.Scheduler.load(ckpt, D.datasets(SIZES))  # never starts afresh: the harness saved step 0
    if sabotage != "skip-recovery":
        _recover_log(log_path, sched.step_index)
    held = sched.pending_candidates()  # out for rollout when the last checkpoint was taken: roll them again
    ready()
    G, start = sched.config.group_size, sched.step_index
    if kill_at:
        _arm(kill_at)
    with open(log_path, "a") as log:
        while sched.step_index < steps:
            _ARMED["on"] = sched.step_index > start  # from the second step on
            first = True
            while not sched.batch_full and sched.round < sched.config.max_gen_rounds:
                cands = held if held else sched.propose()
                held = []
                if not cands:
                    break
                if first:
                    sched.save(ckpt)  # a mid-step checkpoint: candidates pending
                    _hit("mid-step")
                    first = False
                sched.report(cands, D.rewards(cands, G))
            batch = sched.finish_step()
            line = {"step": batch.step, "train": [[c.dataset, c.id] for c in batch.candidates]}
            if sabotage == "log-after-save":
                _commit_step(sched, ckpt)
            _append(log, line)
            _hit("after-log")
            if sabotage != "log-after-save":
                _commit_step(sched, ckpt)  # commits step batch.step: its log line is already durable


# -- the harness ------------------------------------------------------------------------------
def reference(steps: int) -> dict[int, list[tuple[str, Any]]]:
    sched = snooze.Scheduler(D.datasets(SIZES), _config(), seed=SEED)
    out: dict[int, list[tuple[str, Any]]] = {}
    for _ in range(steps):
        batch = sched.step(lambda c: D.rewards(c, sched.config.group_size))
        out[batch.step] = [(c.dataset, c.id) for c in batch.candidates]
    return out


class Worker:
    """A worker process: forked from this (already imported) process, or a fresh interpreter (``exec``)."""

    def __init__(self, root: Path, steps: int, how: str, sabotage: str, kill_at: str) -> None:
        if how == "exec":
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--dir", str(root), "--steps", str(steps)]
            cmd += (["--sabotage", sabotage] if sabotage else []) + (["--kill-at", kill_at] if kill_at else [])
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            assert self.proc.stdout is not None
            self.pid, self.ready_fd = self.proc.pid, self.proc.stdout.fileno()
            return
        self.proc = None
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: run the worker, never return into the harness
            code = 1
            try:
                os.close(r)
                worker(root, steps, lambda: os.write(w, b"ready\n") and None, sabotage, kill_at)
                code = 0
            except BaseException:  # noqa: BLE001 - report anything, then leave without cleanup
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(w)
        self.pid, self.ready_fd, self._status = pid, r, None

    def wait_ready(self, timeout: float) -> bool:
        """Wait for the worker's ``ready`` line (it may arrive in pieces); False on EOF or timeout."""
        got, deadline = b"", time.monotonic() + timeout
        while not got.endswith(b"\n"):
            ready, _, _ = select.select([self.ready_fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(self.ready_fd, 64) if ready else b""
            if not chunk:
                return False
            got += chunk
        return got == b"ready\n"

    def poll(self) -> int | None:
        if self.proc is not None:
            return self.proc.poll()
        if self._status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self._status = os.waitstatus_to_exitcode(status)
        return self._status

    def wait(self, timeout: float = 600.0) -> int:
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                raise RuntimeError("worker did not finish in time")
            time.sleep(0.005)
        if self.proc is None:
            os.close(self.ready_fd)
        return int(self.poll() or 0)

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.wait()


def _inside_save(ckpt: Path) -> bool:
    """Evidence that the kill landed inside ``save``: leftovers of a write, or a state file not yet committed."""
    if any(p.name.startswith(".tmp-") for p in ckpt.iterdir()):
        return True
    committed = json.loads((ckpt / "LATEST").read_text())["file"]
    newest = max((p for p in ckpt.iterdir() if p.name.startswith("state-")), key=lambda p: p.stat().st_mtime_ns)
    return newest.name != committed


def _check(root: Path, ref: dict[int, list[tuple[str, Any]]], upto: int | None = None) -> dict[str, int]:
    """Compare the training log with the reference. ``upto``: only steps below it (the committed ones
    at a crash), reading the log as a restarted worker would (torn lines and later steps ignored)."""
    got: collections.Counter[tuple[int, str, Any]] = collections.Counter()
    for raw in (root / "train.log").read_bytes().split(b"\n") if (root / "train.log").exists() else []:
        try:
            row = json.loads(raw)
        except ValueError:
            continue
        if upto is None or row["step"] < upto:
            got.update((row["step"], ds, i) for ds, i in row["train"])
    want = collections.Counter((s, ds, i) for s, rows in ref.items() if upto is None or s < upto for ds, i in rows)
    extra = got - want
    duplicated = sum(n for k, n in extra.items() if k in want)  # trained on more often than the reference
    return {
        "missing": sum((want - got).values()),
        "duplicated": duplicated,
        "unexpected": sum(extra.values()) - duplicated,
    }


def _committed_step(ckpt: Path) -> int:
    return int(load_state(ckpt)["meta"]["metrics"]["totals"]["steps"])


def _kill_once(root: Path, steps: int, how: str, sabotage: str, rng: random.Random, i: int) -> dict[str, int]:
    """Start a worker and have it die by SIGKILL: every third kill at a targeted point (``POINTS``, in
    turn), the others at a random moment. Returns what happened (``finished`` if it ran to the end)."""
    targeted = i % 3 == 2
    point = POINTS[(i // 3) % len(POINTS)] if targeted else ""
    proc = Worker(root, steps, how, sabotage, point)
    early = not targeted and rng.random() < 0.1  # sometimes while it is still starting up or loading
    if targeted:
        code = proc.wait()
        return {"finished": int(code == 0), "targeted": int(code == -signal.SIGKILL)}
    if early:
        time.sleep(rng.uniform(0.0, 0.02))
    elif not proc.wait_ready(timeout=60.0):
        raise RuntimeError(f"worker failed to start (exit {proc.wait()})")
    else:
        time.sleep(rng.uniform(0.0, max_delay_s))
    if proc.poll() is not None:
        return {"finished": 1}
    proc.kill()
    return {"random": 1, "before_ready": int(early), "inside_save": int(_inside_save(root / "ckpt"))}


max_delay_s = 0.04


def harness(
    kills: int, steps: int, max_delay: float, seed: int, how: str = "fork", sabotage: str = ""
) -> dict[str, Any]:
    global max_delay_s
    max_delay_s = max_delay
    rng = random.Random(seed)
    t0 = time.perf_counter()
    ref = reference(steps)
    with tempfile.TemporaryDirectory(prefix="snooze-kill9-") as tmp:
        root = Path(tmp)
        snooze.Scheduler(D.datasets(SIZES), _config(), seed=SEED).save(root / "ckpt")
        stats: collections.Counter[str] = collections.Counter()
        while stats["kills"] < kills:
            got = _kill_once(root, steps, how, sabotage, rng, stats["kills"])
            if got.get("finished"):  # the run ended before this kill
                stats["finished_early"] += 1
                break
            stats.update({"kills": 1, "resumes": 1, **{f"kills_{k}": v for k, v in got.items()}})
            # at the crash, every committed step's log line is durable and matches the reference
            interim = _check(root, ref, upto=_committed_step(root / "ckpt"))
            stats.update({"crash_missing": interim["missing"], "crash_mismatched": interim["unexpected"]})
        final = Worker(root, steps, how, sabotage, "")
        if final.wait() != 0:
            raise RuntimeError("the final worker failed")
        result = _check(root, ref)
        committed = snooze.Scheduler.load(root / "ckpt", D.datasets(SIZES))
        result["state_equal"] = int(D.state_hash(committed) == _reference_hash(steps))
    keys = ("kills_random", "kills_targeted", "kills_inside_save", "kills_before_ready", "finished_early")
    return {
        "kills": stats["kills"],
        **result,
        "resumes": stats["resumes"],
        **{k: stats[k] for k in keys},
        "crash_missing": stats["crash_missing"],
        "crash_mismatched": stats["crash_mismatched"],
        "steps": steps,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def _reference_hash(steps: int) -> str:
    sched = snooze.Scheduler(D.datasets(SIZES), _config(), seed=SEED)
    for _ in range(steps):
        sched.step(lambda c: D.rewards(c, sched.config.group_size))
    return D.state_hash(sched)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=100, help="SIGKILLs to deliver")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: 3 per kill + 30)")
    p.add_argument("--max-delay", type=float, default=0.04, help="longest wait after the worker is ready (s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the kill timings")
    p.add_argument(
        "--spawn", choices=("fork", "exec"), default="fork", help="fork workers, or start fresh interpreters"
    )
    p.add_argument(
        "--sabotage", choices=("", "skip-recovery", "log-after-save"), default="", help="break the worker on purpose"
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--kill-at", choices=("", *POINTS), default="", help=argparse.SUPPRESS)
    p.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    steps = args.steps if args.steps is not None else 3 * args.kills + 30
    if args.worker:
        worker(args.dir, steps, lambda: print("ready", flush=True), args.sabotage, args.kill_at)
        return 0
    out = harness(args.kills, steps, args.max_delay, args.seed, args.spawn, args.sabotage)
    print(json.dumps(out))
    clean = out["missing"] == out["duplicated"] == out["unexpected"] == out["crash_missing"] == 0
    return 0 if clean and out["crash_mismatched"] == 0 and out["state_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())

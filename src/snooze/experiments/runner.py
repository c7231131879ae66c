"""Running the arm x seed training runs of ``snooze compare``: one after another, or in worker processes.

Each run is one :func:`snooze.trainer.loop.train` call with its own seeds and its own run folder, so
runs are independent: with ``jobs > 1`` they run in that many spawned worker processes, each with
``threads`` torch threads. A run's numbers depend on its thread count (float sums in another order),
never on how many runs share the machine; with the default one thread per run they are the same for
``jobs=1`` and ``jobs=2`` (a test checks it). Oversubscribing the cores is what to avoid: two runs of 2
threads on 2 cores took 9-10 s per step instead of 0.26 s.
"""

from __future__ import annotations

import io
import logging
import os
import queue as queue_mod
import signal
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snooze.core.config import SchedulerConfig

__all__ = ["RunSpec", "run_all"]

logger = logging.getLogger(__name__)

OnStep = Callable[[str, int, dict[str, Any]], None]


@dataclass(frozen=True)
class RunSpec:
    """One training run: an arm at a seed, its data and configs."""

    arm: str
    seed: int
    run_dir: Path
    data: str
    """Which datasets it trains on: ``main`` (the task mix) or ``fig3`` (the strata)."""
    sched: SchedulerConfig
    train: Any
    """Its :class:`~snooze.trainer.config.TrainConfig`."""
    curriculum: Path | None = None
    """A curriculum file (loaded afresh by the run: a curriculum is stateful)."""


def _state_bytes(state: Mapping[str, Any]) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(dict(state), buf)
    return buf.getvalue()


def _train_one(
    spec: RunSpec,
    data: Mapping[str, tuple[Any, Any]],
    model_cfg: Any,
    base: bytes,
    threads: int,
    report: Callable[[dict[str, Any]], None] | None,
) -> Path:
    import torch

    from snooze.curriculum import Curriculum
    from snooze.trainer.loop import train

    torch.set_num_threads(threads)
    state = torch.load(io.BytesIO(base), map_location="cpu", weights_only=True)
    pools, tests = data[spec.data]
    cur = Curriculum.from_file(spec.curriculum) if spec.curriculum is not None else None
    train(spec.run_dir, pools, tests, spec.sched, spec.train, model_cfg, state, on_step=report, curriculum=cur)
    return spec.run_dir


def _worker(
    spec: RunSpec, data: Mapping[str, tuple[Any, Any]], model_cfg: Any, base: bytes, threads: int, progress: Any
) -> Path:
    """Body of a worker process: train one run, sending each step's metrics line to ``progress``."""

    def report(line: dict[str, Any]) -> None:
        progress.put((spec.arm, spec.seed, line))

    return _train_one(spec, data, model_cfg, base, threads, report if progress is not None else None)


def run_all(
    specs: Sequence[RunSpec],
    data: Mapping[str, tuple[Any, Any]],
    model_cfg: Any,
    base: Mapping[str, Any],
    jobs: int = 1,
    threads: int = 1,
    on_step: OnStep | None = None,
) -> list[Path]:
    """Train every run (in ``jobs`` worker processes when above 1); their run folders, in ``specs`` order.

    ``data``: ``"main"``/``"fig3"`` -> ``(pools, tests)``. ``base``: the base model's state dict.
    ``on_step(arm, seed, line)`` gets every step's metrics line, in the calling process.
    """
    blob = _state_bytes(base)
    if jobs <= 1 or len(specs) <= 1:
        for spec in specs:
            cb = (lambda line, s=spec: on_step(s.arm, s.seed, line)) if on_step is not None else None
            _train_one(spec, data, model_cfg, blob, threads, cb)
        return [s.run_dir for s in specs]
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # no forked torch state; the same on every platform
    from multiprocessing.managers import SyncManager

    manager = SyncManager(ctx=ctx)  # the progress queue's server: it too dies with this process
    manager.start(_die_with_parent, (os.getpid(),))
    pool_args = {
        "max_workers": min(jobs, len(specs)),
        "mp_context": ctx,
        "initializer": _die_with_parent,
        "initargs": (os.getpid(),),
    }
    with manager, ProcessPoolExecutor(**pool_args) as pool:
        progress = manager.Queue() if on_step is not None else None
        pending: set[Future[Path]] = {pool.submit(_worker, s, data, model_cfg, blob, threads, progress) for s in specs}
        try:
            while pending:
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                _drain(progress, on_step)
                for fut in done:
                    fut.result()  # a run's error stops the comparison here, with its own message
        except BaseException:
            for fut in pending:
                fut.cancel()  # runs not started yet never start; a rerun resumes the ones cut short
            raise
        _drain(progress, on_step)
    return [s.run_dir for s in specs]


def _die_with_parent(parent: int) -> None:
    """In a worker process: be killed when the parent process dies (Linux), so a SIGKILLed ``snooze compare``
    leaves no worker training on into a run folder the rerun needs (elsewhere: workers end after their run)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _drain(progress: Any, on_step: OnStep | None) -> None:
    if progress is None or on_step is None:
        return
    while True:
        try:
            arm, seed, line = progress.get_nowait()
        except queue_mod.Empty:
            return
        on_step(arm, seed, line)

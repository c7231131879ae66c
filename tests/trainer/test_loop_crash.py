"""The reference loop's crash safety: a crash at each step of the checkpoint commit and of the log
cut-back, then the same call again, ends with the logs of the uninterrupted run; logs are never
deleted by a silent restart; a damaged checkpoint is refused naming the file.

The crash is an exception raised at the point (what is on disk then is what a SIGKILL there leaves:
every log line is flushed when written). ``benchmarks/kill9_trainer.py`` does the same with real
SIGKILLs of ``snooze compare``. A random tiny policy is enough: what is tested is the files.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import snooze
import snooze.logs._jsonl as jsonl
from snooze.logs import MetricsLogWriter
from snooze.trainer import checkpoint as ckpt
from snooze.trainer._resume import run_lock
from snooze.trainer.loop import METRICS_FILE, REWARDS_FILE, TrainConfig, train
from snooze.trainer.model import ModelConfig, TinyGPT
from snooze.trainer.tasks import parse_tasks, task_splits
from snooze.trainer.tokenizer import CharTokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

MODEL = ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=1, d_model=16, n_head=2)
SCHED = snooze.SchedulerConfig(batch_size=3, group_size=2, policy="dynamic_sampling", max_gen_rounds=2)
POOLS, TESTS = task_splits(parse_tasks(["rev:3-5"]), pool_size=30, test_size=4)
STEPS = 5
CFG = TrainConfig(steps=STEPS, eval_every=2, checkpoint_every=2, max_new_tokens=6, seed=1)
TIME_KEYS = ("time/step_s", "time/elapsed_s")


def _base() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return TinyGPT(MODEL).state_dict()


BASE = _base()


class Crash(Exception):
    """Stands for a SIGKILL at the point it is raised."""


def _train(run_dir: Path, **kw: Any) -> None:
    train(run_dir, POOLS, TESTS, SCHED, kw.pop("cfg", CFG), MODEL, BASE, **kw)


def _logs(run_dir: Path) -> tuple[list[dict[str, Any]], str]:
    metrics = [json.loads(x) for x in (run_dir / METRICS_FILE).read_text().splitlines()]
    return [{k: v for k, v in x.items() if k not in TIME_KEYS} for x in metrics], (run_dir / REWARDS_FILE).read_text()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], str]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    run_dir = tmp_path_factory.mktemp("reference")
    _train(run_dir)
    torch.set_num_threads(threads)
    return _logs(run_dir)


def _crash_on(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, nth: int, after: bool) -> None:
    """Make ``owner.name`` raise :class:`Crash` on its ``nth`` call (before or after doing its work)."""
    original = getattr(owner, name)
    calls = {"n": 0}

    def hooked(*args: Any, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == nth and not after:
            raise Crash(name)
        out = original(*args, **kw)
        if calls["n"] == nth:
            raise Crash(name)
        return out

    monkeypatch.setattr(owner, name, hooked)


POINTS: dict[str, Callable[[pytest.MonkeyPatch, int], None]] = {
    # the step folder written aside and fsynced, not yet renamed into place
    "aside": lambda mp, n: _crash_on(mp, ckpt, "_manifest", n, after=True),
    # renamed into place, LATEST not yet replaced (the previous commit still stands)
    "renamed": lambda mp, n: _crash_on(mp, ckpt, "_write_atomic", n, after=False),
    # LATEST replaced, the older step folder not yet removed
    "committed": lambda mp, n: _crash_on(mp, ckpt, "_prune", n, after=False),
    # a step's metrics line written, its checkpoint not yet committed
    "logged": lambda mp, n: _crash_on(mp, MetricsLogWriter, "write", n, after=True),
}


CASES = [(point, 2) for point in POINTS] + [("aside", 1), ("renamed", 1), ("committed", 3)]
"""Commit 1 is step 0's (before any log line), 2 is step 2's, 3 is step 4's (``checkpoint_every=2``)."""


@pytest.mark.parametrize(("point", "nth"), CASES)
def test_a_crash_at_each_point_of_the_commit_then_the_same_call_ends_as_the_uninterrupted_run(
    tmp_path: Path, reference: tuple[list[dict[str, Any]], str], point: str, nth: int
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        POINTS[point](mp, nth)
        with pytest.raises(Crash):
            _train(tmp_path)
    folder = ckpt.committed(tmp_path / "checkpoint")
    assert folder is not None or (point in ("aside", "renamed") and nth == 1)  # only the first commit can be missing
    _train(tmp_path)
    assert _logs(tmp_path) == reference
    names = sorted(p.name for p in (tmp_path / "checkpoint").iterdir())
    assert len(names) == 2 and names[0] == "LATEST" and names[1].startswith(f"step-{STEPS:08d}-")  # leftovers swept


def test_a_crash_while_cutting_the_logs_back_leaves_the_old_log_and_resumes(
    tmp_path: Path, reference: tuple[list[dict[str, Any]], str]
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        POINTS["logged"](mp, 4)  # step 3 logged after the commit of step 2: the resume cuts it off
        with pytest.raises(Crash):
            _train(tmp_path)
    before = (tmp_path / METRICS_FILE).read_bytes()
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if str(dst).endswith(".jsonl"):
            raise Crash("replace")  # the cut-back log written aside and fsynced, not yet renamed
        real(src, dst)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jsonl.os, "replace", replace)
        with pytest.raises(Crash):
            _train(tmp_path)
    assert (tmp_path / METRICS_FILE).read_bytes() == before  # the old log, whole
    _train(tmp_path)
    assert _logs(tmp_path) == reference


def test_logs_without_a_checkpoint_are_refused_not_deleted(tmp_path: Path) -> None:
    _train(tmp_path, cfg=TrainConfig(steps=2, eval_every=2, max_new_tokens=6, seed=1))
    shutil.rmtree(tmp_path / "checkpoint")
    before = {n: (tmp_path / n).read_bytes() for n in (METRICS_FILE, REWARDS_FILE)}
    with pytest.raises(snooze.StateError, match="no committed checkpoint.*resume=False"):
        _train(tmp_path)
    assert {n: (tmp_path / n).read_bytes() for n in before} == before
    _train(tmp_path, resume=False)  # starting over is explicit
    assert [x["step"] for x in _logs(tmp_path)[0]] == list(range(STEPS))


def test_a_damaged_checkpoint_is_refused_naming_the_file(tmp_path: Path) -> None:
    _train(tmp_path, stop_after=2)
    folder = ckpt.committed(tmp_path / "checkpoint")
    assert folder is not None
    before = (tmp_path / METRICS_FILE).read_bytes()
    model = folder / "model.pt"
    model.write_bytes(model.read_bytes()[:-10])
    with pytest.raises(snooze.StateError, match=f"{model}: checksum mismatch"):
        _train(tmp_path)
    (tmp_path / "checkpoint" / "LATEST").write_text("{not json")
    with pytest.raises(snooze.StateError, match="LATEST: not a readable commit record"):
        _train(tmp_path)
    assert (tmp_path / METRICS_FILE).read_bytes() == before


def test_a_log_shorter_than_the_checkpoint_is_refused(tmp_path: Path) -> None:
    _train(tmp_path, stop_after=2)
    lines = (tmp_path / REWARDS_FILE).read_text().splitlines(keepends=True)
    (tmp_path / REWARDS_FILE).write_text("".join(lines[:-1]))
    with pytest.raises(snooze.StateError, match="rewards.jsonl: holds .* groups, but the 2 committed steps generated"):
        _train(tmp_path)
    (tmp_path / METRICS_FILE).write_text((tmp_path / METRICS_FILE).read_text().splitlines(keepends=True)[0])
    with pytest.raises(snooze.StateError, match="metrics.jsonl: holds steps 0..0 .* committed steps 0..1"):
        _train(tmp_path)


def test_a_checkpoint_of_snooze_0_1_0_is_resumed(tmp_path: Path, reference: tuple[list[dict[str, Any]], str]) -> None:
    """0.1.0 kept the files directly in ``checkpoint/`` (and ``config.json`` only in the run folder)."""
    _train(tmp_path, stop_after=2)
    root = tmp_path / "checkpoint"
    folder = ckpt.committed(root)
    assert folder is not None
    for path in folder.iterdir():
        if path.name != "config.json":
            path.rename(root / path.name)
    shutil.rmtree(folder)
    (root / "LATEST").unlink()
    _train(tmp_path)
    assert _logs(tmp_path) == reference
    assert not (root / "model.pt").exists() and ckpt.committed(root) is not None  # rewritten in the new layout


def test_resuming_with_another_checkpoint_interval_is_allowed(
    tmp_path: Path, reference: tuple[list[dict[str, Any]], str]
) -> None:
    _train(tmp_path, stop_after=3)
    _train(tmp_path, cfg=TrainConfig(steps=STEPS, eval_every=2, checkpoint_every=1, max_new_tokens=6, seed=1))
    assert _logs(tmp_path) == reference


def test_two_trainers_in_one_folder_are_refused(tmp_path: Path) -> None:
    tmp_path.mkdir(exist_ok=True)
    with run_lock(tmp_path), pytest.raises(snooze.StateError, match="another process is training this run"):
        _train(tmp_path)
    assert not (tmp_path / METRICS_FILE).exists()

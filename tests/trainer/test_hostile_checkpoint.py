"""Issue 27's root causes in the reference trainer: a FIFO in its checkpoint or warm-up cache (a load
would block forever), a commit that fails on a full disk (its partial folder must not stay), and
configuration values that are accepted and fail later with a traceback (``--lr inf``, a temperature
where sampling overflows, a CUDA device the machine does not have)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path

import pytest

import snooze
from snooze.experiments.baseline import BaselineConfig
from snooze.experiments.profiles import PROFILES, with_overrides
from snooze.trainer import checkpoint as ckpt
from snooze.trainer.config import GRPOConfig, TrainConfig
from snooze.trainer.model import ModelConfig
from snooze.trainer.tasks import parse_tasks
from snooze.trainer.tokenizer import CharTokenizer
from snooze.trainer.warmup import WarmupConfig, warmup

HUGE = 10**400


def _commit(root: Path, step: int, payload: bytes = b"weights") -> Path:
    def write(folder: Path) -> None:
        (folder / "model.pt").write_bytes(payload)
        (folder / "scheduler").mkdir()
        (folder / "scheduler" / "LATEST").write_text("{}")

    return ckpt.commit(root, step, write)


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


# -- item 6: special files --------------------------------------------------------------------------------
@pytest.mark.timeout(20)
@pytest.mark.parametrize("which", ["LATEST", "model.pt"])
def test_a_fifo_in_a_trainer_checkpoint_is_a_state_error_not_a_hang(tmp_path: Path, which: str) -> None:
    root = tmp_path / "checkpoint"
    folder = _commit(root, 3)
    if which == "LATEST":
        (root / "LATEST").unlink()
        os.mkfifo(root / "LATEST")
    else:  # a record re-signed for an empty file: the size check alone would pass, the read would block
        record = json.loads((root / "LATEST").read_text())
        record["files"]["model.pt"] = {"bytes": 0, "sha256": hashlib.sha256(b"").hexdigest()}
        (root / "LATEST").write_text(json.dumps(record))
        (folder / "model.pt").unlink()
        os.mkfifo(folder / "model.pt")
    with pytest.raises(snooze.StateError, match=r"named pipe \(FIFO\), not a regular file"):
        ckpt.committed(root)


@pytest.mark.timeout(20)
def test_a_fifo_in_a_0_1_0_checkpoint_is_a_state_error_not_a_hang(tmp_path: Path) -> None:
    """0.1.0's layout (files directly in checkpoint/) lists no sizes, so each file is checked to be a file."""
    root = tmp_path / "checkpoint"
    root.mkdir()
    (root / "trainer.json").write_text('{"step": 2, "elapsed": 1.0}')
    os.mkfifo(root / "model.pt")
    with pytest.raises(snooze.StateError, match=r"model.pt: checkpoint file cannot be read \(is a named pipe"):
        ckpt.committed(root)


@pytest.mark.timeout(60)
def test_a_fifo_in_the_warm_up_cache_is_a_state_error_saying_to_delete_it(tmp_path: Path) -> None:
    from snooze.trainer.warmup import _key

    specs, cfg = parse_tasks(["rev:3-4"]), WarmupConfig(max_steps=1)
    model_cfg = ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=1, d_model=16, n_head=2)
    cache = tmp_path / f"warmup-{_key(cfg, model_cfg, specs, ())}"
    cache.mkdir()
    (cache / "model.pt").write_bytes(b"x")
    os.mkfifo(cache / "meta.json")
    with pytest.raises(snooze.StateError, match=f"meta.json: cannot be read .*named pipe.*delete {cache}"):
        warmup(specs, (), cfg, model_cfg, cache_dir=tmp_path)


# -- item 7: a commit that fails ----------------------------------------------------------------------------
@pytest.mark.parametrize("nth", [1, 4, 5, 6], ids=["a file", "the folder aside", "after the rename", "LATEST"])
def test_a_commit_that_fails_on_a_full_disk_leaves_nothing_and_the_last_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nth: int
) -> None:
    root = tmp_path / "checkpoint"
    _commit(root, 1)
    before = _tree(root)
    real, calls = os.fsync, {"n": 0}

    def fsync(fd: int) -> None:  # the nth fsync of the commit fails, as a full disk makes it
        calls["n"] += 1
        if calls["n"] == nth:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    with monkeypatch.context() as mp:
        mp.setattr(os, "fsync", fsync)
        with pytest.raises(OSError, match="No space left"):
            _commit(root, 2, b"new weights")
    assert calls["n"] >= nth and _tree(root) == before  # no .tmp-* folder, no uncommitted step folder
    assert ckpt.committed(root).name.startswith("step-00000001-")
    _commit(root, 2)
    assert ckpt.committed(root).name.startswith("step-00000002-")


# -- item 11: values that fail later -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "value", [1e-300, 1e-4, 0.0, -1.0, float("inf"), float("nan"), pytest.param(HUGE, id="10**400")]
)
def test_a_temperature_sampling_cannot_use_is_refused_by_every_config(value: float) -> None:
    for make in (
        lambda t: TrainConfig(temperature=t),
        lambda t: with_overrides(PROFILES["quick"], temperature=t),
        lambda t: BaselineConfig(temperature=t),
    ):
        with pytest.raises(snooze.ConfigError, match=r"temperature=.*: must be a finite number >= 0.001"):
            make(value)
    if value != 0.0:
        with pytest.raises(
            snooze.ConfigError, match=r"val_temperature=.*: must be 0 \(greedy\) or a finite number >= 0.001"
        ):
            WarmupConfig(val_temperature=value)
    assert TrainConfig(temperature=0.001).temperature == 0.001 and WarmupConfig(val_temperature=0).val_temperature == 0


@pytest.mark.parametrize("value", [float("inf"), float("nan"), pytest.param(HUGE, id="10**400"), 0.0])
def test_a_learning_rate_that_is_not_finite_and_positive_is_refused(value: float) -> None:
    for make, what in (
        (lambda v: GRPOConfig(lr=v), "GRPOConfig.lr"),
        (lambda v: with_overrides(PROFILES["quick"], lr=v), "Profile.lr"),
        (lambda v: WarmupConfig(lr=v), "WarmupConfig.lr"),
    ):
        with pytest.raises(snooze.ConfigError, match=f"{what}=.*: must be a finite number > 0"):
            make(value)
    for field in ("kl_coef", "weight_decay", "clip_high", "max_grad_norm"):
        if value != 0.0 or field == "max_grad_norm":
            with pytest.raises(snooze.ConfigError, match=f"GRPOConfig.{field}="):
                GRPOConfig(**{field: value})


def test_a_cuda_device_the_machine_lacks_is_refused_when_the_config_is_made() -> None:
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    missing = "cuda" if count == 0 else f"cuda:{count}"
    with pytest.raises(snooze.ConfigError, match=f"TrainConfig.device='{missing}': .*use --device cpu"):
        TrainConfig(device=missing)
    for bad in ("gpu", "cuda:", "cuda:x", "cpu:0", 0):
        with pytest.raises(snooze.ConfigError, match="must be 'cpu', 'cuda' or 'cuda:N'"):
            TrainConfig(device=bad)  # type: ignore[arg-type]
    if count:
        assert TrainConfig(device="cuda").device == "cuda"

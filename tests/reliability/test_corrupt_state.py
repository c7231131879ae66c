"""Issue 6.3: corrupt, truncated, stale or foreign checkpoints raise a typed error naming the file.

Nothing restarts silently: every damaged checkpoint below must raise :class:`snooze.StateError`
(never another exception type, never a fresh scheduler).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import _driver as D
import numpy as np
import pytest

import snooze
from snooze.core.checkpoint import load_state

SEED = 5


def _saved(tmp: Path, steps: int = 6) -> tuple[Path, Path]:
    """A checkpoint directory after ``steps`` steps with snoozes active; returns (dir, committed file)."""
    sched = snooze.Scheduler(D.datasets(), D.config(), seed=SEED)
    D.drive(sched, steps, [])
    root = tmp / "ckpt"
    return root, sched.save(root)


def _load(root: Path) -> snooze.Scheduler:
    return snooze.Scheduler.load(root, D.datasets())


def _resign(root: Path, file: Path, data: bytes) -> None:
    """Write ``data`` into ``file`` and a LATEST that vouches for it (so the parser itself is tested)."""
    file.write_bytes(data)
    rec = json.loads((root / "LATEST").read_text())
    rec.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    (root / "LATEST").write_text(json.dumps(rec))


def _expect_state_error(root: Path, names: str) -> snooze.StateError:
    with pytest.raises(snooze.StateError) as info:
        _load(root)
    assert names in str(info.value), f"error does not name {names!r}: {info.value}"
    return info.value


def test_round_trip_is_exact(tmp_path: Path) -> None:
    root, _ = _saved(tmp_path)
    sched = snooze.Scheduler(D.datasets(), D.config(), seed=SEED)
    D.drive(sched, 6, [])
    assert D.state_hash(_load(root)) == D.state_hash(sched)


def test_truncated_state_file_at_many_offsets(tmp_path: Path) -> None:
    root, file = _saved(tmp_path)
    good = file.read_bytes()
    offsets = sorted(
        {0, 1, 4, 22, 30, len(good) // 3, len(good) // 2, len(good) - 22, len(good) - 1, *range(0, len(good), 97)}
    )
    for cut in offsets:
        file.write_bytes(good[:cut])  # LATEST still vouches for the full file: checksum mismatch
        _expect_state_error(root, file.name)
    for cut in offsets:  # and with a LATEST that matches the truncated bytes: the parser must refuse it
        _resign(root, file, good[:cut])
        _expect_state_error(root, file.name)


def test_flipped_bits(tmp_path: Path) -> None:
    root, file = _saved(tmp_path)
    good = file.read_bytes()
    rng = np.random.default_rng(0)
    for pos in rng.choice(len(good), size=40, replace=False).tolist():
        bad = bytearray(good)
        bad[pos] ^= 1 << int(rng.integers(8))
        file.write_bytes(bytes(bad))
        err = _expect_state_error(root, file.name)
        assert "checksum" in str(err)


def test_flipped_bits_behind_a_valid_checksum_never_escape_as_other_errors(tmp_path: Path) -> None:
    """A state altered and re-signed either loads (the flip hit a value the format cannot check)
    or raises StateError: never a KeyError/ValueError/zipfile error from deep inside."""
    root, file = _saved(tmp_path)
    good = file.read_bytes()
    rng = np.random.default_rng(1)
    outcomes = {"loaded": 0, "refused": 0}
    for pos in rng.choice(len(good), size=60, replace=False).tolist():
        bad = bytearray(good)
        bad[pos] ^= 1 << int(rng.integers(8))
        _resign(root, file, bytes(bad))
        try:
            _load(root)
            outcomes["loaded"] += 1
        except snooze.StateError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0


@pytest.mark.parametrize("victim", ["state", "LATEST"])
def test_empty_files(tmp_path: Path, victim: str) -> None:
    root, file = _saved(tmp_path)
    target = file if victim == "state" else root / "LATEST"
    target.write_bytes(b"")
    _expect_state_error(root, target.name)


def test_truncated_commit_record(tmp_path: Path) -> None:
    root, _ = _saved(tmp_path)
    good = (root / "LATEST").read_bytes()
    for cut in range(0, len(good), 7):
        (root / "LATEST").write_bytes(good[:cut])
        _expect_state_error(root, "LATEST")


def test_unknown_checkpoint_version(tmp_path: Path) -> None:
    root, _ = _saved(tmp_path)
    rec = json.loads((root / "LATEST").read_text())
    rec["version"] = 99
    (root / "LATEST").write_text(json.dumps(rec))
    err = _expect_state_error(root, "LATEST")
    assert "99" in str(err)


def test_unknown_state_version(tmp_path: Path) -> None:
    root, file = _saved(tmp_path)
    state = load_state(root)
    state["meta"]["version"] = 7
    file2 = snooze.core.checkpoint.save_state(root, state)
    err = _expect_state_error(root, file2.name)
    assert "version 7" in str(err)


def test_checksum_mismatch(tmp_path: Path) -> None:
    root, file = _saved(tmp_path)
    rec = json.loads((root / "LATEST").read_text())
    rec["sha256"] = "0" * 64
    (root / "LATEST").write_text(json.dumps(rec))
    assert "checksum" in str(_expect_state_error(root, file.name))


def test_missing_checkpoint_never_restarts_silently(tmp_path: Path) -> None:
    _expect_state_error(tmp_path / "never-saved", "never-saved")
    (tmp_path / "empty").mkdir()
    _expect_state_error(tmp_path / "empty", "LATEST")


@pytest.mark.parametrize("layout", ["trainer run", "trainer checkpoint", "trainer step", "trl", "unrelated"])
def test_a_training_checkpoint_names_the_scheduler_folder_inside_it(tmp_path: Path, layout: str) -> None:
    """Scheduler.load on a training checkpoint (the reference trainer's run folder, its checkpoint/ with the
    trainer's own LATEST, a step folder; TRL's checkpoint-N/ with snooze/) says where the scheduler's state is."""
    sched = snooze.Scheduler(D.datasets(), D.config(), seed=SEED)
    run = tmp_path / "run"
    step = run / "checkpoint" / "step-00000006-0123abcd"
    inner = {"trl": run / "snooze", "unrelated": run / "elsewhere"}.get(layout, step / "scheduler")
    sched.save(inner)
    (run / "checkpoint").mkdir(exist_ok=True)
    (run / "checkpoint" / "LATEST").write_text(json.dumps({"format": "snooze.trainer", "version": 1, "dir": step.name}))
    root = {"trainer checkpoint": run / "checkpoint", "trainer step": step}.get(layout, run)
    err = _expect_state_error(root, "LATEST")
    if layout == "unrelated":
        assert "training checkpoint" not in str(err) and "pass the directory given to save()" in str(err)
    else:
        assert f"the scheduler's state is in {inner}, pass that" in str(err)
        assert _load(inner).step_index == sched.step_index


def test_stale_temporaries_are_never_a_checkpoint(tmp_path: Path) -> None:
    """A save killed before its commit leaves ``.tmp-*`` files (or a stray state file): not loadable."""
    root = tmp_path / "ckpt"
    root.mkdir()
    sched = snooze.Scheduler(D.datasets(), D.config(), seed=SEED)
    state = sched.state_dict()
    (root / ".tmp-0badf00d-state-00000003-0badf00d.npz").write_bytes(b"partial")
    (root / ".tmp-deadbeef-LATEST").write_text('{"file": "state-00000003-0badf00d.npz"}')
    (root / ".tmp-cafe0000-dir").mkdir()
    _expect_state_error(root, "LATEST")
    from snooze.core.checkpoint import save_state

    save_state(root, state)  # a later save sweeps the leftovers, files and directories alike
    assert not list(root.glob(".tmp-*"))
    assert D.state_hash(_load(root)) == D.state_hash(sched)


def test_newer_uncommitted_state_file_is_ignored(tmp_path: Path) -> None:
    root, file = _saved(tmp_path, steps=3)
    committed = D.state_hash(_load(root))
    (root / "state-00000099-0badf00d.npz").write_bytes(file.read_bytes()[:100])  # died before LATEST moved
    assert D.state_hash(_load(root)) == committed


def test_committed_file_deleted(tmp_path: Path) -> None:
    root, file = _saved(tmp_path)
    file.unlink()
    _expect_state_error(root, file.name)


def test_malformed_state_dicts_raise_state_error() -> None:
    sched = snooze.Scheduler(D.datasets(), D.config(), seed=SEED)
    good = sched.state_dict()
    bad_states = [
        {},
        {"meta": [], "arrays": {}},
        {"meta": {**good["meta"], "config": "nope"}, "arrays": good["arrays"]},
        {"meta": {**good["meta"], "datasets": [1, 2, 3]}, "arrays": good["arrays"]},
        {"meta": good["meta"], "arrays": {k: v for k, v in good["arrays"].items() if k != "ds1.counter"}},
        {"meta": good["meta"], "arrays": {**good["arrays"], "ds0.counter": good["arrays"]["ds0.counter"][:-1]}},
        {"meta": good["meta"], "arrays": {**good["arrays"], "ds0.counter": good["arrays"]["ds0.counter"] - 1}},
        {"meta": good["meta"], "arrays": {**good["arrays"], "pending": np.array([[1, 9, 0]])}},
        {"meta": good["meta"], "arrays": {**good["arrays"], "pending": np.array([[1, 0, 10**6]])}},
        {"meta": {**good["meta"], "step_batch": {"rounds": -3}}, "arrays": good["arrays"]},
        {"meta": good["meta"], "arrays": {**good["arrays"], "step.place": np.array([9], dtype=np.int8)}},
    ]
    for i, bad in enumerate(bad_states):
        fresh = snooze.Scheduler(D.datasets(), D.config(), seed=SEED)
        with pytest.raises(snooze.StateError):
            fresh.load_state_dict(bad)
        assert fresh.step_index == 0, f"state {i}: a refused load changed the scheduler"


def test_corrupt_saved_config_names_the_file(tmp_path: Path) -> None:
    root, _ = _saved(tmp_path)
    state = load_state(root)
    state["meta"]["config"]["batch_size"] = -1
    file = snooze.core.checkpoint.save_state(root, state)
    _expect_state_error(root, file.name)


def test_oversized_commit_record_is_not_read_whole(tmp_path: Path) -> None:
    root, _ = _saved(tmp_path)
    (root / "LATEST").write_bytes(b" " * 200_000 + (root / "LATEST").read_bytes())
    assert "over" in str(_expect_state_error(root, "LATEST"))

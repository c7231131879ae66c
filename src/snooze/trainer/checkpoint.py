"""The reference trainer's checkpoint: a folder of files committed as one, by the scheduler's protocol.

::

    checkpoint/
      LATEST                        the commit record: {"format", "version", "dir", "step", "files"}
      step-00000042-<hex>/          model.pt, optimizer.pt, rng.pt, rollouts.pt, trainer.json, config.json,
                                    scheduler/ (a Scheduler.save folder), [curriculum.json],
                                    [pipeline.pt, pipeline.json] (batches generated ahead: TrainConfig.staleness)

:func:`commit` writes every file into a new ``.tmp-<hex>`` folder, fsyncs each file and folder,
renames the folder to ``step-<step>-<hex>`` and fsyncs ``checkpoint/``; then it replaces ``LATEST``
(written aside, fsynced, renamed, fsynced: ``snooze._kit.checkpoint``'s commit record protocol). Only
after that are the older step folders and leftovers of interrupted commits removed; a commit that
fails (a full disk) removes what it wrote before the error goes on. A kill at any
moment leaves ``LATEST`` naming a complete step folder (the old one or the new one), or, before the
first commit of a run, no ``LATEST`` at all. ``LATEST`` lists every file with its size and sha256;
:func:`committed` checks them all before anything is loaded and raises :class:`~snooze.StateError`
naming the file that does not match.

Checkpoints written by snooze 0.1.0 (the files directly in ``checkpoint/``) are still read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from snooze._kit.checkpoint import read_committed, read_record
from snooze._kit.files import fsync_dir as _fsync_dir
from snooze._kit.files import open_regular
from snooze._kit.files import write_atomic as _write_atomic  # by this name: benchmarks/kill9_trainer.py hooks it
from snooze.core.errors import StateError

__all__ = ["commit", "committed", "write_atomic", "TRAINER_FORMAT", "TRAINER_VERSION"]

TRAINER_FORMAT = "snooze.trainer"
TRAINER_VERSION = 1
_DIR_RE = re.compile(r"\Astep-[0-9]{8,}-[0-9a-f]{8}\Z")
_MAX_RECORD = 1 << 20  # bytes of LATEST read at most (a record is a few hundred bytes)
_LEGACY = "trainer.json"  # 0.1.0: the checkpoint's files directly in checkpoint/
_LEGACY_FILES = frozenset({"model.pt", "optimizer.pt", "rng.pt", "rollouts.pt", "trainer.json", "curriculum.json"})


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that a crash leaves the old or the new file, never a part."""
    _write_atomic(path, text.encode("utf-8"))
    _fsync_dir(path.parent)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _manifest(folder: Path) -> dict[str, dict[str, Any]]:
    """Every file under ``folder`` (relative POSIX path -> bytes, sha256), each fsynced, and every folder too."""
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_dir():
            _fsync_dir(path)
            continue
        data = path.read_bytes()
        _fsync_file(path)
        files[path.relative_to(folder).as_posix()] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    _fsync_dir(folder)
    return files


def commit(root: Path, step: int, write: Callable[[Path], None]) -> Path:
    """Commit a checkpoint of ``step`` into ``root``: ``write(folder)`` fills a fresh folder aside, which
    then becomes the committed one. Returns the committed step folder."""
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-{secrets.token_hex(4)}"
    name = f"step-{step:08d}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:  # a failure (a full disk) removes what this commit wrote: LATEST still names the old folder
        write(tmp)
        files = _manifest(tmp)
        os.replace(tmp, root / name)
        _fsync_dir(root)
        record = {"format": TRAINER_FORMAT, "version": TRAINER_VERSION, "dir": name, "step": step, "files": files}
        _write_atomic(root / "LATEST", json.dumps(record, sort_keys=True).encode("utf-8"))
    except BaseException:
        for folder in (tmp, root / name):
            shutil.rmtree(folder, ignore_errors=True)
        raise
    _fsync_dir(root)
    _prune(root, keep=name)
    return root / name


def _prune(root: Path, keep: str) -> None:
    """Remove the step folders but ``keep``, leftovers of interrupted commits, and a 0.1.0 checkpoint's files."""
    for path in root.iterdir():
        if path.name == keep or path.name == "LATEST" or path.is_symlink():
            continue
        if path.is_dir() and (_DIR_RE.match(path.name) or path.name.startswith(".tmp-") or path.name == "scheduler"):
            shutil.rmtree(path, ignore_errors=True)
        elif path.name.startswith(".tmp-") or path.name in _LEGACY_FILES:
            path.unlink(missing_ok=True)


def committed(root: Path) -> Path | None:
    """The committed step folder of checkpoint ``root``, its files verified; ``None`` when nothing was
    ever committed there (no folder, or only leftovers of a first commit that died). A damaged commit
    raises :class:`StateError` naming the file."""
    latest = root / "LATEST"
    if not (latest.exists() or latest.is_symlink()):
        return _legacy(root) if (root / _LEGACY).exists() else None
    record = _read_record(latest)
    folder = root / record["dir"]
    if folder.is_symlink() or not folder.is_dir():
        raise StateError(f"{folder}: the folder {latest} commits is missing; the checkpoint is damaged. {_FIX}")
    for rel, want in record["files"].items():
        read_committed(folder / rel, want, "checkpoint file", _FIX)
    return folder


def _legacy(root: Path) -> Path:
    """``root``, a 0.1.0 checkpoint (its files unlisted, so unverified): each of its files must be a regular file."""
    for name in sorted(_LEGACY_FILES):
        if (root / name).exists() or (root / name).is_symlink() or name == _LEGACY:
            try:
                open_regular(root / name).close()
            except OSError as exc:
                raise StateError(
                    f"{root / name}: checkpoint file cannot be read ({exc.strerror or exc}). {_FIX}"
                ) from None
    return root


_FIX = (
    "Restore the run folder from a backup, or start the run over in a new folder "
    "(snooze compare: a new --out; train(): or resume=False)."
)


def _read_record(latest: Path) -> dict[str, Any]:
    record = read_record(latest, TRAINER_FORMAT, TRAINER_VERSION, "snooze trainer checkpoint", _FIX, _MAX_RECORD)
    name, files = record.get("dir"), record.get("files")
    if not isinstance(name, str) or not _DIR_RE.match(name):
        raise StateError(f"{latest}: names the folder {name!r}, which is not a step folder of the checkpoint. {_FIX}")
    if (
        not isinstance(files, dict)
        or not files
        or not all(_plain(rel) and isinstance(v, dict) for rel, v in files.items())
    ):
        raise StateError(f"{latest}: its file list is malformed; the checkpoint is corrupt. {_FIX}")
    return record


def _plain(rel: Any) -> bool:
    """A relative path inside the step folder: no absolute path, no ``..``, no empty part."""
    return isinstance(rel, str) and not rel.startswith("/") and all(p not in ("", ".", "..") for p in rel.split("/"))

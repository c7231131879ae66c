"""Atomic, checksummed, pickle-free state files: the format and its commit protocol, shared by the scheduler's
state (``snooze.save_state`` / ``snooze.load_state``, :mod:`snooze.core.checkpoint`) and the reference
trainer's step folders (:mod:`snooze.trainer.checkpoint`).

A checkpoint is a directory::

    path/
      LATEST                     # {"format", "version", "file", "sha256", "bytes"}: the commit record
      state-00000042-<nonce>.npz # numpy arrays + the JSON metadata, np.savez (no pickle)

Saving writes the state file aside, fsyncs, renames it into place, then replaces ``LATEST`` the
same way. A crash at any moment leaves either the old ``LATEST`` (pointing at a complete old file)
or the new one; temporary files (``.tmp-*``) are never read. Saves into one directory take turns: each
holds an exclusive lock on ``path/.lock`` (``flock``, which the kernel releases when a saver dies), so
two threads or processes saving there never delete each other's files, and ``LATEST`` always names a
file that is there. A path that is not a directory, or a write that fails (no space, no permission), is
a :class:`~snooze.StateError` naming the path (a path that is no path at all: ``None``, bytes, ``""``, one
holding a NUL, is a :class:`~snooze.ConfigError`); the last committed checkpoint is left as it was, and the
failed save leaves no file behind. Loading verifies size and sha256 before parsing, reads with
``allow_pickle=False``, reads only regular files (a FIFO or a device in their place is refused, never
opened for a blocking read), parses JSON with the guarded reader (:mod:`snooze._kit.json`), and only
follows a ``LATEST`` whose file name is a plain name inside the directory.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import secrets
import shutil
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from snooze._kit.checks import as_path
from snooze._kit.errors import StateError
from snooze._kit.files import fsync_dir as _fsync_dir
from snooze._kit.files import open_regular, read_regular, remove_quietly
from snooze._kit.files import write_atomic as _write_atomic  # by these names: benchmarks/kill9*.py hook them
from snooze._kit.json import parse_json, same_version

__all__ = ["save_state", "load_state", "CHECKPOINT_FORMAT", "CHECKPOINT_VERSION"]

CHECKPOINT_FORMAT = "snooze.checkpoint"
CHECKPOINT_VERSION = 1
_META_KEY = "__meta__"
_FILE_RE = re.compile(r"\Astate-[0-9]{8,}-[0-9a-f]{8}\.npz\Z")  # \Z: "$" would accept a trailing newline
_MAX_RECORD = 64 * 1024  # bytes of LATEST read at most
_KEEP = 2  # state files kept: the committed one and the one before it
_RETRIES = 8  # a loader outrun by this many saves in a row reports the file it last saw as missing


try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: saves in this process still take turns
    fcntl = None  # type: ignore[assignment]
_IN_PROCESS = threading.Lock()  # where flock is missing


@contextmanager
def _turn(root: Path) -> Iterator[None]:
    """Hold the directory's save lock: one save at a time in ``root``, across threads and processes."""
    if fcntl is None:  # pragma: no cover
        with _IN_PROCESS:
            yield
        return
    fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)  # one descriptor per save: flock excludes threads too
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def save_state(path: str | os.PathLike[str], state: dict[str, Any]) -> Path:
    """Commit ``state`` (``{"meta": dict, "arrays": dict}``) into directory ``path``; return the state file."""
    root = as_path(path, "save_state(path)")  # before anything is encoded or made
    data, step = _encode(state)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = "a file of that name is in the way" if isinstance(exc, FileExistsError) else (exc.strerror or str(exc))
        raise StateError(
            f"{root}: cannot save a checkpoint here ({why}); pass a directory path (save() creates it)"
        ) from None
    try:
        with _turn(root):
            return _commit(root, data, step)
    except OSError as exc:
        raise StateError(
            f"{root}: the checkpoint could not be written ({exc.strerror or exc}); the last committed one is unchanged"
        ) from None


def _encode(state: dict[str, Any]) -> tuple[bytes, int]:
    """The state file's bytes (npz of the arrays and the JSON meta) and the step it is named by."""
    arrays = dict(state["arrays"])
    if _META_KEY in arrays:
        raise StateError(f"array name {_META_KEY!r} is reserved")
    meta = json.dumps(state["meta"], sort_keys=True, allow_nan=False).encode("utf-8")
    arrays[_META_KEY] = np.frombuffer(meta, dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue(), _step_of(state["meta"])


def _step_of(meta: Mapping[str, Any]) -> int:
    """The finished steps the state holds, which name its file (0 for a state that holds no such count)."""
    metrics = meta.get("metrics")
    totals = metrics.get("totals") if isinstance(metrics, Mapping) else None
    return int(totals["steps"]) if isinstance(totals, Mapping) and "steps" in totals else 0


def _commit(root: Path, data: bytes, step: int) -> Path:
    name = f"state-{step:08d}-{secrets.token_hex(4)}.npz"
    _write_atomic(root / name, data)  # a failure leaves nothing (write_atomic removes its temporary file)
    record = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "file": name,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    try:
        _fsync_dir(root)
        _write_atomic(root / "LATEST", json.dumps(record, sort_keys=True).encode("utf-8"))
    except BaseException:  # LATEST still names the old file: the new one would only hold the disk
        remove_quietly(root / name)
        raise
    _fsync_dir(root)
    _prune(root, keep=name)
    return root / name


def _prune(root: Path, keep: str) -> None:
    """Delete state files but the newest ``_KEEP`` (always ``keep``) and leftovers of interrupted saves."""
    files = sorted(
        (p for p in root.iterdir() if _FILE_RE.match(p.name) and p.is_file()), key=lambda p: p.stat().st_mtime_ns
    )
    for old in [p for p in files if p.name != keep][: max(0, len(files) - _KEEP)]:
        old.unlink(missing_ok=True)
    for tmp in root.glob(".tmp-*"):
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)


def read_record(
    latest: Path, fmt: str, version: int, what: str, fix: str = "", max_bytes: int = _MAX_RECORD
) -> dict[str, Any]:
    """The commit record ``latest`` (a small JSON object) of format ``fmt`` and ``version``, or a
    :class:`StateError` naming the file; ``what`` names the checkpoint kind in messages, ``fix`` (a
    sentence) is appended to them. Used by the scheduler's checkpoints and the reference trainer's."""
    tail = f". {fix}" if fix else ""
    try:
        raw = read_regular(latest, max_bytes + 1)  # a commit record is a few hundred bytes; never read a huge file
    except OSError as exc:
        raise StateError(
            f"{latest}: not a readable commit record ({exc.strerror or exc}); the checkpoint is corrupt{tail}"
        ) from None
    if len(raw) > max_bytes:
        raise StateError(f"{latest}: over {max_bytes} bytes, so not a commit record; the checkpoint is corrupt{tail}")
    record = parse_json(raw, f"{latest}: not a readable commit record", StateError, f"the checkpoint is corrupt{tail}")
    if not isinstance(record, dict) or record.get("format") != fmt:
        raise StateError(f"{latest}: not a {what} record{tail}")
    if not same_version(record.get("version"), version):
        raise StateError(
            f"{latest}: {what.removeprefix('snooze ')} version {record.get('version')!r} is not supported (this snooze "
            f"reads version {version}); resume it with the snooze release that wrote it"
        )
    return record


def read_committed(file: Path, record: dict[str, Any], what: str, fix: str) -> bytes:
    """The bytes of ``file``, checked against its commit ``record`` (``bytes``, ``sha256``), or a
    :class:`StateError` naming the file: a symbolic link, a wrong size (checked before reading: a wrong
    file may be huge) or a wrong checksum. ``what`` names the file's kind in messages (``"state file
    inside <dir>"``), ``fix`` (a sentence) says what to do. Used by both checkpoints."""
    if file.is_symlink():
        raise StateError(f"{file}: is a symbolic link; a committed {what} must be a plain file. {fix}")
    mismatch = "the file was truncated or altered after it was committed"
    try:
        with open_regular(file) as fh:  # a FIFO or a device is refused, never read (a read would block or not end)
            size = os.fstat(fh.fileno()).st_size
            if size != record.get("bytes"):
                raise StateError(
                    f"{file}: checksum mismatch ({size} bytes, expected {record.get('bytes')}); {mismatch}. {fix}"
                )
            data = fh.read()
    except OSError as exc:
        raise StateError(f"{file}: committed {what} cannot be read ({exc.strerror or exc}). {fix}") from None
    if len(data) != record.get("bytes") or hashlib.sha256(data).hexdigest() != record.get("sha256"):
        raise StateError(
            f"{file}: checksum mismatch ({len(data)} bytes, expected {record.get('bytes')}); {mismatch}. {fix}"
        )
    return data


_INNER = ("scheduler", "snooze")  # the scheduler's folder in a reference-trainer step folder; in a TRL/verl one


def _committed_dir(record: Path) -> str | None:
    """The folder a training checkpoint's commit record names (the reference trainer's ``{"dir": ...}``)."""
    try:
        # bounded, as every read of a record
        name = parse_json(read_regular(record, _MAX_RECORD), str(record), StateError).get("dir")
    except (OSError, StateError, AttributeError):
        return None
    return name if isinstance(name, str) and name and Path(name).name == name else None


def _inner_hint(root: Path) -> str:
    """Where the scheduler's state is, when ``root`` is a training run or checkpoint that holds one (the
    reference trainer's run folder, its ``checkpoint/`` or a step folder; TRL's ``checkpoint-N/``; verl's
    ``global_step_N/``): a sentence naming that folder, or ``""``."""
    folders = []
    for ckpt in (root, root / "checkpoint"):
        committed = _committed_dir(ckpt / "LATEST")
        folders += [ckpt / committed] if committed else []
    for inner in (folder / name for folder in (*folders, root) for name in _INNER):
        if (inner / "LATEST").is_file():
            return f"; {root} is a training checkpoint: the scheduler's state is in {inner}, pass that"
    return ""


def _read_record(root: Path) -> dict[str, Any]:
    latest = root / "LATEST"
    if not root.is_dir():
        raise StateError(f"{root}: no checkpoint directory here (nothing was saved, or the path is wrong)")
    if not (latest.exists() or latest.is_symlink()):  # (anything else there read_record refuses, saying what)
        raise StateError(
            f"{latest}: missing, so {root} holds no committed checkpoint (a save that died before its commit "
            "leaves only temporary files, which are never loaded)"
            + (_inner_hint(root) or "; pass the directory given to save()")
        )
    try:
        record = read_record(latest, CHECKPOINT_FORMAT, CHECKPOINT_VERSION, "snooze checkpoint")
    except StateError:  # only a refused record looks around for a training checkpoint's inner folder
        record = read_record(
            latest, CHECKPOINT_FORMAT, CHECKPOINT_VERSION, "snooze checkpoint", _inner_hint(root).removeprefix("; ")
        )
    name = record.get("file")
    if not isinstance(name, str) or not _FILE_RE.match(name):
        raise StateError(
            f"{latest}: names the file {name!r}, which is not a state file inside the checkpoint directory"
        )
    return record


def load_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and verify the committed state of directory ``path``. Raises :class:`StateError` naming the file.

    Returns ``{"meta", "arrays", "path"}``; ``path`` (the state file) lets later checks name the file too.
    """
    root = as_path(path, "load_state(path)")
    # a save between reading LATEST and opening its file may prune that file: read LATEST again
    for _ in range(_RETRIES):
        record = _read_record(root)
        file = root / record["file"]
        if file.exists() or _read_record(root)["file"] == record["file"]:
            break
    data = read_committed(
        file, record, f"state file inside {root}", "Restore it from a backup or start a new run explicitly."
    )
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        raw_meta = arrays.pop(_META_KEY).tobytes()
    except Exception as exc:  # numpy/zipfile raise many types; translate at the boundary
        raise StateError(f"{file}: not a readable snooze state ({type(exc).__name__}: {exc})") from None
    meta = parse_json(raw_meta, f"{file}: the state's metadata", StateError, "the state is corrupt")
    if not isinstance(meta, dict):
        raise StateError(f"{file}: metadata is not a JSON object")
    return {"meta": meta, "arrays": arrays, "path": str(file)}

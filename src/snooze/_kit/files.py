"""The file operations every reader and writer of the library shares: reading only regular files, and
replacing a file atomically without leaving anything behind when the write fails.

- :func:`open_regular`: a named pipe (FIFO), a device or a socket where a file is expected would make a
  read block forever or never end; the file is opened without blocking (``O_NONBLOCK``) and checked
  with ``fstat`` on the open descriptor, so nothing can be swapped in between a check and the open.
  Anything but a regular file (a symbolic link to one is fine) is an ``OSError`` naming the path,
  which each reader turns into its own error (``StateError``, ``DataError``, ``ConfigError``).
- :func:`write_atomic`: written aside, fsynced, renamed into place; a write that fails (no space,
  no permission) removes its temporary file before the error goes on, so a full disk is not kept
  full by the failed save's leftovers.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Any

__all__ = ["open_regular", "read_regular", "write_atomic", "fsync_dir", "remove_quietly"]

_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def open_regular(path: str | os.PathLike[str], text: bool = False, **kwargs: Any) -> IO[Any]:
    """``open(path, "rb")`` (``"r"`` with ``text``; ``kwargs`` go to :func:`open`), for a regular file only.

    Never blocks: a FIFO is opened with ``O_NONBLOCK`` (which regular files ignore) and refused. A folder
    is an ``IsADirectoryError``, anything else not a regular file an ``OSError`` (``EINVAL``) whose
    ``strerror`` says what it is."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            what = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            raise OSError(errno.EINVAL, f"is {what}, not a regular file", str(path))
        return open(fd, "r" if text else "rb", **kwargs)  # noqa: SIM115 - the caller closes it
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], limit: int = -1) -> bytes:
    """The bytes of regular file ``path`` (at most ``limit`` when given); see :func:`open_regular`."""
    with open_regular(path) as fh:
        return fh.read(limit)


def remove_quietly(path: Path) -> None:
    """Remove ``path`` if it is there; a failure to remove it is not an error (the caller's is raised)."""
    try:
        path.unlink(missing_ok=True)
    except OSError:  # pragma: no cover - e.g. the folder became read-only meanwhile
        pass


def fsync_dir(path: Path) -> None:
    """Make a rename or an unlink in folder ``path`` durable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, tmp: Path | None = None) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file, never a part: the
    bytes go to ``tmp`` (default ``.tmp-<hex>-<name>`` beside it), are fsynced, and the file is renamed
    into place. When any of that fails the temporary file is removed and the error raised; ``path`` is
    untouched."""
    tmp = tmp if tmp is not None else path.with_name(f".tmp-{secrets.token_hex(4)}-{path.name}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        remove_quietly(tmp)
        raise

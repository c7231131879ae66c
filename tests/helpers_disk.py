"""A disk that fills up (a file size limit, an fsync that fails): for the tests of the writers that keep old files."""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def file_size_limit(size: int) -> Iterator[None]:
    """Inside, a write past ``size`` bytes into any file fails (``EFBIG``, RLIMIT_FSIZE with SIGXFSZ
    ignored), as it would on a full disk: whatever writes the file, in place or aside."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def failing_fsync(monkeypatch: pytest.MonkeyPatch, nth: int) -> None:
    """``os.fsync`` fails with ENOSPC on its ``nth`` call, as a full disk makes it (delayed allocation)."""
    real, calls = os.fsync, {"n": 0}

    def fsync(fd: int) -> None:
        calls["n"] += 1
        if calls["n"] == nth:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def files(folder: Path) -> dict[str, bytes]:
    """Every file in ``folder`` (temporary ones too) by name, with its bytes."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}

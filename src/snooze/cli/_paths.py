"""Argument types for the paths the commands take: checked when the command line is parsed, so a
wrong path is a one-line usage error (exit 2) before anything is read, trained or written.

>>> import argparse
>>> p = argparse.ArgumentParser()
>>> _ = p.add_argument("--out", type=output_folder)
>>> p.parse_args(["--out", "runs/new"]).out
PosixPath('runs/new')
"""

from __future__ import annotations

import argparse
from pathlib import Path

from snooze._kit.files import open_regular

__all__ = ["input_file", "output_folder", "output_file", "refuse_existing"]


def _not_empty(text: str, what: str) -> Path:
    """``Path(text)``; an empty text is refused (``Path("")`` is the current folder: ``--out ''`` wrote there)."""
    if not text:
        raise argparse.ArgumentTypeError(f"an empty path; pass {what}")
    return Path(text)


def input_file(text: str) -> Path:
    """A regular file that exists (not a folder; not a FIFO or a device, whose reading would block or not end)."""
    path = _not_empty(text, "a file")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a folder; pass a file")
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    try:
        open_regular(path).close()
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{text}: {exc.strerror or exc}; pass a file") from None
    return path


def _blocking_file(path: Path) -> Path | None:
    """The first of ``path`` and its parents that exists, when it is not a folder (so no folder can be made there)."""
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            return None if p.is_dir() else p
    return None


def output_folder(text: str) -> Path:
    """A folder to write into: it exists, or it can be created (no file in the way)."""
    path = _not_empty(text, "a folder (it is created if missing; . for the current folder)")
    blocking = _blocking_file(path)
    if blocking is not None:
        what = "is a file" if blocking == path else f"cannot be created: {blocking} is a file"
        raise argparse.ArgumentTypeError(f"{text}: {what}; pass a folder (it is created if missing)")
    return path


def output_file(text: str) -> Path:
    """A file to write: not a folder, and its folder exists or can be created."""
    path = _not_empty(text, "the path of a file to write")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a folder; pass the path of a file to write")
    blocking = _blocking_file(path.parent)
    if blocking is not None:
        raise argparse.ArgumentTypeError(f"{text}: cannot be written: {blocking} is a file, not a folder")
    return path


def refuse_existing(path: Path, force: bool) -> None:
    """A command's ``--out`` file that exists is written over only with ``--force`` (no command truncates a
    file it did not create in this run): checked before any work, so a refusal costs nothing."""
    from snooze.core.errors import ConfigError

    if not force and (path.exists() or path.is_symlink()):
        raise ConfigError(f"{path}: exists; pass --force to write over it, or another --out")

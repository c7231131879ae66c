"""JSON lines as the run logs use them: one object per line, appended and flushed as a run goes.

One rule for every log and every reader: a run killed while writing leaves its last line cut short
(no newline at its end); such a last line is dropped with a warning. Any other line that is not a
JSON object is a :class:`~snooze.DataError` naming the file and the line (the guarded reader,
:mod:`snooze._kit.json`: an integer too long or nesting too deep is such a line too): a log is never
silently shortened in the middle. Only a regular file is read (a FIFO is refused, never waited on).
A writer that starts a log afresh never writes over an earlier one: it moves a non-empty file at its
path to ``<stem>.earlier-N<suffix>`` first (:func:`move_aside`, the rule of every writer here).
Cutting a log back to a step (on resume) writes it aside and renames it into place (fsynced, then the
folder fsynced), so a crash leaves either the old or the new log; a cut-back that fails (a full disk)
removes what it wrote aside.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from snooze._kit.checks import INT64_MAX, as_int, as_path, is_int
from snooze._kit.files import fsync_dir, open_regular, remove_quietly, write_atomic
from snooze._kit.json import parse_json
from snooze.core.errors import ConfigError, DataError

__all__ = [
    "LineWriter",
    "read_lines",
    "truncate_log",
    "fail",
    "cut_short",
    "CUT_INSIDE",
    "written_aside",
    "move_aside",
]

log = logging.getLogger(__name__)

Fast = Callable[[str], Any]
"""A reader's parser for the lines it knows the exact form of.

Returns the line's value, or ``None`` (see :func:`read_lines`).
"""


CUT_INSIDE = (
    "not one JSON object: the line ends before its object does (cut short: a run killed while writing it, "
    "then more lines written after it); each line of a JSONL file is one whole object: fix or remove that line"
)
"""Why a line inside a log that starts an object and does not end it is refused."""


def cut_short(text: str) -> bool:
    """Whether a line that is not JSON looks cut short: it opens an object it does not close."""
    body = text.strip()
    return body.startswith("{") and not body.endswith("}")


def refuse_cut_short(path: Path) -> None:
    """A log a writer appends to (non-empty) must end with a newline: its last line cut short (a run killed
    while writing it) would join the first line appended, so it is a :class:`DataError` saying what to do."""
    with open_regular(path) as handle:
        handle.seek(-1, os.SEEK_END)
        cut = handle.read(1) != b"\n"
    if cut:
        raise DataError(
            f"{path}: its last line is cut short (a run killed while writing it), so a line appended would join "
            "it; cut the log back first (snooze.logs.truncate_log), then append"
        )


def fail(path: str | os.PathLike[str], line: int, field: str | None, what: str) -> DataError:
    """The error for a bad line: ``<path>, line <n>[, field '<f>']: <what>``."""
    return DataError(f"{path}, line {line}" + (f", field {field!r}" if field else "") + f": {what}")


def move_aside(path: Path, kind: str = "file") -> Path | None:
    """The one rule of every writer that starts a file afresh: an earlier non-empty regular file at ``path`` is
    never written over; it is renamed ``<stem>.earlier-N<suffix>`` (the first free N) and a warning names it.
    Returns that name (``None``: nothing there worth keeping, an empty file included)."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    n = 1
    while (aside := path.with_name(f"{path.stem}.earlier-{n}{path.suffix}")).exists() or aside.is_symlink():
        n += 1
    try:
        path.rename(aside)
    except OSError as exc:
        raise ConfigError(
            f"{path}: holds an earlier {kind} that could not be moved aside to {aside.name} ({exc.strerror or exc}); "
            "pass another path"
        ) from None
    log.warning("%s held an earlier %s; this fresh run moved it to %s and starts a new one", path, kind, aside)
    return aside


class LineWriter:
    """Appends lines to a log, flushed at each write so a crashed run still leaves a usable file;
    a context manager (``with Writer(path) as log: ...``). A new log (``append=False``) never writes over an
    earlier one: a non-empty file at ``path`` is moved aside first (:func:`move_aside`). A subclass checks
    everything it was given before this opens anything."""

    kind = "log"

    def __init__(self, path: str | os.PathLike[str], append: bool = False) -> None:
        self.path = Path(path)
        self._handle: IO[str] | None = None
        if self.path.exists() and not self.path.is_file():  # a folder; a FIFO would block the open until read
            raise ConfigError(f"{self.path}: is not a regular file; pass the path of a {self.kind} file to write")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot be written ({exc.strerror or exc}); pass another path") from None
        moved = None if append else move_aside(self.path, self.kind)
        try:
            self._handle = open(self.path, "a" if append else "w", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            if moved is not None:
                with contextlib.suppress(OSError):
                    moved.rename(self.path)  # a refused call leaves things as they were
            raise ConfigError(f"{self.path}: cannot be written ({exc.strerror or exc}); pass another path") from None

    def _write_lines(self, lines: list[str]) -> None:
        if self._handle is None:
            raise DataError(f"{self.path}: the {self.kind} writer is closed")
        self._handle.write("".join(lines))
        self._handle.flush()

    def sync(self) -> None:
        """Make every line written so far durable (``fsync``): a trainer calls it before it commits a
        checkpoint, so the lines of every committed step are on disk."""
        if self._handle is not None:
            self._handle.flush()
            os.fsync(self._handle.fileno())

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> LineWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@contextmanager
def written_aside(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (``.tmp-<hex>-<name>``) for a block to write a file to: when the block
    ends, that file is fsynced and renamed onto ``path`` (then the folder fsynced); when it raises, the file is
    removed. ``path`` is then the old file or the whole new one, never a part, and nothing is left beside it."""
    tmp = path.with_name(f".tmp-{secrets.token_hex(4)}-{path.name}")
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        remove_quietly(tmp)
        raise
    fsync_dir(path.parent)


def _parsed(path: str | os.PathLike[str], fast: Fast | None = None) -> Iterator[tuple[int, str, Any]]:
    """``(line number, text, object)`` of every non-blank line; object ``None``: a last line cut short.
    A file that cannot be read or is not UTF-8 is a :class:`DataError` naming it."""
    try:
        yield from _parse(path, fast)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason}); a run log is UTF-8 JSON lines") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a folder, not a log file") from None
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror})") from None


def _parse(path: str | os.PathLike[str], fast: Fast | None) -> Iterator[tuple[int, str, Any]]:
    with open_regular(path, text=True, encoding="utf-8") as handle:  # a FIFO is refused, not read
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            quick = fast(text) if fast is not None else None
            if quick is not None:
                yield number, text, quick
                continue
            try:
                obj = parse_json(text, f"{path}, line {number}", DataError, "fix or remove that line")
            except DataError:
                if not text.endswith("\n"):  # only the last line can lack one: cut short by a crash
                    yield number, text, None
                    return
                if cut_short(text):
                    raise fail(path, number, None, CUT_INSIDE) from None
                raise
            if not isinstance(obj, dict):
                raise fail(path, number, None, f"expected a JSON object per line, got {type(obj).__name__}")
            yield number, text, obj


def read_lines(path: str | os.PathLike[str], fast: Fast | None = None) -> Iterator[tuple[int, Any]]:
    """``(line number, object)`` of every non-blank line, in file order (1-based numbers).

    ``fast``: a reader's own parser for the lines it knows the exact form of (``line -> value``, ``None``
    for any other line): where it gives a value, that value is yielded in place of the parsed object; every
    other line goes through the guarded JSON reader. It must accept only lines that are complete JSON
    objects which the reader's own checks would accept, so that it changes the speed, never the result."""
    for number, _, obj in _parsed(path, fast):
        if obj is None:
            log.warning("%s, line %d: dropping a last line cut short (a run killed while writing it)", path, number)
            return
        yield number, obj


def truncate_log(path: str | os.PathLike[str], from_step: int) -> int:
    """Drop every line whose ``step`` is ``>= from_step`` (the steps a resumed run will redo), and a last
    line cut short; a header first line (the reward log's) is kept. Returns how many lines were dropped; a
    missing file is fine (nothing logged yet). ``from_step`` is an integer in [0, 2**63 - 1] and ``path`` a
    path, else a :class:`~snooze.ConfigError` and the file is left as it is (``-1`` would drop every line)."""
    p = as_path(path, "truncate_log(path)")
    from_step = as_int(from_step, "truncate_log(from_step)", 0, INT64_MAX)
    if not p.exists():
        return 0
    kept: list[str] = []
    dropped = 0
    for number, text, obj in _parsed(p):
        if obj is not None and "format" in obj and not kept and not dropped:  # a reward log's header stays
            kept.append(text if text.endswith("\n") else text + "\n")
            continue
        step = obj.get("step") if obj is not None else None
        if obj is not None and not (is_int(step) and 0 <= step <= INT64_MAX):  # (-1 was kept, as a step before all)
            raise fail(
                p, number, "step", f"{step!r}: not a line of a snooze run log; move the file aside or log elsewhere"
            )
        if obj is None or step >= from_step:
            dropped += 1
        else:
            kept.append(text if text.endswith("\n") else text + "\n")
    try:
        write_atomic(p, "".join(kept).encode("utf-8"), tmp=p.with_name(f".{p.name}.tmp"))  # a failure leaves no .tmp
    except OSError as exc:
        raise DataError(
            f"{p}: the log could not be cut back to step {from_step} ({exc.strerror or exc}); it is unchanged"
        ) from None
    fsync_dir(p.parent)
    return dropped

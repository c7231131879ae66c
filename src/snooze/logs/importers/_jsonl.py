"""Reading a dump's JSONL files strictly: every line a JSON object, a line cut short an error (not dropped).

A run log of snooze drops a last line cut short (the run was killed while writing it: its lines before are
whole). A dump is imported once, as a whole, so a cut line means the dump is not whole either: it is an
error that names the file and says what to do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from snooze._kit.files import open_regular
from snooze._kit.json import parse_json
from snooze.core.errors import DataError
from snooze.logs._jsonl import CUT_INSIDE, cut_short

__all__ = ["objects", "where"]


def where(path: Path, line: int) -> str:
    return f"{path}, line {line}"


def objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of every non-blank line of ``path``; a :class:`DataError` for anything else."""
    try:
        with open_regular(path, text=True, encoding="utf-8") as handle:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                try:
                    obj = parse_json(text, where(path, number), DataError)
                except DataError:
                    if not text.endswith("\n"):
                        raise DataError(
                            f"{where(path, number)}: truncated JSONL (the last line is cut short: the run was killed "
                            "while this file was written); remove that file to import the steps before it"
                        ) from None
                    if cut_short(text):
                        raise DataError(f"{where(path, number)}: {CUT_INSIDE}") from None
                    raise
                if not isinstance(obj, dict):
                    raise DataError(f"{where(path, number)}: expected a JSON object per line, got {type(obj).__name__}")
                yield number, obj
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None

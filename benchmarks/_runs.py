"""The options every multi-run benchmark takes (``family.py``, ``staleness.py``): where the runs go, which arms
and seeds, how many runs at once, and whether to only rebuild the table from what is there; and how they end
on bad input: one line on stderr, ``<script>: error: ...``, and exit status 2, never a traceback."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

__all__ = ["run_parser", "guarded"]


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (``<script>: error: ...``, exit 2) instead of usage and error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def run_parser(doc: str, out: str, arms: Sequence[str]) -> argparse.ArgumentParser:
    """A parser with the shared options; the caller adds what the benchmark varies (regimes, staleness)."""
    parser = _Parser(description=doc.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(out), help=f"the runs' folder (default {out})")
    parser.add_argument("--arms", default=",".join(arms), help="comma-separated arms (default: %(default)s)")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0; develop on 10+)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per arm (default 3)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
    parser.add_argument("--cache", type=Path, default=None, help="warm-up cache folder (default: none)")
    parser.add_argument("--table-only", action="store_true", help="only rebuild the table from --out")
    return parser


def guarded(parser: argparse.ArgumentParser, main: Callable[[], int]) -> int:
    """``main()``, with the library's errors (and an OS error on a path given) as one line and exit status 2."""
    from snooze.core.errors import SnoozeError

    try:
        return main()
    except SnoozeError as exc:
        parser.error(str(exc))
    except OSError as exc:
        parser.error(f"{exc.filename + ': ' if exc.filename else ''}{exc.strerror or exc}")

"""``snooze``: one entry point, one module per subcommand, imported only when that subcommand runs.

Each subcommand module defines ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``.
Bad options and inputs end the command with one line on stderr and exit status 2, never a traceback:
argparse's usage errors (paths are checked as they are parsed: :mod:`snooze.cli._paths`; a value that
starts with ``-`` is explained: :mod:`snooze.cli._parser`), the library's errors
(:class:`~snooze.SnoozeError`), and the OS's errors on the paths given. Output piped into a reader that
stops early (``snooze replay ... | head``) ends the command silently, with status 141 as a shell reports
a command its pipe closed on (SIGPIPE).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from snooze.cli._parser import Parser, explain_design_note

__all__ = ["main"]

SUBCOMMANDS: dict[str, str] = {
    "compare": "snooze.cli.compare",
    "baseline": "snooze.cli.baseline",
    "stratify": "snooze.cli.stratify",
    "replay": "snooze.cli.replay",
    "check-verl": "snooze.cli.check_verl",
    "import": "snooze.cli.importer",
}

SIGPIPE_STATUS = 141
"""Exit status when the reader of the output went away (128 + SIGPIPE, what a shell reports for ``yes | head``)."""


def _build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    from snooze import __version__

    parser = Parser(
        prog="snooze",
        description="Spend GRPO generation compute only where there is something to learn.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument("--version", action="version", version=f"snooze {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = argv[0] if argv and not argv[0].startswith("-") else None
    for name, module_name in SUBCOMMANDS.items():
        if wanted is not None and name != wanted:
            sub.add_parser(name, help=f"(see snooze {name} --help)")
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("snooze"):
                continue  # subcommand not built yet
            sub.add_parser(name, help=f"unavailable: {exc.name} is not installed")
            continue
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
        explain_design_note(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            return _main(argv)
        finally:  # flushed here, not at exit (--help's SystemExit too): a reader gone by now is caught below
            sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        return SIGPIPE_STATUS


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush does not fail again (Python's recipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (stdout replaced): nothing left to flush there
        pass


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _build_parser(argv)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 0 if args.command is None else 2
    from snooze.core.errors import SnoozeError

    try:
        return int(args._run(args) or 0)
    except SnoozeError as exc:
        return _fail(args.command, str(exc))
    except BrokenPipeError:  # the reader of stdout went away: main() ends silently
        raise
    except OSError as exc:  # a path the user gave that cannot be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(args.command, f"{where}{exc.strerror or exc}")
    except UnicodeDecodeError as exc:
        return _fail(args.command, f"an input is not UTF-8 text ({exc.reason} at byte {exc.start})")
    except KeyboardInterrupt:
        print(f"snooze {args.command}: interrupted", file=sys.stderr)
        return 130


def _fail(command: str, message: str) -> int:
    """One line on stderr, exit status 2 (a message of several lines, e.g. from torch, is joined)."""
    print(f"snooze {command}: error: {' '.join(message.split())}", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

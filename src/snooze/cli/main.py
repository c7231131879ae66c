"""``snooze``: one entry point, one module per subcommand, imported only when that subcommand runs.

Each subcommand module defines ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``.
Bad options and inputs end the command with one line on stderr and exit status 2, never a traceback:
argparse's usage errors (paths are checked as they are parsed: :mod:`snooze.cli._paths`), the
library's errors (:class:`~snooze.SnoozeError`), and the OS's errors on the paths given.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

__all__ = ["main"]

SUBCOMMANDS: dict[str, str] = {
    "compare": "snooze.cli.compare",
    "baseline": "snooze.cli.baseline",
    "stratify": "snooze.cli.stratify",
    "replay": "snooze.cli.replay",
    "import": "snooze.cli.importer",
}


def _build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="snooze",
        description="Spend GRPO generation compute only where there is something to learn.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
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

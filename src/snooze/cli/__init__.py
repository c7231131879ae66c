"""The ``snooze`` command line (``snooze.cli.main:main``). Only this package prints.

One module per subcommand (``compare``, ``baseline``, ``stratify``, ``replay``), each with ``HELP``,
``add_arguments(parser)`` and ``run(args)``; config-backed options come from the config dataclasses'
fields (:mod:`snooze.cli._options`).
"""

from snooze.cli.main import main

__all__ = ["main"]

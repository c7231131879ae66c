"""One exception tree for the whole library (its public home; defined in :mod:`snooze._kit.errors`).

Every error the library raises on bad input or bad state is a :class:`SnoozeError`, so callers
can catch one type. Subclasses also inherit from the builtin that fits (``ValueError``,
``KeyError``...) so generic handlers keep working. Messages say what is wrong *and* what to do.
"""

from __future__ import annotations

from snooze._kit.errors import *  # noqa: F403  (SnoozeError, ConfigError, DataError, ...: __all__)
from snooze._kit.errors import __all__ as __all__

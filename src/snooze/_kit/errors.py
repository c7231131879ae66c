"""One exception tree for the whole library; its public home is :mod:`snooze.core.errors`.

Every error the library raises on bad input or bad state is a :class:`SnoozeError`, so callers
can catch one type. Subclasses also inherit from the builtin that fits (``ValueError``,
``KeyError``...) so generic handlers keep working. Messages say what is wrong *and* what to do.
"""

from __future__ import annotations

__all__ = [
    "SnoozeError",
    "ConfigError",
    "DataError",
    "RewardError",
    "ReportError",
    "BatchShortError",
    "StateError",
    "StateMismatchError",
    "IntegrationError",
    "PolicyConformanceError",
]


class SnoozeError(Exception):
    """Base class of every error raised by snooze."""


class ConfigError(SnoozeError, ValueError):
    """A configuration field has a value that is not allowed."""


class DataError(SnoozeError, ValueError):
    """A dataset is unusable: missing or duplicate ids, empty, unreadable or oversized records."""


class RewardError(SnoozeError, ValueError):
    """Reported rewards are NaN, infinite, outside the reward range, or of the wrong shape."""


class ReportError(SnoozeError, KeyError):
    """A report names candidates that were never issued, or were already reported."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain.
        return str(self.args[0]) if self.args else ""


class BatchShortError(SnoozeError, RuntimeError):
    """The training batch could not be filled within ``max_gen_rounds`` and ``on_short='raise'``."""

    @classmethod
    def at(
        cls, step: int, have: int, batch_size: int, rounds: int, max_rounds: int, exhausted: bool
    ) -> BatchShortError:
        return cls(
            f"step {step}: only {have} of batch_size={batch_size} groups with signal after {rounds} generation "
            f"round(s) (max_gen_rounds={max_rounds}" + (", data exhausted" if exhausted else "") + "). Raise "
            "max_gen_rounds or gen_batch_size, lower batch_size, or set on_short='partial' or 'pad'. The groups "
            "gathered so far are kept: propose()/report() more, then finish_step() again."
        )


class StateError(SnoozeError, ValueError):
    """A saved state is missing, truncated, corrupt, or of an unknown version."""


class StateMismatchError(StateError):
    """A saved state does not belong to this data or configuration (and no migration was asked)."""


class IntegrationError(SnoozeError, RuntimeError):
    """A training framework handed the adapter something it cannot use."""


class PolicyConformanceError(SnoozeError, AssertionError):
    """A policy broke the plug-in contract (:func:`snooze.check_policy` says which rule, and how)."""


for _error in (globals()[name] for name in __all__):  # shown as the public home names it, in tracebacks too
    _error.__module__ = "snooze.core.errors"
del _error

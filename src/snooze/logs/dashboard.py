"""The five scheduler metrics to watch, and the names the scheduler's metrics are logged under.

A step's ``batch.metrics`` holds about 90 keys (11 more per dataset); :data:`DASHBOARD` are the five that
say whether a run is healthy (docs/sizing.md, "Watching a run": what healthy and unhealthy values look
like). ``metrics="compact"``, an option of the TRL and verl adapters and of the reference trainer's
metrics log, logs just those (and what the framework itself needs); ``"full"``, the default, logs all.

In TRL's and verl's logs every scheduler metric carries the prefix ``snooze/`` (beside the framework's own
keys), except those whose normative name already starts with it (``snooze/skipped``, ``snooze/audit/*``):
:func:`logged_name` is that one rule, used by both adapters.

>>> logged_name("gen/rounds"), logged_name("snooze/skipped")
('snooze/gen/rounds', 'snooze/skipped')
>>> sorted(framework_metrics({"gen/rounds": 2, "groups/signal": 5, "snooze/skipped": 1}, "compact"))
['snooze/gen/rounds', 'snooze/skipped']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from snooze._kit.checks import as_list, shown
from snooze.core.errors import ConfigError

__all__ = ["DASHBOARD", "METRICS_MODES", "PREFIX", "logged_name", "check_metrics_mode", "select", "framework_metrics"]

DASHBOARD: tuple[str, ...] = (
    "gen/rounds",
    "train/groups",
    "efficiency",
    "snooze/skipped",
    "total/audit_signal_rate",
)
"""The five metrics to watch (docs/sizing.md): generation rounds a step took, signal groups in the batch,
groups trained / generated, encounters skipped before rollout, and the signal rate of what skipping gave up
(the audit's estimate)."""

METRICS_MODES: tuple[str, ...] = ("full", "compact")
"""``full``: every scheduler metric (docs/metrics.md); ``compact``: :data:`DASHBOARD` only."""

PREFIX = "snooze/"
"""What a scheduler metric's name starts with in a framework's logs."""


def logged_name(key: str) -> str:
    """The name scheduler metric ``key`` is logged under in TRL's and verl's logs: ``snooze/<key>``, or ``key``
    itself when it starts with ``snooze/`` already (never ``snooze/snooze/...``). A ``key`` that is not a ``str`` is
    a :class:`~snooze.ConfigError`."""
    if not isinstance(key, str):
        raise ConfigError(f"logged_name(key={shown(key)}): a metric's name is a str")
    return key if key.startswith(PREFIX) else PREFIX + key


def check_metrics_mode(mode: Any, option: str) -> str:
    """``mode`` if it is one of :data:`METRICS_MODES`, else a :class:`ConfigError` naming ``option``."""
    if not isinstance(mode, str) or mode not in METRICS_MODES:
        raise ConfigError(f"{option}={mode!r}: must be one of {', '.join(METRICS_MODES)} (docs/sizing.md)")
    return mode


def select(metrics: Mapping[str, Any], mode: str, keep: Iterable[str] = ()) -> dict[str, Any]:
    """The metrics ``mode`` logs: all of them (``full``), or :data:`DASHBOARD` and the keys in ``keep``
    (``compact``; an entry ending in ``/`` keeps every key that starts with it). ``metrics``: a mapping of str
    names; ``keep``: an iterable of str names, never one str (``"train/loss"`` would be its characters): a
    :class:`~snooze.ConfigError` otherwise."""
    _check_metrics(metrics)
    keep = as_list(
        keep,
        "select(keep)",
        "metric names (['train/loss'], not 'train/loss')",
        "a metric name (a str)",
        lambda name: isinstance(name, str),
    )
    if check_metrics_mode(mode, "metrics") == "full":
        return dict(metrics)
    kept = set(DASHBOARD)
    prefixes = tuple(k for k in keep if k.endswith("/"))
    kept.update(k for k in keep if not k.endswith("/"))
    return {k: v for k, v in metrics.items() if k in kept or (prefixes and k.startswith(prefixes))}


def _check_metrics(metrics: Any) -> None:
    """A step's metrics are a mapping of str names (``batch.metrics``), else a :class:`~snooze.ConfigError`."""
    if not isinstance(metrics, Mapping):
        raise ConfigError(f"metrics: got {type(metrics).__name__}; pass a step's metrics (batch.metrics, a dict)")
    for key in metrics:
        if not isinstance(key, str):
            raise ConfigError(f"metrics: the key {shown(key)} is not a metric name (a str)")


def framework_metrics(metrics: Mapping[str, Any], mode: str = "full") -> dict[str, Any]:
    """A step's scheduler metrics as TRL and verl log them: selected by ``mode``, named by :func:`logged_name`."""
    return {logged_name(k): v for k, v in select(metrics, mode).items()}

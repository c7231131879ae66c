"""The one way figures get matplotlib: imported when the first figure is drawn, off-screen (Agg)."""

from __future__ import annotations

from typing import Any

from snooze.core.errors import ConfigError

__all__ = ["pyplot"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (never opens a window; works on headless machines).

    Raises :class:`~snooze.ConfigError` saying how to install it when matplotlib is missing."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise ConfigError("figures need matplotlib: pip install matplotlib (snooze's [plots] extra)") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt

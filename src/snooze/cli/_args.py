"""Argument types shared by the subcommands."""

from __future__ import annotations

import argparse

__all__ = ["reward_range"]


def reward_range(text: str) -> tuple[float, float]:
    """``"LOW,HIGH"`` -> ``(low, high)``, for ``--reward-range``."""
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected LOW,HIGH, e.g. 0,1") from None
    return lo, hi

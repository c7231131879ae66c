"""Curated exports of a sub-package that are imported on first use (heavy dependencies stay unloaded).

    __getattr__, __dir__ = lazy(__name__, {"train": "snooze.trainer.loop", ...})

``import snooze.trainer`` then costs nothing; ``snooze.trainer.train`` imports the loop (and torch)
the first time it is read. ``__all__`` lists the same names, so the docs can point to them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy"]


def lazy(package: str, names: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each name is read from its module on first use."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(names[name]), name)

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__

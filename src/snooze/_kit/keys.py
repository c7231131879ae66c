"""The stable key of a JSON value (a prompt's text or chat messages): what the TRL adapter names a row without an
id, and what ``snooze import trl`` names a logged prompt, so the two agree."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["json_key"]


def json_key(value: Any) -> str:
    """16 hex digits of the sha256 of ``value``'s canonical JSON (sorted keys, no spaces, UTF-8, lone surrogates
    kept): the same on every machine, process and run, and for dicts of the same items in any order. Raises
    ``TypeError`` or ``ValueError`` for a value JSON cannot hold (each caller names it in its own error)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]

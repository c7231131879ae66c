"""Datasets with stable prompt ids, read from Python sequences, JSONL, Parquet or HF ``datasets``."""

from snooze.data.source import MAX_RECORD_BYTES, Source, as_source

__all__ = ["Source", "as_source", "MAX_RECORD_BYTES"]

"""`Source`: one dataset's records, addressed by row, each with a stable id.

A prompt's identity is ``(dataset, id)`` where ``id`` comes from the data (docs/concepts.md, "Prompts, groups, outcomes"), never
from a position that shuffling would change. The scheduler works on row numbers internally and
keeps a fingerprint of the ids so a saved state is never applied to different data.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from snooze.core.errors import DataError

__all__ = ["Source", "as_source", "MAX_RECORD_BYTES"]

MAX_RECORD_BYTES = 16 * 1024 * 1024
"""Largest JSONL line accepted (16 MiB): a corrupt file must not exhaust memory in one line."""


class Source:
    """A dataset: ``len(source)`` records, ``source.ids[row]`` their ids, ``source.record(row)`` one record.

    Build one with :meth:`from_records`, :meth:`from_jsonl`, :meth:`from_parquet`, :meth:`from_hf`
    or :meth:`from_ids`; :func:`as_source` picks the right one for common inputs.
    """

    def __init__(self, name: str, ids: Sequence[Any] | np.ndarray, get_record: Callable[[int], Any]) -> None:
        if not isinstance(name, str) or not name:
            raise DataError(f"dataset name {name!r}: must be a non-empty string")
        self.name = name
        self.ids = _check_ids(name, ids)
        self._get_record = get_record
        self._fingerprint: str | None = None

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def __repr__(self) -> str:
        return f"Source({self.name!r}, {len(self)} records)"

    def record(self, row: int) -> Any:
        """The record at ``row`` (a position in this source, not an id)."""
        return self._get_record(int(row))

    def id_of(self, row: int) -> Any:
        """The stable id at ``row`` as a plain Python ``int`` or ``str``."""
        return self.ids[int(row)].item() if self.ids.dtype.kind == "i" else str(self.ids[int(row)])

    @property
    def fingerprint(self) -> str:
        """sha256 of the ids in row order: changes when records are added, removed or reordered."""
        if self._fingerprint is None:
            h = hashlib.sha256(self.ids.dtype.kind.encode())
            if self.ids.dtype.kind == "i":
                h.update(self.ids.astype("<i8").tobytes())
            else:
                h.update("\x00".join(self.ids.tolist()).encode("utf-8", "surrogatepass"))
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def rows_of(self, ids: Sequence[Any]) -> np.ndarray:
        """Row numbers of the given ids (``-1`` where an id is unknown)."""
        index = {v: i for i, v in enumerate(self.ids.tolist())}
        return np.array([index.get(_plain(i), -1) for i in ids], dtype=np.int64)

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def from_records(cls, name: str, records: Sequence[Mapping[str, Any]], id_field: str = "id") -> Source:
        """Records held in memory (a list of dicts); each must carry ``id_field``."""
        if isinstance(records, (str, bytes)) or not isinstance(records, Sequence):
            raise DataError(f"dataset {name!r}: records must be a sequence of dicts, got {type(records).__name__}")
        ids = []
        for i, rec in enumerate(records):
            if not isinstance(rec, Mapping) or id_field not in rec or rec[id_field] is None:
                raise DataError(
                    f"dataset {name!r}: record {i} has no {id_field!r} field; give every record a stable "
                    f"id (a string or integer), or pass id_field= to name the field that holds it"
                )
            ids.append(rec[id_field])
        return cls(name, ids, records.__getitem__)

    @classmethod
    def from_ids(cls, name: str, ids: Sequence[Any] | np.ndarray) -> Source:
        """Ids only; each record is ``{"id": id}``. For benchmarks and replays of logged runs."""
        src = cls(name, ids, lambda row: None)
        src._get_record = lambda row: {"id": src.id_of(row)}
        return src

    @classmethod
    def from_jsonl(
        cls, name: str, path: str | os.PathLike[str], id_field: str = "id", max_record_bytes: int = MAX_RECORD_BYTES
    ) -> Source:
        """A JSON-lines file, one record object per line (blank lines are skipped)."""
        records = []
        with open(path, "rb") as fh:
            for lineno, raw in enumerate(iter(lambda: fh.readline(max_record_bytes + 1), b""), start=1):
                if len(raw) > max_record_bytes:
                    raise DataError(
                        f"{path}: line {lineno} of dataset {name!r} is over {max_record_bytes} bytes; "
                        "split the record or raise max_record_bytes"
                    )
                if not raw.strip():
                    continue
                try:
                    rec = json.loads(raw)
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    raise DataError(f"{path}: line {lineno} of dataset {name!r} is not valid JSON ({exc})") from None
                if not isinstance(rec, dict):
                    raise DataError(f"{path}: line {lineno} of dataset {name!r} is not a JSON object")
                if rec.get(id_field) is None:
                    raise DataError(f"{path}: line {lineno} of dataset {name!r} has no {id_field!r} field")
                records.append(rec)
        return cls._from_list(name, records, id_field, where=str(path))

    @classmethod
    def from_parquet(cls, name: str, path: str | os.PathLike[str], id_field: str = "id") -> Source:
        """A Parquet file (needs ``pyarrow``, extra ``[parquet]``); records are read row by row on demand."""
        try:
            import pyarrow.parquet as pq
        except ImportError:  # pragma: no cover - depends on the environment
            raise DataError("reading Parquet needs pyarrow: pip install 'snooze-rl[parquet]'") from None
        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises many types; translate at the boundary
            raise DataError(f"{path}: dataset {name!r} could not be read as Parquet ({exc})") from None
        if id_field not in table.column_names:
            raise DataError(f"{path}: dataset {name!r} has no {id_field!r} column (columns: {table.column_names})")
        ids = table.column(id_field).to_pylist()
        missing = [i for i, v in enumerate(ids) if v is None]
        if missing:
            raise DataError(f"{path}: row {missing[0]} of dataset {name!r} has a null {id_field!r}")
        return cls(name, ids, lambda row: table.slice(row, 1).to_pylist()[0])

    @classmethod
    def from_hf(cls, name: str, dataset: Any, id_field: str = "id") -> Source:
        """A Hugging Face ``datasets.Dataset`` already in memory or on local disk (nothing is downloaded)."""
        columns = getattr(dataset, "column_names", None)
        if columns is None or id_field not in columns:
            raise DataError(f"dataset {name!r}: the Hugging Face dataset has no {id_field!r} column (columns: {columns})")
        ids = dataset[id_field]
        missing = [i for i, v in enumerate(ids) if v is None]
        if missing:
            raise DataError(f"dataset {name!r}: row {missing[0]} has a null {id_field!r}")
        return cls(name, ids, dataset.__getitem__)

    @classmethod
    def _from_list(cls, name: str, records: list[dict[str, Any]], id_field: str, where: str) -> Source:
        try:
            return cls(name, [r[id_field] for r in records], records.__getitem__)
        except DataError as exc:
            raise DataError(f"{where}: {exc}") from None


def as_source(name: str, data: Any, id_field: str = "id") -> Source:
    """Turn what a user has into a :class:`Source`: a Source, a list of dicts, a ``.jsonl`` or
    ``.parquet`` path, or a Hugging Face ``Dataset``."""
    if isinstance(data, Source):
        if data.name != name:
            raise DataError(f"dataset registered as {name!r} but its Source is named {data.name!r}; use one name")
        return data
    if isinstance(data, (str, os.PathLike)):
        suffix = Path(data).suffix.lower()
        if suffix in (".jsonl", ".json"):
            return Source.from_jsonl(name, data, id_field)
        if suffix in (".parquet", ".pq"):
            return Source.from_parquet(name, data, id_field)
        raise DataError(f"dataset {name!r}: {data} is neither .jsonl nor .parquet; convert it or build a Source")
    if hasattr(data, "column_names") and hasattr(data, "features"):
        return Source.from_hf(name, data, id_field)
    return Source.from_records(name, data, id_field)


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _check_ids(name: str, ids: Sequence[Any] | np.ndarray) -> np.ndarray:
    if not isinstance(ids, np.ndarray):
        kinds = {type(_plain(v)) for v in ids}
        if not (kinds <= {int} or kinds <= {str}):
            names = sorted(k.__name__ for k in kinds)
            raise DataError(
                f"dataset {name!r}: ids must be all integers or all strings, got {names}; "
                "convert them to one type so identities are stable"
            )
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise DataError(f"dataset {name!r}: ids must be one-dimensional, got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise DataError(f"dataset {name!r} is empty; give it at least one record or leave it out of the mix")
    if arr.dtype.kind in "iu":
        arr = arr.astype(np.int64)
    elif arr.dtype.kind == "U":
        pass
    elif arr.dtype.kind == "O" and all(isinstance(v, str) for v in arr.tolist()):
        arr = arr.astype(str)
    else:
        kinds = sorted({type(v).__name__ for v in arr.tolist()})
        raise DataError(
            f"dataset {name!r}: ids must be all integers or all strings, got {kinds}; "
            "convert them to one type so identities are stable"
        )
    uniq, counts = np.unique(arr, return_counts=True)
    if uniq.shape[0] != arr.shape[0]:
        dup = uniq[counts > 1][0]
        rows = np.flatnonzero(arr == dup)[:3].tolist()
        raise DataError(
            f"dataset {name!r}: id {dup.item()!r} appears {int(counts[counts > 1][0])} times (rows {rows}); "
            "ids must be unique within a dataset"
        )
    return arr

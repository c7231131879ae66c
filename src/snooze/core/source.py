"""`Source`: one dataset's records, addressed by row, each with a stable id.

A prompt's identity is ``(dataset, id)`` where ``id`` comes from the data (docs/concepts.md, "Prompts, groups,
outcomes"), never from a position that shuffling would change. The scheduler works on row numbers internally and
keeps a fingerprint of the ids so a saved state is never applied to different data.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from snooze._kit.checks import INT64_MAX, INT64_MIN, as_int, lone_surrogate
from snooze._kit.files import open_regular
from snooze._kit.json import parse_json
from snooze.core.errors import ConfigError, DataError

__all__ = ["Source", "as_source", "dataset_rows", "read_parquet", "MAX_RECORD_BYTES"]

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
        bad = lone_surrogate(name)
        if bad is not None:
            raise DataError(f"dataset name {name!r} holds a lone surrogate ({bad}), {_NOT_TEXT}")
        self.name = name
        self.ids = _check_ids(name, ids)
        self._get_record = get_record
        self._fingerprint: str | None = None
        self._index: dict[Any, int] | None = None  # id -> row, built at the first rows_of

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def __repr__(self) -> str:
        return f"Source({self.name!r}, {len(self)} records)"

    def record(self, row: int) -> Any:
        """The record at ``row`` (a position in this source, not an id)."""
        return self._get_record(int(row))

    def id_of(self, row: int) -> Any:
        """The stable id at ``row`` as a plain Python ``int`` or ``str``."""
        value = self.ids[int(row)]
        return int(value) if self.ids.dtype.kind == "i" else value

    @property
    def fingerprint(self) -> str:
        """sha256 of the ids in row order: changes when records are added, removed or reordered.

        String ids are joined by NUL, which no id may hold, so two id lists never share one."""
        if self._fingerprint is None:
            ints = self.ids.dtype.kind == "i"
            h = hashlib.sha256(b"i" if ints else b"U")  # "U": string ids were a numpy str array until 0.1.0
            if ints:
                h.update(self.ids.astype("<i8").tobytes())
            else:
                h.update("\x00".join(self.ids.tolist()).encode("utf-8", "surrogatepass"))
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def rows_of(self, ids: Iterable[Any]) -> np.ndarray:
        """Row numbers of the given ids (``-1`` where an id is unknown, or is not a string or an integer:
        ``True`` is not the id ``1``)."""
        if self._index is None:  # built once: the ids never change
            self._index = {v: i for i, v in enumerate(self.ids.tolist())}
        index = self._index
        keys = (_plain(i) for i in ids)
        return np.array([index.get(k, -1) if type(k) in (int, str) else -1 for k in keys], dtype=np.int64)

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def from_records(cls, name: str, records: Sequence[Mapping[str, Any]], id_field: str = "id") -> Source:
        """Records held in memory (a list of dicts); each must carry ``id_field``."""
        _check_id_field(name, id_field)
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
        _check_id_field(name, id_field)
        as_int(max_record_bytes, "max_record_bytes", 1)
        try:
            records = cls._read_jsonl(name, path, id_field, max_record_bytes)
        except OSError as exc:
            raise DataError(
                f"{path}: dataset {name!r} cannot be read ({exc.strerror or exc}); pass the path of a JSONL file"
            ) from None
        return cls._from_list(name, records, id_field, where=str(path))

    @staticmethod
    def _read_jsonl(
        name: str, path: str | os.PathLike[str], id_field: str, max_record_bytes: int
    ) -> list[dict[str, Any]]:
        records = []
        with open_regular(path) as fh:  # (a FIFO is refused, not waited on)
            for lineno, raw in enumerate(iter(lambda: fh.readline(max_record_bytes + 1), b""), start=1):
                if len(raw) > max_record_bytes:
                    raise DataError(
                        f"{path}: line {lineno} of dataset {name!r} is over {max_record_bytes} bytes; "
                        "split the record or raise max_record_bytes"
                    )
                if not raw.strip():
                    continue
                rec = parse_json(raw, f"{path}: line {lineno} of dataset {name!r}", DataError)
                if not isinstance(rec, dict):
                    raise DataError(f"{path}: line {lineno} of dataset {name!r} is not a JSON object")
                if rec.get(id_field) is None:
                    raise DataError(f"{path}: line {lineno} of dataset {name!r} has no {id_field!r} field")
                records.append(rec)
        return records

    @classmethod
    def from_parquet(cls, name: str, path: str | os.PathLike[str], id_field: str = "id") -> Source:
        """A Parquet file (needs ``pyarrow``, extra ``[parquet]``); records are read row by row on demand."""
        _check_id_field(name, id_field)
        try:
            table = read_parquet(path)
        except ConfigError:
            raise
        except Exception as exc:  # pyarrow raises many types; translate at the boundary
            raise DataError(f"{path}: dataset {name!r} could not be read as Parquet ({exc})") from None
        if id_field not in table.column_names:
            raise DataError(f"{path}: dataset {name!r} has no {id_field!r} column (columns: {table.column_names})")
        ids = table.column(id_field).to_pylist()
        missing = [i for i, v in enumerate(ids) if v is None]
        if missing:
            raise DataError(f"{path}: row {missing[0]} of dataset {name!r} has a null {id_field!r}")
        return cls._at(str(path), name, ids, lambda row: table.slice(row, 1).to_pylist()[0])

    @classmethod
    def from_hf(cls, name: str, dataset: Any, id_field: str = "id") -> Source:
        """A Hugging Face ``datasets.Dataset`` already in memory or on local disk (nothing is downloaded)."""
        _check_id_field(name, id_field)
        if not hasattr(dataset, "__len__"):  # datasets.IterableDataset: its rows cannot be read by position
            raise DataError(
                f"dataset {name!r} is a streaming Hugging Face dataset ({type(dataset).__name__}): the scheduler reads "
                "prompts by row and comes back to them in later passes, so it needs them all. Materialise it first: "
                "datasets.Dataset.from_list(list(stream)) for a finite stream, or list(stream.take(n)) for its first "
                "n rows"
            )
        columns = getattr(dataset, "column_names", None)
        if columns is None or id_field not in columns:
            raise DataError(
                f"dataset {name!r}: the Hugging Face dataset has no {id_field!r} column (columns: {columns})"
            )
        ids = dataset[id_field]
        missing = [i for i, v in enumerate(ids) if v is None]
        if missing:
            raise DataError(f"dataset {name!r}: row {missing[0]} has a null {id_field!r}")
        return cls(name, ids, dataset.__getitem__)

    @classmethod
    def _from_list(cls, name: str, records: list[dict[str, Any]], id_field: str, where: str) -> Source:
        return cls._at(where, name, [r[id_field] for r in records], records.__getitem__)

    @classmethod
    def _at(cls, where: str, name: str, ids: Sequence[Any], get_record: Callable[[int], Any]) -> Source:
        """``cls(name, ids, get_record)`` for the data in file ``where``, which an error about the ids names."""
        try:
            return cls(name, ids, get_record)
        except DataError as exc:
            raise DataError(f"{where}: {exc}") from None


def read_parquet(path: str | os.PathLike[str]) -> Any:
    """The ``pyarrow.Table`` in Parquet file ``path``: the one way the library reads Parquet.

    The file is opened with :func:`~snooze._kit.files.open_regular` (a FIFO is refused, not waited on)
    and copied into memory pyarrow allocates, which pyarrow reads. pyarrow's scanner lets go of its
    source on one of its own threads, sometimes after ``read_table`` has returned; when that source was
    a Python object (the open file, or its bytes) letting go needs the GIL, and a thread that asks for
    it while the interpreter exits is ended in a way C++ answers with ``terminate called without an
    active exception`` (exit 134, after the command's work and its error line; apache/arrow#33975).
    Raises :class:`ConfigError` when pyarrow is missing, ``OSError`` when the file cannot be read, and
    pyarrow's own errors for a file that is not Parquet (each caller turns those into its
    :class:`DataError` naming the file)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigError("reading Parquet needs pyarrow: pip install pyarrow (snooze's [parquet] extra)") from None
    sink = pa.BufferOutputStream()  # memory pyarrow owns: no Python object for its threads to let go of
    with open_regular(path) as fh:  # (a FIFO is refused, not waited on)
        shutil.copyfileobj(fh, sink, 1 << 20)
    return pq.read_table(pa.BufferReader(sink.getvalue()))


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


def dataset_rows(sources: Sequence[Source], caller: str, dataset: str, ids: Sequence[Any]) -> tuple[int, np.ndarray]:
    """Index (in ``sources``) of the dataset named ``dataset`` and the row numbers of ``ids`` in it, checked:
    an unknown dataset, an id list that is not a list, or an id the dataset lacks is a :class:`DataError`
    naming ``caller`` (``set_stage``, ``set_excluded``...). Nothing changes."""
    names = [s.name for s in sources]
    if not isinstance(dataset, str) or dataset not in names:
        raise DataError(f"unknown dataset {dataset!r}; datasets are {names}")
    d = names.index(dataset)
    if isinstance(ids, (str, bytes, Mapping)) or not isinstance(ids, (Sequence, np.ndarray)):
        raise DataError(f"{caller}: ids must be a list of ids of dataset {dataset!r}, got {type(ids).__name__}")
    ids = list(ids.tolist() if isinstance(ids, np.ndarray) else ids)
    rows = sources[d].rows_of(ids)
    if (rows < 0).any():
        bad = [i for i, r in zip(ids, rows) if r < 0][:3]
        raise DataError(
            f"{caller}: dataset {dataset!r} has no prompt(s) with id {bad}; ids are the values of its "
            "id field (integers or strings)"
        )
    return d, rows


def _check_id_field(name: Any, id_field: Any) -> None:
    if not isinstance(id_field, str) or not id_field:
        raise DataError(
            f"dataset {name!r}: id_field={id_field!r} must be the name (a non-empty string) of the field that holds "
            "each record's id"
        )


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _check_ids(name: str, ids: Sequence[Any] | np.ndarray) -> np.ndarray:
    """The ids as an ``int64`` array, or an ``object`` array of ``str`` (each id takes its own length,
    not the longest one's, as a numpy str array would). Integers must fit in 64 bits and strings must not
    hold NUL; nothing is converted between the two, and ids are unique."""
    if isinstance(ids, np.ndarray):
        if ids.ndim != 1:
            raise DataError(f"dataset {name!r}: ids must be one-dimensional, got shape {ids.shape}")
        if ids.dtype.kind in "iu":
            arr = _int_ids(name, ids)
            return _unique(name, arr, arr)
        if ids.dtype.kind not in "UO":
            raise DataError(f"dataset {name!r}: ids must be all integers or all strings, got an array of {ids.dtype}")
        values: list[Any] = ids.tolist()  # (a numpy str array has dropped trailing NULs before it reached us)
    elif isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise DataError(f"dataset {name!r}: ids must be a sequence of strings or integers, got {type(ids).__name__}")
    else:
        values = [_plain(v) for v in ids]
    if not values:
        raise DataError(f"dataset {name!r} is empty; give it at least one record or leave it out of the mix")
    kinds = {type(_plain(v)) for v in values}
    if kinds <= {int}:
        big = next((v for v in values if not INT64_MIN <= v <= INT64_MAX), None)
        if big is not None:
            raise DataError(f"dataset {name!r}: id {big} does not fit in a signed 64-bit integer; use string ids")
        arr = np.array(values, dtype=np.int64)
        return _unique(name, arr, arr)
    if kinds <= {str}:
        nul = next((i for i, v in enumerate(values) if "\x00" in v), None)
        if nul is not None:
            raise DataError(f"dataset {name!r}: id {values[nul]!r} (row {nul}) holds a NUL character; ids must not")
        if lone_surrogate("".join(values)) is not None:  # one encode of all ids; the row is sought only if one is bad
            row = next(i for i, v in enumerate(values) if lone_surrogate(v) is not None)
            bad = lone_surrogate(values[row])
            raise DataError(
                f"dataset {name!r}: id {values[row]!r} (row {row}) holds a lone surrogate ({bad}), {_NOT_TEXT}"
            )
        arr = np.empty(len(values), dtype=object)
        arr[:] = [str(v) for v in values]
        return _unique(name, arr, values)
    raise DataError(
        f"dataset {name!r}: ids must be all integers or all strings, got {sorted(k.__name__ for k in kinds)}; "
        "convert them to one type so identities are stable"
    )


_NOT_TEXT = "which is not text (no UTF-8 file or log can hold it); fix the encoding of the data it came from"


def _int_ids(name: str, ids: np.ndarray) -> np.ndarray:
    if ids.shape[0] == 0:
        raise DataError(f"dataset {name!r} is empty; give it at least one record or leave it out of the mix")
    if ids.dtype.kind == "u" and int(ids.max()) > INT64_MAX:
        raise DataError(
            f"dataset {name!r}: id {int(ids.max())} does not fit in a signed 64-bit integer; use string ids"
        )
    return ids.astype(np.int64)


def _unique(name: str, arr: np.ndarray, values: Any) -> np.ndarray:
    """``arr``, if its ids are unique (checked as numbers, or through a set of the strings)."""
    if arr.dtype.kind == "i":
        uniq, counts = np.unique(arr, return_counts=True)
        if uniq.shape[0] == arr.shape[0]:
            return arr
        dup: Any = uniq[counts > 1][0].item()
    else:
        if len(set(values)) == len(values):
            return arr
        seen: set[str] = set()
        dup = next(v for v in values if v in seen or seen.add(v))  # type: ignore[func-returns-value]
    rows = [i for i, v in enumerate(arr.tolist()) if v == dup][:3]
    raise DataError(
        f"dataset {name!r}: id {dup!r} appears {sum(1 for v in arr.tolist() if v == dup)} times (rows {rows}); "
        "ids must be unique within a dataset"
    )

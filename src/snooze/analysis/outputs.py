"""Writing the offline analyses' outputs: a stratification (``prompts.csv``, ``prompts.parquet``,
``curriculum.json`` and plots) and, for ``snooze replay``, its ``replay.json`` and figure.

Every output is all or nothing (:func:`write_files`): the data files are made in memory, written aside
in full, and renamed into place together only once all were written, so a failure (a full disk)
leaves the files already there exactly as they were, and no temporary file. Figures are drawn after
the data files are in place, each aside and renamed in turn (:func:`write_figure`): a figure that
fails leaves the new data files and the old figure, and its error names it.

An id column holds each prompt's id as the input had it, an integer or a string. When the ids of
different datasets differ in type, or a string id is written as a whole number (``"17"``, which a CSV
reader takes for the integer 17), one column cannot say which is which: then both tables hold each id
as text and an ``id_type`` column after ``id`` says ``int`` or ``str`` (:data:`ID_TYPE`), the same in
the CSV and the Parquet file, so every id is read back as it was.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import os
import secrets
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from snooze._kit.checks import as_bool, as_path
from snooze._kit.files import fsync_dir, remove_quietly, write_atomic
from snooze.analysis.completions import reads_as_integer
from snooze.analysis.stratify import STRATA, Stratification
from snooze.core.errors import ConfigError

__all__ = ["write_stratification", "write_files", "write_figure", "prompt_table", "ID_TYPE"]

log = logging.getLogger(__name__)

ID_TYPE = "id_type"
"""The column that gives each id's type (``int`` or ``str``) where the ``id`` column cannot."""


def _aside(path: Path) -> Path:
    """A temporary name beside ``path``, with its suffix (matplotlib picks a figure's format by it)."""
    return path.with_name(f".tmp-{secrets.token_hex(4)}-{path.name}")


def _failed(exc: OSError, path: Path, what: str) -> OSError:
    return OSError(exc.errno, f"{exc.strerror or exc}; {what}", str(path))


def write_files(files: Mapping[Path, bytes], stale: Iterable[Path] = ()) -> list[Path]:
    """Replace each file of ``files`` (path -> its bytes), all or none. Each is written aside and fsynced
    (:func:`~snooze._kit.files.write_atomic`); only when all were written are they renamed into place.
    A write that fails removes what was written aside (and the folders it made for them) and raises an
    ``OSError`` naming the file; the files already there are left exactly as they were.

    ``stale``: the outputs of the same command that this run does not write (a figure under ``--no-plot``,
    ``prompts.parquet`` without pyarrow). An earlier run's file of such a name would sit beside the new
    numbers as if it were theirs: once the new files are in place, each is removed, with a warning, so the
    folder holds one run's files. Returns those removed."""
    staged: list[tuple[Path, Path]] = []
    made: list[Path] = []  # the folders made here, deepest first
    path = Path()
    try:
        for path, data in files.items():
            made += _make_folder(path.parent)
            tmp = _aside(path)
            staged.append((tmp, path))
            write_atomic(tmp, data)
    except BaseException as exc:
        for tmp, _ in staged:
            remove_quietly(tmp)
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(exc, OSError):
            raise _failed(exc, path, "nothing was written: the files there are as they were") from None
        raise
    try:
        for tmp, path in staged:
            os.replace(tmp, path)
    finally:
        for tmp, _ in staged:
            remove_quietly(tmp)  # (only left when a rename failed)
    removed = [p for p in stale if p not in files and p.is_file()]
    for p in removed:
        remove_quietly(p)
        log.warning("%s: an earlier run's output, not written by this run: removed (the folder holds one run's)", p)
    for folder in dict.fromkeys(path.parent for path in [*files, *removed]):
        fsync_dir(folder)
    return removed


def _make_folder(folder: Path) -> list[Path]:
    """Make ``folder`` and its missing parents; returns those made, deepest first."""
    missing = [p for p in (folder, *folder.parents) if not (p.exists() or p.is_symlink())]
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def write_figure(path: Path, draw: Callable[[Path], None]) -> None:
    """``draw(file)`` to a temporary file beside ``path``, then renamed into place; a figure that fails is
    an ``OSError`` naming ``path``, which is left as it was (and no temporary file)."""
    tmp = _aside(path)
    try:
        draw(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        raise _failed(exc, path, "the figure is as it was (the data files were written)") from None
    finally:
        remove_quietly(tmp)


def prompt_table(result: Stratification) -> dict[str, list[Any]]:
    """The rows of ``prompts.csv`` and ``prompts.parquet``, column by column (one table for both files):
    the stratification's columns, the ids as text with an ``id_type`` column where ``id`` alone cannot
    tell an id's type (see the module docstring)."""
    table = {name: col.tolist() for name, col in result.columns.items()}
    ids = table["id"]
    kinds = {type(v) for v in ids}
    if len(kinds) > 1 or any(isinstance(v, str) and reads_as_integer(v) for v in ids):
        at = list(table).index("id") + 1
        typed = {"id": [str(v) for v in ids], ID_TYPE: ["int" if isinstance(v, int) else "str" for v in ids]}
        items = list(table.items())
        table = dict(items[: at - 1] + list(typed.items()) + items[at:])
    return table


def _csv_bytes(table: Mapping[str, list[Any]]) -> bytes:
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(list(table))
    for row in zip(*table.values(), strict=True):  # NaN (a model without a row for the prompt): an empty cell
        writer.writerow(["" if isinstance(v, float) and np.isnan(v) else v for v in row])
    return text.getvalue().encode("utf-8")


def _parquet_bytes(table: Mapping[str, list[Any]]) -> bytes | None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ModuleNotFoundError:
        return None
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({name: pa.array(values) for name, values in table.items()}), sink)
    return sink.getvalue().to_pybytes()


def write_stratification(result: Stratification, out_dir: str | os.PathLike[str], plots: bool = True) -> list[Path]:
    """Write every output of :func:`~snooze.analysis.stratify` into ``out_dir``; returns the paths written.

    ``prompts.parquet`` is skipped when pyarrow is missing (``prompts.csv`` has the same table); an earlier
    run's ``prompts.parquet``, and its plots when ``plots`` is False, are then removed (:func:`write_files`'s
    ``stale``), so the folder never holds one run's table beside another's. The data
    files are replaced all together or not at all (:func:`write_files`), then the plots one by one.
    ``result`` not a :class:`Stratification`, ``out_dir`` not a folder path (``''``, ``None``, an existing
    file, or under one) or ``plots`` not a bool is a :class:`~snooze.ConfigError`, before anything is written.
    """
    if not isinstance(result, Stratification):
        raise ConfigError(
            f"write_stratification(result={result!r:.80}): must be the Stratification stratify() returns, "
            f"got {type(result).__name__}"
        )
    out = as_path(out_dir, "write_stratification(out_dir)")
    for folder in (out, *out.parents):
        if folder.exists() or folder.is_symlink():
            if not folder.is_dir():
                raise ConfigError(
                    f"write_stratification(out_dir={os.fspath(out_dir)!r}): {str(folder)!r} is not a folder; "
                    "pass a folder to write the stratification into (it is made if missing)"
                )
            break
    plots = as_bool(plots, "write_stratification(plots)")
    table = prompt_table(result)
    files = {
        out / "prompts.csv": _csv_bytes(table),
        out / "curriculum.json": (json.dumps(result.curriculum, indent=1) + "\n").encode("utf-8"),
    }
    parquet = _parquet_bytes(table)
    if parquet is not None:
        files[out / "prompts.parquet"] = parquet
    figures = [out / "pass_rates.png", out / "strata.png"]
    write_files(files, stale=[out / "prompts.parquet", *([] if plots else figures)])
    written = list(files)
    if plots:
        from snooze.plots import plot_pass_rates, plot_strata

        datasets = result.columns["dataset"]
        rates = {
            d: {m: result.columns[f"pass_rate/{m}"][datasets == d] for m in result.models}
            for d in sorted(set(datasets.tolist()))
        }
        write_figure(out / "pass_rates.png", lambda p: plot_pass_rates(rates, p))
        write_figure(out / "strata.png", lambda p: plot_strata(result.mix(), STRATA, p))
        written += [out / "pass_rates.png", out / "strata.png"]
    return written

"""Property test of every file the library reads (issue 27): hostile files for each reader.

Hypothesis writes files the way a damaged disk, a careless tool or an attacker would: JSON with
integers of hundreds or thousands of digits, numbers no float holds (``10**400``, ``1e999``),
``NaN``/``Infinity``, nesting from 50 to 100,000 deep, lone surrogate escapes, NUL, bytes that are not
UTF-8, lines cut short, wrong types in every field; and, in place of a file, a FIFO, a folder, a
device or nothing. For each reader three invariants hold on every example:

- the only exception that comes out is the project's own (:class:`snooze.SnoozeError`);
- nothing on disk changes (every file's bytes compared; a cut-back that succeeds changes its log, by
  design, so only a refused one is compared);
- no call hangs (``pytest-timeout``; a FIFO read would block forever).

The readers: the scheduler's state (``LATEST`` and the state file, raw or re-signed so the checksum
passes and the JSON inside is what is hostile), the reward log (read and cut back), the metrics log,
a curriculum file, ``snooze stratify``'s input and a JSONL dataset. What a re-signed state's metadata
holds beyond its JSON (a counter beyond its type, weights whose sum overflows) is the state checker's
part and tested with it (tests/core/test_bad_input.py, test_fuzz_api.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import snooze
from snooze.analysis.stratify import stratify
from snooze.curriculum import Curriculum
from snooze.logs import read_metrics, read_reward_log, truncate_log
from snooze.trainer.checkpoint import committed

HOSTILE = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
pytestmark = pytest.mark.timeout(300)  # the whole test, all examples: a hang fails it

# -- JSON text, fragment by fragment ------------------------------------------------------------------------
_NUMBERS = st.one_of(
    st.integers(-5, 5).map(str),
    st.sampled_from(
        [
            "1" * 19,
            "9" * 400,
            "-" + "9" * 400,
            "1" * 4300,
            "1" * 5000,
            "1e999",
            "-1e999",
            "1e-400",
            "0.5",
            "NaN",
            "Infinity",
            "-Infinity",
            "1" + "0" * 308 + ".0",
            "-0",
        ]
    ),
)
_STRINGS = st.one_of(
    st.sampled_from(
        [
            '"a"',
            '"b"',
            '"q1"',
            '""',
            '"\\ud800"',
            '"x\\udfff"',
            '"\\udbff\\udc00"',
            '"a\\u0000b"',
            '"a/b"',
            '"' + "z" * 5000 + '"',
        ]
    ),
    st.text(max_size=8).map(json.dumps),
)
_LEAVES = st.one_of(_NUMBERS, _STRINGS, st.sampled_from(["true", "false", "null"]))


def _nest(leaf: str, depth: int) -> str:
    return "[" * depth + leaf + "]" * depth


_DEEP = st.builds(_nest, _LEAVES, st.sampled_from([50, 63, 64, 65, 70, 999, 1000, 5000, 100_000]))
VALUES = st.recursive(
    st.one_of(_LEAVES, _DEEP),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.dictionaries(_STRINGS, inner, max_size=3).map(
            lambda d: "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"
        ),
    ),
    max_leaves=6,
)


def _object(fields: dict[str, st.SearchStrategy[str]]) -> st.SearchStrategy[str]:
    """A JSON object of these fields, each either its sane value or a hostile one (or left out)."""

    def pick(name: str, sane: st.SearchStrategy[str]) -> st.SearchStrategy[str | None]:
        return st.one_of(sane, sane, VALUES, st.none())

    parts = st.fixed_dictionaries({name: pick(name, sane) for name, sane in fields.items()})
    return parts.map(lambda d: "{" + ", ".join(f'"{k}": {v}' for k, v in d.items() if v is not None) + "}")


def _lines(line: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    """1-4 lines; some raw bytes (not UTF-8, NUL), a blank line, a last line cut short."""
    raw = st.sampled_from([b"\xff\xfe", b"\xed\xa0\x80", b"\x00", b"{", b"", b"   ", b"[" * 3000])
    one = st.one_of(line.map(lambda s: s.encode("utf-8")), line.map(lambda s: s.encode("utf-8")), raw)
    return st.tuples(st.lists(one, min_size=1, max_size=4), st.booleans(), st.integers(0, 200)).map(
        lambda t: b"\n".join(t[0]) + (b"\n" if t[1] else b"")[: t[2]]
    )


_SANE_STEP = st.integers(0, 3).map(str)
REWARD_LINE = _object(
    {
        "step": _SANE_STEP,
        "dataset": st.just('"d"'),
        "id": st.sampled_from(['"q1"', "7"]),
        "rewards": st.sampled_from(["[0, 1]", "[1.0, 0.0]", "[0.5, 0.5]"]),
    }
)
METRICS_LINE = _object({"step": _SANE_STEP, "efficiency": st.just("0.5"), "total/gen_groups": st.just("4")})
COMPLETION_LINE = _object(
    {
        "dataset": st.just('"d"'),
        "id": st.sampled_from(['"q1"', "7"]),
        "model": st.just('"m"'),
        "n": st.just("4"),
        "n_correct": st.just("2"),
    }
)
DATASET_LINE = _object({"id": st.sampled_from(['"q1"', '"q2"', "7"]), "prompt": st.just('"2+2"')})
_ADVANCE = st.one_of(
    _object({"step": st.just("3")}),
    _object(
        {"metric": st.just('"efficiency"'), "op": st.just('"<"'), "value": st.just("0.2"), "for_steps": st.just("2")}
    ),
)
_STAGE = _object(
    {
        "name": st.just('"s"'),
        "weights": st.just('{"d": 1.0}'),
        "exclude": st.just('{"d": ["q1"]}'),
        "advance": st.lists(_ADVANCE, max_size=2).map(lambda xs: "[" + ", ".join(xs) + "]"),
    }
)
CURRICULUM = _object(
    {
        "version": st.just("1"),
        "drop": st.just("{}"),
        "stages": st.lists(_STAGE, min_size=1, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
    }
)


# -- the invariants -----------------------------------------------------------------------------------------
def _tree(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a regular file by its sha256, anything else by its kind (a FIFO is never opened)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            out[str(path)] = "link:" + os.readlink(path)
        elif path.is_file():
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[str(path)] = "dir" if path.is_dir() else "special"
    return out


def _only_ours(root: Path, call: Callable[[], Any], may_write: bool = False) -> None:
    before = _tree(root)
    try:
        call()
    except snooze.SnoozeError:
        assert _tree(root) == before, "a refused call changed what is on disk"
        return
    if not may_write:
        assert _tree(root) == before, "a read changed what is on disk"


@contextmanager
def _folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


PLACES = ["fifo", "folder", "device", "missing", "empty"]


def _place(path: Path, kind: str) -> None:
    """Put something that is not a readable file at ``path``."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "empty":
        path.write_bytes(b"")


# -- the readers --------------------------------------------------------------------------------------------
DATA = {"d": [{"id": "q1"}, {"id": "q2"}]}


def _saved(root: Path) -> Path:
    s = snooze.Scheduler(DATA, snooze.SchedulerConfig(batch_size=1, group_size=2), seed=0)
    s.save(root / "ck")
    return root / "ck"


def _load(ck: Path) -> Callable[[], Any]:
    return lambda: snooze.Scheduler.load(ck, DATA)


@HOSTILE
@given(
    latest=st.one_of(
        _object(
            {
                "format": st.just('"snooze.checkpoint"'),
                "version": st.just("1"),
                "file": st.just('"state-00000000-0000abcd.npz"'),
                "bytes": st.just("10"),
                "sha256": st.just('"00"'),
            }
        ).map(str.encode),
        st.binary(max_size=64),
    )
)
def test_a_hostile_latest_gives_only_our_errors_and_changes_nothing(latest: bytes) -> None:
    with _folder() as root:
        ck = _saved(root)
        (ck / "LATEST").write_bytes(latest)
        _only_ours(root, _load(ck))


def _resign(ck: Path, data: bytes) -> None:
    record = json.loads((ck / "LATEST").read_text())
    (ck / record["file"]).write_bytes(data)
    record.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    (ck / "LATEST").write_text(json.dumps(record))


def _npz(meta: bytes) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, __meta__=np.frombuffer(meta, dtype=np.uint8))
    return buf.getvalue()


_META = st.one_of(
    VALUES.filter(lambda v: not v.startswith("{")).map(str.encode),  # JSON, but not an object
    st.sampled_from([b'{"step": ' + b"1" * 5000 + b"}", b"[" * 100_000, b"\xff", b'{"a": NaN', b""]),
)


@HOSTILE
@given(content=st.one_of(st.binary(max_size=200), _META.map(_npz)), resign=st.booleans())
def test_a_hostile_state_file_gives_only_our_errors_and_changes_nothing(content: bytes, resign: bool) -> None:
    with _folder() as root:
        ck = _saved(root)
        if resign:  # the checksum passes: what is inside must be refused by the parser
            _resign(ck, content)
        else:
            (ck / json.loads((ck / "LATEST").read_text())["file"]).write_bytes(content)
        _only_ours(root, _load(ck))


@HOSTILE
@given(text=_lines(REWARD_LINE), step=st.integers(0, 4))
def test_a_hostile_reward_log_gives_only_our_errors_and_changes_nothing(text: bytes, step: int) -> None:
    with _folder() as root:
        (root / "rewards.jsonl").write_bytes(text)
        _only_ours(root, lambda: read_reward_log(root / "rewards.jsonl"))
        _only_ours(root, lambda: truncate_log(root / "rewards.jsonl", step), may_write=True)


@HOSTILE
@given(text=_lines(METRICS_LINE))
def test_a_hostile_metrics_log_gives_only_our_errors_and_changes_nothing(text: bytes) -> None:
    with _folder() as root:
        (root / "metrics.jsonl").write_bytes(text)
        _only_ours(root, lambda: read_metrics(root))
        _only_ours(root, lambda: truncate_log(root / "metrics.jsonl", 2), may_write=True)


@HOSTILE
@given(text=st.one_of(CURRICULUM.map(str.encode), _lines(VALUES)))
def test_a_hostile_curriculum_file_gives_only_our_errors_and_changes_nothing(text: bytes) -> None:
    with _folder() as root:
        (root / "curriculum.json").write_bytes(text)
        _only_ours(root, lambda: Curriculum.from_file(root / "curriculum.json"))


@HOSTILE
@given(text=_lines(COMPLETION_LINE))
def test_a_hostile_stratify_input_gives_only_our_errors_and_changes_nothing(text: bytes) -> None:
    with _folder() as root:
        (root / "baseline.jsonl").write_bytes(text)
        _only_ours(root, lambda: stratify([root / "baseline.jsonl"]))


@HOSTILE
@given(text=_lines(DATASET_LINE))
def test_a_hostile_dataset_file_gives_only_our_errors_and_changes_nothing(text: bytes) -> None:
    with _folder() as root:
        (root / "data.jsonl").write_bytes(text)
        _only_ours(
            root,
            lambda: snooze.Scheduler({"d": root / "data.jsonl"}, snooze.SchedulerConfig(batch_size=1, group_size=2)),
        )


READERS: dict[str, Callable[[Path], Callable[[], Any]]] = {
    "LATEST": lambda p: _load(p.parent),
    "reward log": lambda p: lambda: read_reward_log(p),
    "reward log cut-back": lambda p: lambda: truncate_log(p, 0),
    "metrics log": lambda p: lambda: read_metrics(p),
    "curriculum": lambda p: lambda: Curriculum.from_file(p),
    "stratify input": lambda p: lambda: stratify([p]),
    "dataset": lambda p: lambda: snooze.Source.from_jsonl("d", p),
    "trainer LATEST": lambda p: lambda: committed(p.parent),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", PLACES)
@pytest.mark.parametrize("reader", READERS)
def test_no_reader_blocks_on_or_reads_what_is_not_a_file(tmp_path: Path, reader: str, kind: str) -> None:
    """A FIFO, a folder, a device (endless), nothing, or an empty file where the reader expects a file."""
    if reader == "LATEST":
        path = _saved(tmp_path) / "LATEST"
        path.unlink()
    else:
        path = tmp_path / "f" / ("LATEST" if reader == "trainer LATEST" else "f.jsonl")
        path.parent.mkdir()
    _place(path, kind)
    _only_ours(tmp_path, READERS[reader](path))

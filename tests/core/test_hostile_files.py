"""Issue 27's root causes in the core's files and checks: special files in a checkpoint (a FIFO would
block a load forever), a save that fails on a full disk (its partial file must not stay), hostile JSON
(an integer of 5,000 digits, nesting 100,000 deep), integers too large for a float in real-valued
fields, and lone surrogates in names and ids. Each is the project's error naming the file or field,
and leaves what is on disk as it was."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
from helpers_core import records, rewards_for
from helpers_disk import failing_fsync

import snooze
from snooze._kit.checks import as_int, as_real
from snooze.curriculum import Curriculum

BIG_INT = "1" * 5000  # over Python's 4,300-digit limit on int(str)
DEEP = "[" * 100_000 + "]" * 100_000  # past the C parser's recursion limit
HUGE = 10**400  # an integer no float holds
MAX_DEPTH = 64  # snooze._kit.json.MAX_DEPTH (imported where it is tested, so that the other tests run on any version)


def _sched(**cfg) -> snooze.Scheduler:
    config = snooze.SchedulerConfig(**{"batch_size": 2, "group_size": 4, **cfg})
    return snooze.Scheduler({"a": records(["signal", "easy", "signal", "hard"])}, config, seed=0)


def _tree(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a regular file by its sha256, anything else by its kind."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = (
            hashlib.sha256(path.read_bytes()).hexdigest()
            if path.is_file() and not path.is_symlink()
            else ("dir" if path.is_dir() else "special")
        )
    return out


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    s = _sched()
    s.step(rewards_for)
    s.save(tmp_path / "ck")
    return tmp_path / "ck"


# -- item 6: a FIFO or a device in a checkpoint ------------------------------------------------------------
@pytest.mark.timeout(20)
@pytest.mark.parametrize("which", ["LATEST", "state file"])
def test_a_fifo_in_a_checkpoint_is_a_state_error_not_a_hang(saved: Path, which: str) -> None:
    record = json.loads((saved / "LATEST").read_text())
    target = saved / ("LATEST" if which == "LATEST" else record["file"])
    if which == "state file":  # a crafted record that matches an empty file: the size check alone would pass
        record.update(bytes=0, sha256=hashlib.sha256(b"").hexdigest())
        (saved / "LATEST").write_text(json.dumps(record))
    target.unlink()
    os.mkfifo(target)
    before = _tree(saved)
    with pytest.raises(snooze.StateError, match=r"named pipe \(FIFO\), not a regular file"):
        snooze.Scheduler.load(saved, {"a": records(["signal", "easy", "signal", "hard"])})
    assert _tree(saved) == before


@pytest.mark.timeout(20)
def test_a_device_in_place_of_latest_is_refused_not_read(saved: Path) -> None:
    (saved / "LATEST").unlink()
    (saved / "LATEST").symlink_to("/dev/zero")  # endless: read whole, it would never end
    with pytest.raises(snooze.StateError, match="LATEST: not a readable commit record .*a character device"):
        snooze.load_state(saved)


# -- item 7: a save that fails leaves nothing behind --------------------------------------------------------
@pytest.mark.parametrize("nth", [1, 2, 3], ids=["state file", "folder", "LATEST"])
def test_a_save_that_fails_on_a_full_disk_leaves_no_file_and_the_last_commit(
    saved: Path, monkeypatch: pytest.MonkeyPatch, nth: int
) -> None:
    s = snooze.Scheduler.load(saved, {"a": records(["signal", "easy", "signal", "hard"])})
    s.step(rewards_for)
    before = _tree(saved)
    with monkeypatch.context() as mp:
        failing_fsync(mp, nth)  # 1: the state file's, 2: the folder's after it, 3: LATEST's
        with pytest.raises(snooze.StateError, match="No space left on device.*the last committed one is unchanged"):
            s.save(saved)
    assert _tree(saved) == before  # no .tmp-* file, no uncommitted state file
    s.save(saved)  # and the next save works
    assert not list(saved.glob(".tmp-*")) and len(list(saved.glob("state-*.npz"))) == 2


# -- item 9: hostile JSON -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "why"),
    [
        (f'{{"format": "snooze.checkpoint", "version": {BIG_INT}}}', "an integer of more than 4300 digits"),
        (DEEP[:60_000], f"nested deeper than {MAX_DEPTH} levels"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nested deeper than {MAX_DEPTH} levels"),
    ],
)
def test_hostile_json_in_latest_is_a_state_error(saved: Path, text: str, why: str) -> None:
    (saved / "LATEST").write_text(text)
    before = _tree(saved)
    with pytest.raises(snooze.StateError, match=f"LATEST: not a readable commit record: .*{why}"):
        snooze.load_state(saved)
    assert _tree(saved) == before


@pytest.mark.parametrize("meta", [b'{"step": %s}' % BIG_INT.encode(), DEEP.encode()], ids=["digits", "depth"])
def test_hostile_json_in_a_checksummed_state_file_is_a_state_error(saved: Path, meta: bytes) -> None:
    """The metadata inside a state file whose checksum is right (written by someone who re-signed it)."""
    import io

    buf = io.BytesIO()
    np.savez(buf, __meta__=np.frombuffer(meta, dtype=np.uint8))
    data = buf.getvalue()
    record = json.loads((saved / "LATEST").read_text())
    (saved / record["file"]).write_bytes(data)
    record.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    (saved / "LATEST").write_text(json.dumps(record))
    with pytest.raises(snooze.StateError, match="the state's metadata: .*(4300 digits|nested deeper)"):
        snooze.load_state(saved)


def test_the_guarded_reader_names_the_source_and_accepts_what_json_does() -> None:
    from snooze._kit import json as _json
    from snooze._kit.json import parse_json

    assert _json.MAX_DEPTH == MAX_DEPTH
    assert parse_json(b'{"a": [1, 2.5, "x", null]}', "f", snooze.DataError) == {"a": [1, 2.5, "x", None]}
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "f", snooze.DataError) is not None  # the limit itself is fine
    for text, why in [
        (BIG_INT, "4300 digits"),
        (DEEP, "nested deeper"),
        ("{", "not valid JSON"),
        (b"\xff", "not UTF-8"),
        ('{"a":\n 1,}', r"line 2, column 4"),
    ]:
        with pytest.raises(snooze.DataError, match=f"^where: .*{why}"):
            parse_json(text, "where", snooze.DataError)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (f'{{"id": {BIG_INT}}}', "4300 digits"),
        (f'{{"id": 1, "x": {DEEP}}}', "nested deeper"),
    ],
)
def test_hostile_json_in_a_dataset_is_a_data_error_naming_the_line(tmp_path: Path, body: str, why: str) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": 0}\n' + body + "\n")
    with pytest.raises(snooze.DataError, match=f"d.jsonl: line 2 of dataset 'a': .*{why}"):
        snooze.Source.from_jsonl("a", path)


@pytest.mark.timeout(20)
def test_a_fifo_as_a_dataset_is_a_data_error_not_a_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "d.jsonl")
    with pytest.raises(snooze.DataError, match="named pipe"):
        snooze.Source.from_jsonl("a", tmp_path / "d.jsonl")


CURRICULA = [
    (f'{{"stages": [{{"weights": {{"a": {BIG_INT}}}}}]}}', "4300 digits"),
    (DEEP, "nested deeper"),
    (
        '{"stages": [{"weights": {"a": 1%s}}]}' % ("0" * 400),
        r"stages\[0\].weights\['a'\]=<an integer of 1329 bits>: must be a finite number",
    ),
    (
        '{"stages": [{"advance": [{"metric": "efficiency", "value": 1%s}]}, {}]}' % ("0" * 400),
        r"stages\[0\].advance\[0\].value: <an integer of 1329 bits> is not a finite number",
    ),
    ('{"stages": [{"advance": [{"step": 1%s}]}, {}]}' % ("0" * 30), r"needs one integer N in \[1, 2\*\*63 - 1\]"),
    ('{"stages": [{"weights": {"a": 1e308, "b": 1e308}}]}', "their sum must be finite"),
]


@pytest.mark.parametrize(
    ("text", "why"), CURRICULA, ids=["digits", "depth", "huge weight", "huge value", "huge step", "sum"]
)
def test_a_hostile_curriculum_file_is_a_config_error_naming_the_file(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "cur.json"
    path.write_text(text)
    with pytest.raises(snooze.ConfigError, match=f"cur.json: .*{why}"):
        Curriculum.from_file(path)


@pytest.mark.timeout(20)
def test_a_fifo_as_a_curriculum_file_is_a_config_error_not_a_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "cur.json")
    with pytest.raises(snooze.ConfigError, match="named pipe"):
        Curriculum.from_file(tmp_path / "cur.json")


# -- item 10: integers too large for a float ----------------------------------------------------------------
@pytest.mark.parametrize(
    "field, owner",  # owner: None for a field of the config, else the policy (or skip rule) whose option it is
    [
        ("easy_threshold", None),
        ("hard_threshold", None),
        ("signal_tol", None),
        ("backoff", "snooze"),
        ("weight", "history"),
        ("margin", "predictive"),
        ("recheck", "predictive"),
        ("backoff", "predictive"),
    ],
)
def test_an_integer_too_large_for_a_float_in_a_real_field_is_a_config_error(field: str, owner: str | None) -> None:
    if owner is None:
        kw: dict = {field: HUGE}
    elif owner == "history":
        kw = {"policy": "snooze", "options": {"skip": "history", "rule": {field: HUGE}}}
    else:
        kw = {"policy": owner, "options": {field: HUGE}}
    with pytest.raises(snooze.ConfigError, match=f"^{field}=<an integer of 1329 bits>: must be"):
        snooze.SchedulerConfig(**kw)


@pytest.mark.parametrize("kw", [{"weights": {"a": HUGE}}, {"reward_range": (0, HUGE)}, {"reward_range": (-HUGE, 1)}])
def test_an_integer_too_large_for_a_float_in_weights_or_range_is_a_config_error(kw: dict) -> None:
    with pytest.raises(snooze.ConfigError, match="<an integer of 1329 bits>"):
        snooze.SchedulerConfig(**kw)
    s = _sched()
    if "weights" in kw:
        with pytest.raises(snooze.ConfigError, match="<an integer of 1329 bits>"):
            s.set_weights(kw["weights"])


def test_the_one_numeric_check() -> None:
    from snooze._kit.checks import finite_float

    assert [finite_float(v) for v in (1, 2.5, np.float32(0.5), np.int64(3), 10**300)] == [1.0, 2.5, 0.5, 3.0, 1e300]
    assert [finite_float(v) for v in (HUGE, -HUGE, float("nan"), float("inf"), True, "1", None, 1j)] == [None] * 8
    assert as_real(10**300, "x") == 1e300 and as_int(2**70, "n") == 2**70
    with pytest.raises(snooze.ConfigError, match=r"^n=<an integer of 5001 bits>: must be an integer in \[1, 9\]"):
        as_int(2**5000, "n", 1, 9)  # (repr of a number this long would raise ValueError itself)
    with pytest.raises(snooze.ConfigError, match=r"^n=10: must be an integer <= 9"):
        as_int(10, "n", maximum=9)


# -- item 12: lone surrogates -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({"a\ud800": [{"id": 1}]}, r"dataset name 'a\\ud800' holds a lone surrogate \(U\+D800\)"),
        (
            {"a": [{"id": "x"}, {"id": "y\udc00"}]},
            r"dataset 'a': id 'y\\udc00' \(row 1\) holds a lone surrogate \(U\+DC00\)",
        ),
    ],
)
def test_a_lone_surrogate_in_a_dataset_name_or_id_is_a_data_error_naming_it(data: dict, why: str) -> None:
    with pytest.raises(snooze.DataError, match=why):
        snooze.Scheduler(data, snooze.SchedulerConfig(batch_size=1, group_size=2), seed=0)


def test_a_lone_surrogate_from_a_jsonl_escape_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"id": "ok"}\n{"id": "bad\\ud800"}\n')  # valid JSON, decodes to a surrogate
    with pytest.raises(snooze.DataError, match=r"d.jsonl: dataset 'a': id 'bad\\ud800' \(row 1\)"):
        snooze.Source.from_jsonl("a", tmp_path / "d.jsonl")

"""Issue 6.5: no pickle on any load path, bounded reads of datasets, state paths confined to the
checkpoint directory, nothing from a dataset is ever executed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import _driver as D
import pytest

import snooze
from snooze.core.source import MAX_RECORD_BYTES, Source

SRC = Path(snooze.__file__).resolve().parent

# (pattern, why it is banned). Each is checked over every line of every .py file under src/snooze.
BANNED = [
    (
        r"\bimport\s+(c?pickle|dill|shelve|marshal|joblib)\b|\bfrom\s+(c?pickle|dill|shelve|marshal|joblib)\b",
        "pickle-like module",
    ),
    (r"allow_pickle\s*=\s*True", "numpy load with pickle"),
    (r"\byaml\.load\(|\byaml\.unsafe_load\(", "yaml.load can build arbitrary objects; use yaml.safe_load"),
    (r"(?<![\w.])(eval|exec)\(", "executes text"),
    (r"trust_remote_code\s*=\s*True", "runs code shipped with a dataset or model"),
    (r"\bpd\.read_pickle\(|\.read_pickle\(", "pickle"),
]


def _source_lines() -> list[tuple[Path, int, str]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.lstrip().startswith("#"):
                out.append((path, i, line))
    return out


def test_the_scan_sees_the_code() -> None:
    files = {p.name for p, _, _ in _source_lines()}
    assert {"checkpoint.py", "_state.py", "source.py", "scheduler.py"} <= files


@pytest.mark.parametrize(("pattern", "why"), BANNED)
def test_no_unsafe_deserialisation_in_src(pattern: str, why: str) -> None:
    hits = [f"{p.relative_to(SRC)}:{i}: {line.strip()}" for p, i, line in _source_lines() if re.search(pattern, line)]
    assert not hits, f"{why}:\n" + "\n".join(hits)


def test_torch_load_always_weights_only() -> None:
    """``torch.load`` unpickles unless ``weights_only=True``; the call may span lines."""
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"torch\.load\(", text):
            depth, j = 1, m.end()
            while depth and j < len(text):
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                j += 1
            if not re.search(r"weights_only\s*=\s*True", text[m.end() : j]):
                bad.append(f"{path.relative_to(SRC)}: {text[m.start() : j]}")
    assert not bad, "torch.load without weights_only=True:\n" + "\n".join(bad)


_UNGUARDED_JSON = r"\bjson\.loads?\((?!json\.dumps\()"  # json.loads(json.dumps(x)) only copies what the library made


def test_every_json_the_library_reads_goes_through_the_guarded_reader() -> None:
    """``json.load``/``json.loads`` let a 5,000-digit integer or deep nesting escape as ValueError or
    RecursionError; every file is parsed by snooze._kit.json instead (issue 27)."""
    hits = [
        f"{p.relative_to(SRC)}:{i}: {line.strip()}"
        for p, i, line in _source_lines()
        if re.search(_UNGUARDED_JSON, line) and p.relative_to(SRC).as_posix() != "_kit/json.py"
    ]
    assert not hits, "parse JSON with snooze._kit.json.parse_json/read_json:\n" + "\n".join(hits)
    assert re.search(_UNGUARDED_JSON, "meta = json.loads(path.read_text())") and re.search(
        _UNGUARDED_JSON, "json.load(fh)"
    )
    assert not re.search(_UNGUARDED_JSON, "json.loads(json.dumps(config, default=str))")


def test_banned_patterns_do_catch(tmp_path: Path) -> None:
    """The scanner's patterns are live (a scan that cannot fail proves nothing)."""
    samples = [
        "import pickle",
        "np.load(f, allow_pickle=True)",
        "yaml.load(s)",
        "x = eval(s)",
        "from dill import loads",
        "load_dataset(n, trust_remote_code=True)",
    ]
    for s in samples:
        assert any(re.search(p, s) for p, _ in BANNED), s
    assert not any(re.search(p, "ast.literal_eval(s)") or re.search(p, "self.evaluate(x)") for p, _ in BANNED)


# -- bounded dataset reads ----------------------------------------------------------------------
def test_jsonl_record_size_is_capped(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    small = json.dumps({"id": 1, "q": "x" * 10})
    big = json.dumps({"id": 2, "q": "y" * 5000})
    path.write_text(small + "\n" + big + "\n")
    with pytest.raises(snooze.DataError, match="line 2"):
        Source.from_jsonl("d", path, max_record_bytes=1024)
    assert len(Source.from_jsonl("d", path, max_record_bytes=len(big) + 1)) == 2  # the newline counts


def test_jsonl_single_line_without_newline_is_capped(tmp_path: Path) -> None:
    """A file that is one giant line (no newline) must not be read whole into memory first."""
    path = tmp_path / "one.jsonl"
    path.write_bytes(b'{"id": 1, "q": "' + b"z" * 200_000)
    with pytest.raises(snooze.DataError, match="over 4096 bytes"):
        Source.from_jsonl("one", path, max_record_bytes=4096)


def test_default_cap_is_in_force() -> None:
    assert 1 << 20 <= MAX_RECORD_BYTES <= 1 << 30


# -- paths from state files ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "../x",
        "../state-00000001-deadbeef.npz",
        "/etc/passwd",
        "sub/state-00000001-deadbeef.npz",
        "state-00000001-deadbeef.npz/../../x",
        "..",
        "",
        None,
        7,
        "state-00000001-DEADBEEF.npz",
        "state-00000001-deadbeef.npz\n",
    ],
)
def test_latest_cannot_point_outside_the_checkpoint(tmp_path: Path, name: object) -> None:
    sched = snooze.Scheduler(D.datasets(), D.config(), seed=0)
    root = tmp_path / "ckpt"
    sched.save(root)
    outside = tmp_path / "x"
    outside.write_bytes(b"secret")
    rec = json.loads((root / "LATEST").read_text())
    rec["file"] = name
    (root / "LATEST").write_text(json.dumps(rec))
    with pytest.raises(snooze.StateError, match="LATEST"):
        snooze.Scheduler.load(root, D.datasets())


def test_symlinked_state_file_is_refused(tmp_path: Path) -> None:
    sched = snooze.Scheduler(D.datasets(), D.config(), seed=0)
    root = tmp_path / "ckpt"
    file = sched.save(root)
    elsewhere = tmp_path / "elsewhere.npz"
    file.rename(elsewhere)
    file.symlink_to(elsewhere)
    with pytest.raises(snooze.StateError, match="symbolic link"):
        snooze.Scheduler.load(root, D.datasets())


def test_records_are_data_never_code(tmp_path: Path) -> None:
    """A record whose fields look like code is carried as text; nothing in it runs."""
    marker = tmp_path / "pwned"
    payload = f"__import__('pathlib').Path({str(marker)!r}).write_text('x')"
    path = tmp_path / "evil.jsonl"
    path.write_text("\n".join(json.dumps({"id": i, "prompt": payload, "answer": payload}) for i in range(8)))
    sched = snooze.Scheduler({"evil": str(path)}, snooze.SchedulerConfig(batch_size=4, group_size=2), seed=0)
    batch = sched.step(lambda cands: [[0.0, 1.0]] * len(cands))
    assert [c.record["prompt"] for c in batch.candidates] == [payload] * 4
    sched.save(tmp_path / "ck")
    snooze.Scheduler.load(tmp_path / "ck", {"evil": str(path)})
    assert not marker.exists()

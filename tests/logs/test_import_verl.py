"""``snooze import verl`` on dumps written here in verl's row format (``{"input", "score", "step", "uid", ...}`` per
line, one ``<step>.jsonl`` per step; ``tests/integrations/test_verl_import.py`` uses verl's own dump code and needs
verl): whatever the reward log's reader would refuse, or a dump that would lose rollouts, is refused at import with
one clear error, and a failed write leaves ``--out`` as it was."""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from snooze.cli.main import main
from snooze.logs import RewardLogWriter, read_reward_log

G = 4
PROMPTS = 4


def _rows(step: int, uid: bool = False, **extra: Callable[[int], Any]) -> list[dict[str, Any]]:
    """A step's rows: ``PROMPTS`` prompts of ``G`` rollouts, the last prompt always right (no spread); ``extra``:
    field -> value of prompt ``q``."""
    rows = []
    for q in range(PROMPTS):
        for r in range(G):
            row: dict[str, Any] = {"input": f"q{q}", "score": 1.0 if q == PROMPTS - 1 else float((r + q) % 2)}
            row["step"] = step
            if uid:
                row["uid"] = f"u{step}x{q}_{r}_0"  # v1: {uid}_{session}_{index}
            row.update({k: f(q) for k, f in extra.items()})
            rows.append(row)
    return rows


def _dump(folder: Path, steps: dict[str, list[dict[str, Any]]]) -> Path:
    """``steps``: file name -> rows (written as verl writes them: one JSON object a line)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in steps.items():
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _ok(folder: Path, **extra: Callable[[int], Any]) -> Path:
    return _dump(folder, {f"{s}.jsonl": _rows(s, **extra) for s in (1, 2, 3)})


def _import(dump: Path, out: Path, *extra: str) -> int:
    return main(["import", "verl", str(dump), "--out", str(out), *extra])


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("snooze import: error: "), err
    assert "next: snooze replay" not in captured.out
    return err


@pytest.mark.timeout(60)
def test_a_lone_far_step_is_a_missing_step_error_without_building_the_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    far = 100_000_000  # the range 1..far as a set of ints would take gigabytes
    dump = _dump(tmp_path / "d", {f"{s}.jsonl": _rows(s) for s in (1, 2, far)})
    assert _import(dump, tmp_path / "r.jsonl") == 2
    err = _one_line_error(capsys)
    assert f"step(s) 3, 4, 5, 6, 7 ... (99,999,997 in all) missing between 1 and {far}" in err, err
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("steps", [(1,), (1, 2)], ids=["only-file", "first-of-two"])
def test_an_empty_step_file_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], steps: tuple[int, ...]
) -> None:
    dump = _dump(tmp_path / "d", {f"{s}.jsonl": _rows(s) for s in steps})
    (dump / "1.jsonl").write_text("")  # was an IndexError (only file) or step 1 silently left out
    assert _import(dump, tmp_path / "r.jsonl") == 2
    assert re.search(r"1\.jsonl: empty, where verl writes every rollout of step 1", _one_line_error(capsys))


BAD = {  # the dump's value -> what the reward log's reader says of it, naming the dump's line and field
    "id-beyond-int64": (
        lambda d: _ok(d, idx=lambda q: 2**63 + q),
        ["--id-field", "idx"],
        r"1\.jsonl, line 1, field 'idx': 9223372036854775808 does not fit in a signed 64-bit integer",
    ),
    "surrogate-input": (
        lambda d: _ok(d, input=lambda q: f"q{q}\ud800"),
        [],
        r"1\.jsonl, line 1, field 'input': 'q0\\ud800' holds a lone surrogate \(U\+D800\)",
    ),
    "surrogate-data-source": (
        lambda d: _ok(d, data_source=lambda q: "gsm\udfff"),
        [],
        r"1\.jsonl, line 1, field 'data_source': 'gsm\\udfff' holds a lone surrogate \(U\+DFFF\)",
    ),
    "step-beyond-int64": (
        lambda d: _dump(d, {"99999999999999999999.jsonl": _rows(1)}),
        [],
        r"99999999999999999999\.jsonl: the file's step, 99999999999999999999 is not an integer in \[0, 2\*\*63 - 1\]",
    ),
    "mixed-id-types": (
        lambda d: _dump(d, {f"{s}.jsonl": _rows(s, idx=lambda q, s=s: q if s == 1 else str(q)) for s in (1, 2)}),
        ["--id-field", "idx"],
        r"2\.jsonl, line 1, the prompt's id \(field 'idx'\): '0' is a string, but dataset 'verl' has the id 0 at "
        r".*1\.jsonl, line 1: a dataset's ids must be all integers or all strings",
    ),
}


@pytest.mark.parametrize(("make", "options", "message"), BAD.values(), ids=BAD.keys())
def test_what_the_reward_log_refuses_is_refused_at_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make, options: list[str], message: str
) -> None:
    dump = make(tmp_path / "d")
    assert _import(dump, tmp_path / "r.jsonl", *options) == 2
    err = _one_line_error(capsys)
    assert re.search(message, err), err
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize(
    ("given", "shown"), [("", r"'' is not a non-empty string"), ("x\udcff", r"'x\\udcff' holds a lone surrogate")]
)
def test_a_bad_dataset_option_blames_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str, shown: str
) -> None:
    dump = _ok(tmp_path / "d")  # ("x\udcff": how Python hands over a command line's byte 0xff that is not UTF-8)
    assert _import(dump, tmp_path / "r.jsonl", "--dataset", given) == 2
    err = _one_line_error(capsys)
    assert re.search(rf"error: --dataset: {shown}", err) and "data_source'" in err and "field" not in err, err


def test_two_files_of_one_step_are_refused_naming_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = _ok(tmp_path / "d")
    (dump / "01.jsonl").write_text((dump / "1.jsonl").read_text())  # was: 48 rollouts reported for 64 lines
    assert _import(dump, tmp_path / "r.jsonl") == 2
    assert "01.jsonl and 1.jsonl are both step 1's file" in _one_line_error(capsys)


def test_two_prompts_sharing_a_uid_are_refused_naming_the_uid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def shared(step: int) -> list[dict[str, Any]]:  # prompt q1's rollouts carry q0's uid
        return [{**r, "uid": r["uid"].replace(f"u{step}x1_", f"u{step}x0_")} for r in _rows(step, uid=True)]

    dump = _dump(tmp_path / "d", {f"{s}.jsonl": shared(s) for s in (1, 2, 3)})  # was: 12 of 48 rows dropped
    assert _import(dump, tmp_path / "r.jsonl") == 2
    err = _one_line_error(capsys)
    assert re.search(r"1\.jsonl, line 5, field 'uid': u1x0_0_0 names the rollout of .*1\.jsonl, line 1 too", err)
    assert "prompts 'q0' and 'q1'" in err


@pytest.mark.parametrize("force", [True, False], ids=["over-an-old-log", "new-file"])
def test_a_write_that_fails_leaves_the_old_log_and_no_temporary_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, force: bool
) -> None:
    dump, out = _ok(tmp_path / "d"), tmp_path / "out" / "r.jsonl"
    if force:
        assert _import(dump, out) == 0
        capsys.readouterr()
    before = out.read_bytes() if force else None
    write = RewardLogWriter.write
    calls = []

    def full_after_one(self: RewardLogWriter, *args: Any) -> None:
        calls.append(args[0])
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        write(self, *args)

    monkeypatch.setattr(RewardLogWriter, "write", full_after_one)
    assert _import(dump, out, *(["--force"] if force else [])) == 2
    assert calls == [1, 2]  # the first step was written (aside) before the disk filled
    err = _one_line_error(capsys)
    assert "r.jsonl: the reward log could not be written (No space left on device); it is as it was" in err
    assert (out.read_bytes() if force else None) == before
    assert sorted(p.name for p in out.parent.iterdir()) == (["r.jsonl"] if force else [])
    monkeypatch.undo()
    assert _import(dump, out, "--force") == 0 and len(read_reward_log(out)) == 12

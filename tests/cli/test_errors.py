"""Every ``snooze`` command turns a bad path or input into one line on stderr and exit status 2, and
writes nothing: LOG or INPUT that is a folder, missing or not UTF-8, ``--out`` that is a file (or
under one), ``--cache`` that is a file, a ``--model`` that is not a checkpoint, a curriculum that is
a folder or not UTF-8. Option values the config classes refuse are tested with each command
(tests/experiments, tests/analysis)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from snooze.cli.main import main


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.txt").write_text("not a folder\n")
    (tmp_path / "latin1.jsonl").write_bytes('{"id": "caf\xe9"}\n'.encode("latin-1"))
    (tmp_path / "log.jsonl").write_text('{"step": 0, "dataset": "d", "id": 1, "rewards": [0.0, 1.0]}\n')
    (tmp_path / "model.txt").write_text("not a torch file\n")
    return {
        k: str(tmp_path / v)
        for k, v in {
            "dir": "folder",
            "file": "file.txt",
            "latin1": "latin1.jsonl",
            "log": "log.jsonl",
            "model": "model.txt",
            "new": "out",
            "missing": "missing.jsonl",
        }.items()
    }


CASES = [
    # (command line with {placeholders}, what the error line says)
    ("replay {dir} --out {new}", "argument LOG: {dir}: is a folder; pass a file"),
    ("replay {missing} --out {new}", "argument LOG: {missing}: no such file"),
    ("replay {latin1} --out {new}", "{latin1}: not UTF-8 text"),
    ("replay {log} --out {file}", "argument --out: {file}: is a file; pass a folder"),
    ("replay {log} --out {file}/sub", "argument --out: {file}/sub: cannot be created: {file} is a file"),
    ("stratify {dir} --out {new}", "argument INPUT: {dir}: is a folder; pass a file"),
    ("stratify {latin1} --out {new}", "{latin1}: not UTF-8 text"),
    ("stratify {log} --out {file}", "argument --out: {file}: is a file"),
    ("baseline --model {model} --out {new}/c.jsonl", "{model}: not a loadable state dict"),
    (
        "baseline --model {dir} --out {new}/c.jsonl",
        "{dir}: no checkpoint (expected a .pt state dict, a folder with model.pt, or a reference-trainer run folder)",
    ),
    ("baseline --warmup --out {dir}", "argument --out: {dir}: is a folder; pass the path of a file to write"),
    ("baseline --warmup --out {new}/c.jsonl --cache {file}", "argument --cache: {file}: is a file"),
    ("compare --profile quick --out {file}", "argument --out: {file}: is a file; pass a folder"),
    ("compare --profile quick --out {new} --cache {file}", "argument --cache: {file}: is a file"),
    (
        "compare --profile quick --out {new} --curriculum {dir}",
        "argument --curriculum: {dir}: is a folder; pass a file",
    ),
    ("compare --profile quick --out {new} --curriculum {latin1}", "{latin1}: not UTF-8 text"),
    ("compare --profile quick --out {new} --curriculum {log}", "{log}: stages: must be a non-empty list of stages"),
]


@pytest.mark.parametrize(
    ("line", "message"), CASES, ids=[c[0].split()[0] + ":" + c[1].split(":")[0][:30] for c in CASES]
)
def test_a_bad_path_or_input_is_one_error_line_and_exit_2(
    files: dict[str, str], capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    argv = line.format(**files).split()
    with pytest.raises(SystemExit) as exit_info:  # argparse's usage errors exit; the others return 2
        raise SystemExit(main(argv))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"snooze {argv[0]}: error: ") and message.format(**files) in last, err
    if not message.startswith("argument"):  # an error of the command itself: that one line, nothing else
        assert len(err.strip().splitlines()) == 1, err
    assert not Path(files["new"]).exists()  # refused before anything was written


def test_the_installed_command_prints_no_traceback(files: dict[str, str]) -> None:
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("snooze")), "replay", files["latin1"], "--out", files["new"]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert proc.stderr.startswith(f"snooze replay: error: {files['latin1']}: not UTF-8 text")


def test_an_os_error_on_a_given_path_is_one_line(
    monkeypatch: pytest.MonkeyPatch, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The last line of defence: an OS error the checks could not foresee (here: a full disk) is one line too."""
    import snooze.cli.replay as replay

    def full(args: object) -> int:
        raise OSError(28, "No space left on device", files["new"])

    monkeypatch.setattr(replay, "run", full)
    assert main(["replay", files["log"], "--out", files["new"]]) == 2
    assert capsys.readouterr().err == f"snooze replay: error: {files['new']}: No space left on device\n"

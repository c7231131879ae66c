"""What a new user meets first: ``--version``, a value that starts with '-', the formats ``stratify`` reads,
output piped into ``head``, a switch's help that says what it does, and "the design note" explained."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import snooze
from snooze.analysis.stratify import StratifyConfig
from snooze.cli._options import add_options, off_help
from snooze.cli._parser import DESIGN_NOTE
from snooze.cli.main import SUBCOMMANDS, _build_parser, main

ROOT = Path(__file__).resolve().parents[2]
GROUPS = [{"step": s, "dataset": "d", "id": 1, "rewards": r} for s, r in enumerate([[0, 1], [1, 1]])]
HEADER = {  # the run's sizes: replay reads them instead of warning that it guesses them (docs/reward-log.md)
    "format": "snooze-reward-log",
    "version": 1,
    "group_size": 2,
    "batch_size": 1,
    "gen_batch_size": 1,
    "max_gen_rounds": 8,
    "policy": "dynamic_sampling",
    "dynamic_sampling": True,
    "options": None,
    "reward_range": [0.0, 1.0],
    "carry_surplus": False,
    "source": "snooze.trainer",
}
LOG = "".join(json.dumps(g) + "\n" for g in [HEADER, *GROUPS])


def test_version_is_the_packages(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    project = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)  # type: ignore[union-attr]
    assert capsys.readouterr().out.strip() == f"snooze {snooze.__version__}" == f"snooze {project}"


@pytest.mark.parametrize(
    ("words", "joined", "dest", "value"),
    [
        (["--reward-range", "-1,1"], "--reward-range=-1,1", "reward_range", (-1.0, 1.0)),
        (["--easy-threshold", "-1e-3"], "--easy-threshold=-1e-3", "easy_threshold", -1e-3),  # argparse: not a number
        (["--reward-r", "-1,1"], "--reward-r=-1,1", "reward_range", (-1.0, 1.0)),  # an abbreviation argparse accepts
    ],
)
def test_a_value_that_starts_with_a_dash_says_to_join_it_with_equals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], words: list[str], joined: str, dest: str, value: object
) -> None:
    log = tmp_path / "rewards.jsonl"
    log.write_text(LOG)
    with pytest.raises(SystemExit) as done:
        main(["replay", str(log), "--out", str(tmp_path / "out"), *words])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "expected one argument" in err
    assert f"join it with '=', {joined}" in err
    args = _build_parser(["replay"]).parse_args(["replay", str(log), "--out", "o", joined])  # the form it names parses
    assert getattr(args, dest) == value


def test_a_missing_value_at_the_end_keeps_argparses_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "rewards.jsonl"
    log.write_text(LOG)
    with pytest.raises(SystemExit):
        main(["replay", str(log), "--out", str(tmp_path / "out"), "--reward-range"])
    err = capsys.readouterr().err
    assert "argument --reward-range: expected one argument" in err and "join it" not in err


ROWS = [
    {"dataset": "d", "id": 1, "model": "m", "n": 4, "n_correct": 4},
    {"dataset": "d", "id": 2, "model": "m", "rewards": [1, 0, 1, 0]},
    {"dataset": "d", "id": 3, "model": "m", "n": 4, "n_correct": 0},
    {"dataset": "e", "id": "007", "model": "m", "n": 4, "n_correct": 1.5},
]
CSV = 'dataset,id,model,rewards,n,n_correct\nd,1,m,,4,4\nd,2,m,"[1, 0, 1, 0]",,\nd,3,m,,4,0\ne,007,m,,4,1.5\n'


def test_stratify_reads_csv_as_it_reads_jsonl(tmp_path: Path) -> None:
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tmp_path / "b.csv").write_text(CSV)
    for name in ("b.jsonl", "b.csv"):
        assert main(["stratify", str(tmp_path / name), "--out", str(tmp_path / name[2:]), "--no-plot"]) == 0
    table = (tmp_path / "csv" / "prompts.csv").read_text()
    assert table == (tmp_path / "jsonl" / "prompts.csv").read_text()
    assert "e,007," in table  # an id with a leading zero stays a string; 1, 2, 3 are integers as in the JSONL
    curricula = [json.loads((tmp_path / d / "curriculum.json").read_text()) for d in ("csv", "jsonl")]
    assert curricula[0] == curricula[1] and curricula[0]["drop"] == {"d": [1]}


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("prompts.csv", "dataset,id,pass_rate,n_samples,signal_prob,stratum\nd,1,1,4,0,too_easy\n", "stratification"),
        ("b.tsv", "dataset\tid\n", "JSON Lines (.jsonl, .json), CSV (.csv) or Parquet"),
        ("b.csv", "dataset,id,n,n_correct\nd,1,four,2\n", "row 1, field 'n': 'four' is not a finite number"),
        ("b.csv", "dataset,id,rewards\nd,1,1 0 1\n", "row 1, field 'rewards': not valid JSON"),
        ("b.csv", "dataset,id,id\nd,1,2\n", "names column 'id' twice"),
        ("b.csv", "dataset,id,n,n_correct\nd,1,4,2,9\n", "row 1: 5 cells under a header of 4 columns"),
    ],
)
def test_what_stratify_cannot_read_says_what_it_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, says: str
) -> None:
    (tmp_path / name).write_text(text)
    assert main(["stratify", str(tmp_path / name), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("unbuffered", ["1", ""], ids=["unbuffered", "buffered"])
@pytest.mark.parametrize("argv", [["replay", "{log}", "--out", "{out}", "--no-plot"], ["--help"], ["replay", "--help"]])
def test_output_into_a_closed_pipe_ends_silently(tmp_path: Path, argv: list[str], unbuffered: str) -> None:
    """``snooze replay ... | head``: the reader goes away before the command writes (stdout closed at once)."""
    (tmp_path / "log.jsonl").write_text(LOG)
    words = [w.format(log=tmp_path / "log.jsonl", out=tmp_path / "out") for w in argv]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"} | {"PYTHONUNBUFFERED": unbuffered}
    proc = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-m", "snooze.cli.main", *words],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    proc.stdout.close()  # type: ignore[union-attr]
    err = proc.stderr.read()  # type: ignore[union-attr]
    status = proc.wait(timeout=120)
    assert err == b""
    # argparse drops a help text it cannot write (OSError) and exits 0; what snooze prints ends with 141 (SIGPIPE)
    assert status == 141 or ("--help" in argv and unbuffered and status == 0)


def _page(command: str | None) -> str:
    """The help page of ``snooze COMMAND`` (``None``: of ``snooze``), its whitespace made single spaces."""
    parser = _build_parser([command] if command else [])
    if command is not None:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return " ".join(parser.format_help().split())


def test_a_switch_that_turns_a_field_off_says_what_it_does(tmp_path: Path) -> None:
    text = _page("stratify")
    assert "--no-drop-too-easy Keep too_easy prompts in every curriculum stage" in text
    assert "Turn off" not in text
    assert off_help(StratifyConfig, "postpone_too_hard").startswith("One curriculum stage")
    (tmp_path / "b.csv").write_text(CSV)
    argv = ["stratify", str(tmp_path / "b.csv"), "--out", str(tmp_path / "o"), "--no-plot", "--no-drop-too-easy"]
    assert main(argv) == 0
    assert json.loads((tmp_path / "o" / "curriculum.json").read_text())["drop"] == {}  # the too-easy prompt is kept


@dataclass(frozen=True)
class _OnByDefault:
    fast: bool = True
    """Go fast."""


def test_a_bool_field_on_by_default_needs_its_false_paragraph() -> None:
    with pytest.raises(snooze.ConfigError, match="needs a paragraph starting ``False``:"):
        add_options(argparse.ArgumentParser(), _OnByDefault, ["fast"])


@pytest.mark.parametrize("command", [None, *SUBCOMMANDS])
def test_a_help_page_that_mentions_the_design_note_says_what_it_is_first(command: str | None) -> None:
    text = _page(command)
    first = text.lower().find("design note")
    if first >= 0:
        start = text.find(" ".join(DESIGN_NOTE.split()))
        assert 0 <= start <= first < start + len(DESIGN_NOTE), f"snooze {command or ''} --help: {text[: first + 40]}"


def test_the_compare_page_mentions_the_design_note_and_explains_it() -> None:
    assert " ".join(DESIGN_NOTE.split()) in _page("compare")  # its options' docstrings mention it: the test bites

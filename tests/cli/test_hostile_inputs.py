"""Issue 27 on the command line: hostile files and option values are one line on stderr and exit
status 2, before anything is written, never a traceback or a hang: a FIFO or a device as LOG, INPUT or
``--curriculum``; JSON with a 5,000-digit integer or nesting 100,000 deep; numbers no float holds;
lone surrogates; ``--lr inf``, ``--temperature 1e-300``, ``--device cuda`` without CUDA; integer
options beyond 64 bits."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from snooze.cli.main import main

DIGITS = "1" * 5000
DEEP = "[" * 100_000 + "]" * 100_000
BEYOND = "9" * 20  # > 2**63 - 1


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    os.mkfifo(tmp_path / "fifo.jsonl")
    lines = {
        "log": '{"step": 0, "dataset": "d", "id": 1, "rewards": [0.0, 1.0]}\n',
        "log_digits": f'{{"step": {DIGITS}, "dataset": "d", "id": 1, "rewards": [0, 1]}}\n',
        "log_deep": f'{{"step": 0, "dataset": "d", "id": 1, "rewards": {DEEP}}}\n',
        "log_huge": '{"step": 0, "dataset": "d", "id": 1, "rewards": [0, 1%s]}\n' % ("0" * 400),
        "log_surrogate": '{"step": 0, "dataset": "d\\ud800", "id": 1, "rewards": [0, 1]}\n',
        "rows_digits": f'{{"dataset": "d", "id": {DIGITS}, "n": 2, "n_correct": 1}}\n',
        "rows_deep": DEEP + "\n",
        "rows_huge": '{"dataset": "d", "id": 1, "n": 2, "n_correct": 1%s}\n' % ("0" * 400),
        "rows_surrogate": '{"dataset": "d", "id": "q\\udc00", "n": 2, "n_correct": 1}\n',
        "cur_digits": f'{{"stages": [{{"weights": {{"rev": {DIGITS}}}}}]}}',
        "cur_deep": DEEP,
        "cur_huge": '{"stages": [{"weights": {"rev": 1%s}}]}' % ("0" * 400),
    }
    for name, text in lines.items():
        (tmp_path / f"{name}.jsonl").write_text(text)
    return {
        "new": str(tmp_path / "out"),
        "fifo": str(tmp_path / "fifo.jsonl"),
        "dev": "/dev/zero",
        "beyond": BEYOND,
        **{name: str(tmp_path / f"{name}.jsonl") for name in lines},
    }


CASES = [
    # (command line with {placeholders}, what the error line says); items of issue 27 in the ids
    ("replay {fifo} --out {new}", r"argument LOG: {fifo}: is a named pipe \(FIFO\), not a regular file; pass a file"),
    ("replay {dev} --out {new}", r"argument LOG: /dev/zero: is a character device, not a regular file"),
    ("stratify {fifo} --out {new}", r"argument INPUT: {fifo}: is a named pipe"),
    ("compare --profile quick --out {new} --curriculum {fifo}", r"argument --curriculum: {fifo}: is a named pipe"),
    ("replay {log_digits} --out {new}", r"{log_digits}, line 1: holds an integer of more than 4300 digits"),
    ("replay {log_deep} --out {new}", r"{log_deep}, line 1: JSON nested deeper than 64 levels"),
    ("stratify {rows_digits} --out {new}", r"{rows_digits}, row 1: holds an integer of more than 4300 digits"),
    ("stratify {rows_deep} --out {new}", r"{rows_deep}, row 1: JSON nested deeper than 64 levels"),
    (
        "compare --profile quick --out {new} --curriculum {cur_digits}",
        r"{cur_digits}: holds an integer of more than 4300",
    ),
    ("compare --profile quick --out {new} --curriculum {cur_deep}", r"{cur_deep}: JSON nested deeper than 64 levels"),
    (
        "replay {log_huge} --out {new}",
        r"{log_huge}, line 1, field 'rewards': rollout 1: an integer of 1329 bits is too large",
    ),
    (
        "stratify {rows_huge} --out {new}",
        r"{rows_huge}, row 1, field 'n_correct': <an integer of 1329 bits> is not a finite",
    ),
    (
        "compare --profile quick --out {new} --curriculum {cur_huge}",
        r"{cur_huge}: stages\[0\].weights\['rev'\]=<an integer of 1329",
    ),
    ("compare --profile quick --out {new} --lr inf", r"Profile.lr=inf: must be a finite number > 0 \(option --lr\)"),
    (
        "compare --profile quick --out {new} --temperature 1e-300",
        r"Profile.temperature=1e-300: must be a finite number >= 0.001",
    ),
    (
        "compare --profile quick --out {new} --temperature nan",
        r"Profile.temperature=nan: must be a finite number >= 0.001",
    ),
    (
        "replay {log_surrogate} --out {new}",
        r"{log_surrogate}, line 1, field 'dataset': 'd\\ud800' holds a lone surrogate",
    ),
    (
        "stratify {rows_surrogate} --out {new}",
        r"{rows_surrogate}, row 1, field 'id': 'q\\udc00' holds a lone surrogate",
    ),
    ("replay {log} --out {new} --factors 1,{beyond}", r"argument --factors: {beyond}: does not fit in 64 bits"),
    (
        "replay {log} --out {new} --gen-batch-size {beyond}",
        r"argument --gen-batch-size: {beyond}: does not fit in 64 bits",
    ),
    ("replay {log} --out {new} --batch-size -{beyond}", r"argument --batch-size: -{beyond}: does not fit in 64 bits"),
    ("compare --profile quick --out {new} --steps {beyond}", r"argument --steps: {beyond}: does not fit in 64 bits"),
    ("compare --profile quick --out {new} --jobs {beyond}", r"argument --jobs: {beyond}: does not fit in 64 bits"),
]
ITEMS = ["6"] * 4 + ["9"] * 6 + ["10"] * 3 + ["11"] * 3 + ["12"] * 2 + ["14"] * 5


@pytest.mark.timeout(60)  # a FIFO read, or a comparison that starts training, would run past it
@pytest.mark.parametrize(
    ("line", "message"),
    CASES,
    ids=[f"item{i}:{c[0].split()[0]}:{c[0].split()[-1][-12:]}" for i, c in zip(ITEMS, CASES)],
)
def test_a_hostile_input_is_one_error_line_and_exit_2(
    files: dict[str, str], capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    argv = line.format(**files).split()
    with pytest.raises(SystemExit) as exit_info:  # argparse's usage errors exit; the others return 2
        raise SystemExit(main(argv))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"snooze {argv[0]}: error: "), err
    assert re.search(message.format(**{k: re.escape(v) for k, v in files.items()}), last), err
    if not message.startswith("argument"):  # an error of the command itself: that one line, nothing else
        assert len(err.strip().splitlines()) == 1, err
    assert not Path(files["new"]).exists()  # refused before anything was written


@pytest.mark.timeout(60)
def test_compare_on_a_cuda_device_the_machine_lacks_is_refused_before_the_warm_up(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    device = "cuda" if count == 0 else f"cuda:{count}"
    assert main(["compare", "--profile", "quick", "--out", files["new"], "--device", device]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"snooze compare: error: TrainConfig.device='{device}': "), err
    assert "(option --device)" in err and not Path(files["new"]).exists()


def test_the_installed_command_prints_no_traceback_for_hostile_json(files: dict[str, str]) -> None:
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("snooze")), "stratify", files["rows_digits"], "--out", files["new"]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"snooze stratify: error: {files['rows_digits']}, row 1: holds an integer")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "args, field", [(["--snooze-factor", str(2**40)], "factor"), (["--predictive-backoff", "1e300"], "backoff")]
)
def test_compare_with_a_value_the_scheduler_cannot_hold_is_refused_before_the_warm_up(
    files: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    field: str,
) -> None:
    """The arms' SchedulerConfigs were built after the warm-up, and --snooze-factor 2**40 was an
    OverflowError traceback from the first run's scheduler. Now a ConfigError line, before the warm-up."""
    import snooze.experiments.compare as compare

    def no_warmup(*a: object, **k: object) -> None:
        raise AssertionError("the warm-up started")

    monkeypatch.setattr(compare, "profile_base", no_warmup)
    assert main(["compare", "--profile", "quick", "--out", files["new"], *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"snooze compare: error: {field}="), err
    assert not Path(files["new"]).exists()


LIST_CASES = [
    # (command, arguments after its input, what the error line says)
    ("replay", ["--out", ""], r"argument --out: an empty path; pass a folder"),
    ("stratify", ["--out", ""], r"argument --out: an empty path; pass a folder"),
    ("replay", ["--factors", ""], r"argument --factors: '': empty; separate the items by single commas"),
    (
        "replay",
        ["--factors", "1,,2"],
        r"argument --factors: '1,,2': an empty item; separate the items by single commas",
    ),
    ("replay", ["--factors", ",1,"], r"argument --factors: ',1,': an empty item"),
    ("replay", ["--factors", "1,1"], r"argument --factors: '1,1': 1 is given twice; give each once"),
    ("replay", ["--factors", "5,05"], r"argument --factors: '5,05': 05 is 5 again; give each once"),
    ("stratify", ["--models", ","], r"argument --models: ',': an empty item"),
    ("stratify", ["--models", ""], r"argument --models: '': empty"),
    ("stratify", ["--models", "m,,n"], r"argument --models: 'm,,n': an empty item"),
    ("stratify", ["--models", "m,m"], r"argument --models: 'm,m': m is given twice"),
]


@pytest.mark.parametrize(
    ("command", "args", "message"), LIST_CASES, ids=[f"{c[0]}:{'='.join(c[1])}" for c in LIST_CASES]
)
def test_an_empty_path_or_list_item_or_a_repeated_item_is_refused(
    files: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    args: list[str],
    message: str,
) -> None:
    """``--out ''`` wrote into the current folder; ``--factors 1,,2`` and ``,1,`` dropped the empty items,
    ``1,1`` was deduplicated, and ``--models ,`` (or ``''``) meant no filter at all. Each is refused now."""
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    out = [] if args[0] == "--out" else ["--out", files["new"]]
    given = files["log"] if command == "replay" else files["rows_surrogate"]  # (never read: refused before)
    with pytest.raises(SystemExit) as exit_info:
        main([command, given, *out, *args, "--no-plot"])
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert exit_info.value.code == 2 and "Traceback" not in err, err
    assert last.startswith(f"snooze {command}: error: ") and re.search(message, last), err
    assert not list(here.iterdir()) and not Path(files["new"]).exists()  # nothing written anywhere


@pytest.mark.parametrize(
    ("arms", "message"),
    [
        ("grpo,,filter", r"'grpo,,filter': an empty item; separate the items by single commas"),
        (",grpo", r"',grpo': an empty item"),
        ("grpo,grpo", r"'grpo,grpo': grpo is given twice; give each once"),
        ("grpo, grpo", r"'grpo, grpo': grpo is given twice"),
        ("grpo,dapo", r"'grpo,dapo': arms must be 'all' or among grpo, dynamic_sampling"),
    ],
)
def test_compare_arms_refuses_an_empty_or_repeated_arm(
    files: dict[str, str], capsys: pytest.CaptureFixture[str], arms: str, message: str
) -> None:
    """``--arms grpo,,filter`` dropped the empty item and ``grpo,grpo`` trained grpo twice; the list is read
    as every list option is (``_options.comma_list``): each refused in one line, before anything is written."""
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "--out", files["new"], "--arms", arms])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err, err
    assert re.search(r"snooze compare: error: argument --arms: " + message, err.strip().splitlines()[-1]), err
    assert not Path(files["new"]).exists()


def test_compare_arms_takes_spaces_after_the_commas() -> None:
    from snooze.cli.compare import _arms

    assert _arms("grpo, filter") == ["grpo", "filter"] and _arms("all")[0] == "grpo"

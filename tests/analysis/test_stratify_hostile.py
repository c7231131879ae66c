"""Issue 27's root causes in ``snooze stratify``'s input: a FIFO (reading it would block forever),
hostile JSON rows, numbers too large for a float, lone surrogates in names and ids, and config values
no float holds. Each is the project's error naming the file, the row and the field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import snooze
from snooze.analysis.completions import read_completions
from snooze.analysis.stratify import StratifyConfig, stratify

GOOD = '{"dataset": "a", "id": 1, "n": 4, "n_correct": 2}\n'
BAD_ROWS = {
    "digits": (
        '{"dataset": "a", "id": 2, "n": %s, "n_correct": 1}' % ("1" * 5000),
        r"row 2: holds an integer of more than 4300 digits",
    ),
    "depth": ("[" * 100_000 + "]" * 100_000, "row 2: JSON nested deeper than 64 levels"),
    "huge n": (
        '{"dataset": "a", "id": 2, "n": 1%s, "n_correct": 1}' % ("0" * 400),
        r"row 2, field 'n': <an integer of 1329 bits> is not a finite",
    ),
    "huge reward": (
        '{"dataset": "a", "id": 2, "rewards": [0, 1%s]}' % ("0" * 400),
        r"row 2, field 'rewards': <an integer of 1329 bits>",
    ),
    "surrogate dataset": (
        '{"dataset": "b\\ud800", "id": 2, "n": 4, "n_correct": 1}',
        r"row 2, field 'dataset': 'b\\ud800' holds a lone surrogate \(U\+D800\)",
    ),
    "surrogate id": (
        '{"dataset": "a", "id": "x\\udc00", "n": 4, "n_correct": 1}',
        r"row 2, field 'id': 'x\\udc00' holds a lone surrogate",
    ),
    "surrogate model": (
        '{"dataset": "a", "id": 2, "model": "m\\udbff", "n": 4, "n_correct": 1}',
        "row 2, field 'model': .* lone surrogate",
    ),
}


@pytest.mark.parametrize("case", BAD_ROWS)
def test_a_hostile_row_is_a_data_error_naming_file_row_and_field(tmp_path: Path, case: str) -> None:
    row, why = BAD_ROWS[case]
    path = tmp_path / "c.jsonl"
    path.write_text(GOOD + row + "\n")
    with pytest.raises(snooze.DataError, match=f"c.jsonl, {why}"):
        stratify([path])


@pytest.mark.timeout(20)
def test_a_fifo_as_input_is_a_data_error_not_a_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "c.jsonl")
    with pytest.raises(snooze.DataError, match=r"c.jsonl: cannot be read \(is a named pipe"):
        read_completions([tmp_path / "c.jsonl"])


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("group_size", 10**400, r"group_size=<an integer of 1329 bits>: must be an integer in \[2, "),
        ("reward_range", (0, 10**400), r"reward_range=\(0, <an integer of 1329 bits>\): must be \(low, high\)"),
        ("weight_floor", 10**400, r"weight_floor=<an integer of 1329 bits>: must be in \[0, 1\]"),
        ("advance_efficiency", float("inf"), r"advance_efficiency=inf: must be an efficiency in \[0, 1\]"),
        ("advance_step", 2**64, r"advance_step=18446744073709551616: must be an integer in \[1, "),
    ],
    ids=lambda v: v if isinstance(v, str) and "=" not in v else "",
)
def test_stratify_config_values_no_column_holds_are_config_errors(field: str, value: object, why: str) -> None:
    with pytest.raises(snooze.ConfigError, match=why):
        StratifyConfig(**{field: value})

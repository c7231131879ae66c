"""``benchmarks/family.py`` and ``benchmarks/staleness.py`` on bad input, and the cross-comparison tables' reader.

A folder that does not exist ended ``--table-only`` in a traceback; an empty one wrote an empty table and
exited 0; ``--regimes bogus`` was taken. Each is one line on stderr and exit status 2 now, with nothing
written. The tables read what ``snooze compare`` wrote (``summary.json``, ``regime.json``,
``run_meta.json``) through :mod:`snooze.experiments.summary_file`: hypothesis writes them with one field
made hostile (a number that is a string, a boolean, ``10**400``, an infinity, a seed too few, a missing key,
nesting past the JSON reader's limit) and only a ``DataError`` naming the file comes out, nothing written.
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from snooze.core.errors import DataError
from snooze.experiments.family_table import write_family
from snooze.experiments.staleness import write_staleness

ROOT = Path(__file__).resolve().parents[2]
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), *args], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.parametrize(
    ("script", "args", "says"),
    [
        ("family.py", ["--table-only", "--out", "{tmp}/nope"], "nope: does not exist"),  # was a traceback
        ("family.py", ["--table-only", "--out", "{tmp}"], "none of the regimes"),  # was an empty table, exit 0
        ("family.py", ["--table-only", "--out", "{tmp}", "--regimes", "bogus"], "unknown regime(s) ['bogus']"),
        ("family.py", ["--out", "{tmp}", "--regimes", "default,bogus"], "unknown regime(s) ['bogus']"),
        ("family.py", ["--table-only", "--out", "{tmp}/file"], "file: is not a folder"),
        ("staleness.py", ["--table-only", "--out", "{tmp}/nope"], "nope: does not exist"),
        ("staleness.py", ["--table-only", "--out", "{tmp}"], "none of k = [0, 1, 2]"),
        ("staleness.py", ["--table-only", "--out", "{tmp}", "--ks", "-1"], "integers >= 0"),
        ("staleness.py", ["--table-only", "--out", "{tmp}", "--ks", "x"], "integers >= 0"),
    ],
)
def test_a_bad_folder_or_option_is_one_error_line_and_exit_2(
    tmp_path: Path, script: str, args: list[str], says: str
) -> None:
    (tmp_path / "file").write_text("")
    before = sorted(tmp_path.rglob("*"))
    proc = _script(script, *(a.format(tmp=tmp_path) for a in args))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"{script}: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert says in proc.stderr and proc.stdout == ""
    assert sorted(tmp_path.rglob("*")) == before  # nothing written


def _entry(gen: list[Any], late: list[Any]) -> dict[str, Any]:
    return {"gen_groups": {"by_seed": gen}, "accuracy": {"sampled": {"late": {"by_seed": late}}}}


SUMMARY = {"dynamic_sampling": _entry([100, 110], [0.8, 0.82]), "snooze": _entry([50, 60], [0.79, math.nan])}
REGIME = {"targets": {}, "checks": [{"criterion": "c", "value": [1, 2], "target": "t", "met": None}]}
META = {"wall_seconds": 60.0, "resumed_runs": 0}
HOSTILE: list[Any] = [True, None, "1", [], {}, -1.0, 10**400, math.inf, -math.inf, [[[[1]]]], 2.0]
PLACES = {  # each file's fields that the tables read, where one is made hostile
    "summary.json": [
        ("dynamic_sampling", "gen_groups", "by_seed", 0),
        ("snooze", "gen_groups", "by_seed", 1),
        ("snooze", "accuracy", "sampled", "late", "by_seed", 0),
        ("snooze", "accuracy", "sampled", "late", "by_seed"),
        ("snooze", "gen_groups", "by_seed"),
        ("snooze", "accuracy"),
        ("dynamic_sampling",),
    ],
    "regime.json": [("checks",), ("checks", 0), ("checks", 0, "criterion"), ("checks", 0, "met")],
    "run_meta.json": [("wall_seconds",), ("resumed_runs",)],
}


def _set(doc: Any, place: tuple[Any, ...], value: Any) -> Any:
    doc = copy.deepcopy(doc)
    node = doc
    for key in place[:-1]:
        node = node[key]
    if value is _DROP:
        del node[place[-1]]
    else:
        node[place[-1]] = value
    return doc


_DROP = object()


def _hostile_value(name: str, place: tuple[Any, ...], value: Any) -> bool:
    """Whether ``value`` at ``place`` is wrong (a few are right in some places: the fuzz skips those)."""
    last = place[-1]
    if name == "summary.json" and last == 0 and place[-2] == "by_seed" and "accuracy" in place:
        return not (isinstance(value, float) and 0 <= value <= 1)  # 2.0 is out of [0, 1]; NaN is 'not measured'
    if name == "summary.json" and last in (0, 1):
        return value is True or not (isinstance(value, (int, float)) and 0 <= value < math.inf)
    if name == "regime.json" and last == "met":
        return not (value is None or isinstance(value, bool))  # true, false, or null (not judged)
    if name == "regime.json" and last == "criterion":
        return not (isinstance(value, str) and value)
    if name == "regime.json" and last == "checks":
        return value != []  # no checks: a table of none
    if name == "run_meta.json" and last == "wall_seconds":
        return value is True or not (isinstance(value, (int, float)) and 0 <= value < 10**300)
    return True


def _write_comparison(folder: Path, files: dict[str, Any]) -> None:
    folder.mkdir(parents=True)
    for name, doc in files.items():
        (folder / name).write_text(json.dumps(doc, allow_nan=True))


@FUZZ
@given(
    name=st.sampled_from(sorted(PLACES)),
    pick=st.integers(0, 6),
    value=st.sampled_from([*HOSTILE, _DROP]),
    table=st.sampled_from(["family", "staleness"]),
)
def test_a_hostile_comparison_file_is_refused_naming_it_and_nothing_is_written(
    tmp_path_factory: pytest.TempPathFactory, name: str, pick: int, value: Any, table: str
) -> None:
    place = PLACES[name][pick % len(PLACES[name])]
    shorter = value is _DROP and isinstance(place[-1], int)  # an array one item shorter: still well formed
    if shorter or (value is not _DROP and not _hostile_value(name, place, value)):
        return
    if table == "staleness" and name == "regime.json" or table == "family" and name == "run_meta.json":
        return  # a file that table does not read
    out = tmp_path_factory.mktemp("out")
    good = {"summary.json": SUMMARY, "regime.json": REGIME, "run_meta.json": META}
    files = {**good, name: _set(good[name], place, value)}
    _write_comparison(out / ("default" if table == "family" else "k1"), files)
    before = sorted(out.rglob("*"))
    with pytest.raises(DataError) as err:
        write_family(out, ["default"]) if table == "family" else write_staleness(out, [1])
    assert str(out / ("default" if table == "family" else "k1") / name) in str(err.value)
    assert sorted(out.rglob("*")) == before


def test_the_good_files_make_both_tables(tmp_path: Path) -> None:
    files = {"summary.json": SUMMARY, "regime.json": REGIME, "run_meta.json": META}
    _write_comparison(tmp_path / "default", files)
    _write_comparison(tmp_path / "k1", files)
    assert "| default | 0.810, 105 |" in write_family(tmp_path, ["default"])
    assert "| 1 | 0.810, 105 |" in write_staleness(tmp_path, [1])


def test_deep_nesting_and_a_seed_more_than_dapo_are_refused(tmp_path: Path) -> None:
    deep = json.dumps(SUMMARY).replace("[100, 110]", "[" * 70 + "1" + "]" * 70)
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "summary.json").write_text(deep)
    with pytest.raises(DataError, match="nested deeper than 64"):
        write_family(tmp_path, ["default"])
    more = {**SUMMARY, "snooze": _entry([50, 55, 60], [0.79, 0.8, 0.81])}  # zip() would drop the third seed
    (tmp_path / "default" / "summary.json").write_text(json.dumps(more))
    with pytest.raises(DataError, match="3 seeds, but dynamic_sampling has 2"):
        write_family(tmp_path, ["default"])


def test_an_arm_with_fewer_seeds_pairs_with_dapos_first_ones(tmp_path: Path) -> None:
    files = {"summary.json": SUMMARY, "regime.json": REGIME, "run_meta.json": META}
    _write_comparison(tmp_path / "default", files)
    fewer = {**SUMMARY, "snooze": _entry([50], [0.79])}
    (tmp_path / "default" / "summary.json").write_text(json.dumps(fewer))
    text = write_family(tmp_path, ["default"])
    rows = json.loads((tmp_path / "family.json").read_text())
    assert rows["overall"]["snooze"]["seeds"] == 1
    assert rows["regimes"]["default"]["snooze"]["ratio"]["by_seed"] == [100 / 50]
    assert "snooze (1 seeds)" in text and "DAPO (2 seeds)" in text
    assert "| arm | pairs |" in text  # the pooled table follows the family's

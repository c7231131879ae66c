"""The core's own readers, field by field: a file's ``version`` is an integer (``true`` and ``1.0`` were read as
1), a key given twice in a JSON object is refused (the last one was kept silently), a state's ``seed`` is an
integer (``true`` loaded as seed 1), and the config's counts fit in int64 (a larger ``batch_size`` was taken and
the first ``propose`` failed with a misleading error about the ticket counter)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import snooze
from snooze._kit.json import parse_json, same_version
from snooze.curriculum import Curriculum


def _saved(tmp_path: Path) -> tuple[Path, snooze.Scheduler]:
    data = {"d": [{"id": i} for i in range(6)]}
    sched = snooze.Scheduler(data, snooze.SchedulerConfig(batch_size=2, group_size=4), seed=3)
    sched.step(lambda c: [[1, 0, 1, 0]] * len(c))
    sched.save(tmp_path / "s")
    return tmp_path / "s", sched


@pytest.mark.parametrize("bad", [True, 1.0, "1", None])
def test_a_version_that_is_not_the_integer_is_refused(bad: object) -> None:
    assert same_version(1, 1) and not same_version(bad, 1)


@pytest.mark.parametrize("bad", [True, 1.0])
def test_a_commit_record_s_version_of_another_type_is_refused_naming_the_file(tmp_path: Path, bad: object) -> None:
    folder, _ = _saved(tmp_path)
    record = json.loads((folder / "LATEST").read_text())
    (folder / "LATEST").write_text(json.dumps({**record, "version": bad}))
    with pytest.raises(snooze.StateError, match=rf"LATEST: .*version {bad!r} is not supported"):
        snooze.load_state(folder)


def test_a_key_given_twice_is_refused_by_every_reader() -> None:
    with pytest.raises(snooze.StateError, match=r"f.json: the key 'a' appears twice"):
        parse_json('{"a": 1, "b": {"c": 2}, "a": 3}', "f.json", snooze.StateError)
    with pytest.raises(snooze.StateError, match=r"the key 'c' appears twice"):
        parse_json('{"a": 1, "b": {"c": 2, "c": 2}}', "f.json", snooze.StateError)
    assert parse_json('{"a": 1, "b": {"a": 2}}', "f.json", snooze.StateError) == {"a": 1, "b": {"a": 2}}


@pytest.mark.parametrize("bad", [True, 3.0, -1, "3"])
def test_a_state_s_seed_that_is_not_an_integer_is_refused_and_changes_nothing(tmp_path: Path, bad: object) -> None:
    folder, sched = _saved(tmp_path)
    state = snooze.load_state(folder)
    state["meta"]["seed"] = bad
    before = sched.state_dict()
    with pytest.raises(snooze.StateError, match=r"seed=.* is not a seed"):
        sched.load_state_dict(state)
    after = sched.state_dict()
    assert after["meta"] == before["meta"]


@pytest.mark.parametrize("version", [True, 1.0])
def test_a_curriculum_file_s_version_of_another_type_is_refused(tmp_path: Path, version: object) -> None:
    path = tmp_path / "curriculum.json"
    path.write_text(json.dumps({"version": version, "stages": [{"name": "all", "weights": None}]}))
    with pytest.raises(snooze.ConfigError, match=r"version.*is not a known version"):
        Curriculum.from_file(path)


@pytest.mark.parametrize("field", ["batch_size", "gen_batch_size", "max_gen_rounds", "epochs", "max_staleness"])
def test_a_count_beyond_int64_is_refused_when_the_config_is_made(field: str) -> None:
    with pytest.raises(snooze.ConfigError, match=rf"^{field}=.*: must be an integer in \["):
        snooze.SchedulerConfig(**{field: 2**63})
    assert getattr(snooze.SchedulerConfig(**{field: 2**63 - 1}), field) == 2**63 - 1


@pytest.mark.parametrize("field, bad", [("stage", True), ("stage", 0.9), ("streaks", [True]), ("n_stages", "1")])
def test_a_curriculum_state_field_of_another_type_is_refused(field: str, bad: object) -> None:
    cur = Curriculum.from_dict({"version": 1, "stages": [{"name": "all", "weights": None}]})
    state = {**cur.state_dict(), field: bad}
    with pytest.raises(snooze.StateError, match="curriculum"):
        cur.load_state_dict(state)

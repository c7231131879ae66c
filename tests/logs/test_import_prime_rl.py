"""``snooze import prime-rl``: prime-rl's episode files (``rollouts/step_<N>/train/all/traces.jsonl``) as a reward
log: a round trip, and one clear error for each dump a replay cannot use."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from integrations._prime_rl_dump import episode, write_run

from snooze.cli.main import main
from snooze.logs import read_reward_log

ROWS = [  # (step, env, task key, rewards): two environments, a task met at several steps
    (0, "gsm8k", "t1", [1.0, 1.0, 1.0, 1.0]),
    (0, "gsm8k", "t2", [1.0, 0.0, 0.0, 1.0]),
    (0, "math", 7, [0.0, 0.0, 0.0, 0.0]),
    (1, "gsm8k", "t1", [1.0, 1.0, 0.0, 1.0]),
    (1, "math", 7, [0.0, 1.0, 0.0, 0.0]),
    (2, "gsm8k", "t2", [1.0, 1.0, 1.0, 1.0]),
    (2, "math", 8, [0.0, 0.5, 0.0, 0.0]),
]


def _import(run: Path, out: Path, *extra: str) -> int:
    return main(["import", "prime-rl", str(run), "--out", str(out), *extra])


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("snooze import: error: "), err
    return err


def test_a_reward_log_exported_to_prime_rl_and_imported_back_is_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "run", ROWS)
    assert _import(run, tmp_path / "r.jsonl") == 0
    log = read_reward_log(tmp_path / "r.jsonl")
    got = sorted(zip(log.steps.tolist(), log.datasets, log.ids, log.rewards.tolist()), key=str)
    want = sorted(((s, e, k, [float(x) for x in r]) for s, e, k, r in ROWS), key=str)
    assert got == want and log.steps.tolist() == sorted(log.steps.tolist())
    h = log.header
    assert (h.group_size, h.policy, h.dynamic_sampling, h.batch_size, h.source) == (
        4,
        "grpo",
        False,
        None,
        "snooze import prime-rl",
    )
    out = capsys.readouterr().out
    assert "7 groups of 4, steps 0..2, 4 prompts (keyed by task.key)" in out
    assert "not read: fields errors, id, run" in out  # the episode's own id, its errors, the run's provenance
    assert main(["replay", str(tmp_path / "r.jsonl"), "--out", str(tmp_path / "rep"), "--no-plot"]) == 0


def test_the_all_files_are_read_not_the_trained_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path / "run", ROWS)
    for step in (0, 1, 2):  # only the trained episodes left: the groups without spread are missing
        (run / "rollouts" / f"step_{step}" / "train" / "all" / "traces.jsonl").unlink()
    assert _import(run, tmp_path / "r.jsonl") == 2
    assert "only train/effective/traces.jsonl files" in _one_line_error(capsys)
    assert not (tmp_path / "r.jsonl").exists()


def _edit_first(run: Path, edit: dict | None = None, drop: str | None = None) -> None:
    path = run / "rollouts" / "step_0" / "train" / "all" / "traces.jsonl"
    lines = path.read_text().splitlines()
    obj = json.loads(lines[0])
    if drop:
        node = obj
        *parents, last = drop.split(".")
        for name in parents:
            node = node[name]
        del node[last]
    obj.update(edit or {})
    path.write_text("\n".join([json.dumps(obj), *lines[1:]]) + "\n")


def _edit_trace(run: Path, **edit: object) -> None:
    path = run / "rollouts" / "step_0" / "train" / "all" / "traces.jsonl"
    lines = path.read_text().splitlines()
    obj = json.loads(lines[0])
    obj["traces"][0].update(edit)
    path.write_text("\n".join([json.dumps(obj), *lines[1:]]) + "\n")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda run: _edit_first(run, drop="traces"), r"field 'traces': missing"),
        (lambda run: _edit_first(run, drop="group.id"), r"field 'group.id': missing"),
        (lambda run: _edit_first(run, drop="task.key"), r"field 'task.key': missing"),
        (
            lambda run: _edit_first(run, {"traces": [episode("gsm8k", "t1", "g", 0, 1.0)["traces"][0]] * 2}),
            r"2 trainable traces in one episode",
        ),
        (
            lambda run: (run / "rollouts" / "step_1" / "train" / "all" / "traces.jsonl").write_text('{"env": {'),
            r"step_1/train/all/traces.jsonl, line 1: truncated JSONL",
        ),
        # was an AttributeError ('str' object has no attribute 'get')
        (lambda run: _edit_trace(run, agent="x"), r"line 1, field 'traces\[0\]': its 'agent' is a str: a trace is"),
        (lambda run: _edit_trace(run, agent=["x"]), r"line 1, field 'traces\[0\]': its 'agent' is a list"),
        (lambda run: _edit_first(run, {"traces": ["x"]}), r"line 1, field 'traces\[0\]': a str: a trace is an object"),
        # ids the reward log's reader refuses (the import exited 0 and replay refused the log)
        (
            lambda run: _edit_first(run, {"task": {"key": 2**63}}),
            r"line 1, field 'task.key': 9223372036854775808 does not fit in a signed 64-bit integer",
        ),
        (
            lambda run: _edit_first(run, {"task": {"key": "t\ud800"}}),
            r"line 1, field 'task.key': 't\\ud800' holds a lone surrogate \(U\+D800\)",
        ),
        (
            lambda run: _edit_first(run, {"env": {"name": "gsm\udfff"}}),
            r"line 1, field 'env.name': 'gsm\\udfff' holds a lone surrogate",
        ),
        (
            lambda run: (run / "rollouts" / "step_2").rename(run / "rollouts" / "step_99999999999999999999"),
            r"step_99999999999999999999: the folder's step, 99999999999999999999 is not an integer in \[0, 2\*\*63",
        ),
    ],
)
def test_a_bad_record_is_one_error_naming_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make, message: str
) -> None:
    run = write_run(tmp_path / "run", ROWS)
    make(run)
    assert _import(run, tmp_path / "r.jsonl") == 2
    err = _one_line_error(capsys)
    assert re.search(message, err), err


def test_a_failed_episode_leaves_its_group_out_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [*ROWS, (2, "gsm8k", "t9", [1.0, None, 1.0, 0.0])]
    run = write_run(tmp_path / "run", rows)
    assert _import(run, tmp_path / "r.jsonl") == 2
    assert "is incomplete (1 rollout(s) not scored)" in _one_line_error(capsys)
    assert _import(run, tmp_path / "r.jsonl", "--drop-incomplete") == 0
    assert "not read: 1 incomplete group(s) left out" in capsys.readouterr().out
    assert len(read_reward_log(tmp_path / "r.jsonl")) == len(ROWS)


def test_mixed_group_sizes_an_empty_folder_and_a_missing_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mixed = write_run(tmp_path / "mixed", [*ROWS, (2, "code", "c1", [1.0, 0.0])])
    assert _import(mixed, tmp_path / "m.jsonl") == 2
    assert "the dump mixes group sizes (code: 2, gsm8k: 4, math: 4)" in _one_line_error(capsys)
    (tmp_path / "empty").mkdir()
    assert _import(tmp_path / "empty", tmp_path / "e.jsonl") == 2
    assert "no prime-rl episode files (an empty folder" in _one_line_error(capsys)
    gap = write_run(tmp_path / "gap", [r for r in ROWS if r[0] != 1])
    assert _import(gap, tmp_path / "g.jsonl") == 2
    assert "step(s) 1 missing between 0 and 2: the dump is partial" in _one_line_error(capsys)


def test_a_dump_whose_every_group_has_spread_is_refused_as_filtered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(0)
    rows = [(s, "gsm8k", f"t{i}", [1.0, 0.0] + rng.integers(0, 2, 2).tolist()) for s in range(4) for i in range(10)]
    run = write_run(tmp_path / "run", rows)
    assert _import(run, tmp_path / "r.jsonl") == 2
    err = _one_line_error(capsys)
    assert "every one of the 40 groups has reward spread" in err and "usable only for runs without the filter" in err
    assert _import(run, tmp_path / "r.jsonl", "--not-filtered") == 0


def test_integer_and_string_task_keys_of_one_environment_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "run", [*ROWS, (2, "math", "7", [0.0, 1.0, 0.0, 0.0])])  # math's 7 and "7"
    assert _import(run, tmp_path / "r.jsonl") == 2  # was 0, and replay counted them as two prompts
    err = _one_line_error(capsys)
    assert re.search(
        r"step_2/train/all/traces.jsonl, line \d+, the prompt's id \(task.key\): '7' is a string, but dataset 'math' "
        r"has the id 7 at .*step_0/train/all/traces.jsonl, line \d+: a dataset's ids must be all integers or all",
        err,
    ), err
    assert not (tmp_path / "r.jsonl").exists()

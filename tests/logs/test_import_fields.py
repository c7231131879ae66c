"""Importers check every field they read by one rule (``snooze.logs.importers._fields``), and read names and
folders as their frameworks write them (issue 51: defect 2 and the importers' minors; issue 53: --reward-field).

Each case was a traceback, a wrong count or a wrong error on the old code:

- verl ``uid`` a list or an object: ``TypeError: unhashable``; a uid whose output index has 5,000 digits:
  ``ValueError`` from ``int()``;
- ``\\d`` and ``$`` in the name patterns took Unicode digits (``١.jsonl``, ``step_١``) and a trailing newline;
- prime-rl ``trainable: "false"`` counted as trainable; ``ok: "false"`` as ok;
- prime-rl group ids reused by two runs merged by hand silently made groups of twice the size;
- a step folder whose groups all end in the next folder made a complete dump look partial;
- a read-only ``--out`` named the hidden temporary file, not the user's path;
- ``--out`` naming an existing file: ``snooze baseline`` wrote over it (``import`` needs ``--force``);
- ``--reward-field``: verl's older trainer's ``acc`` (a bool), prime-rl's named reward; the header records it.
"""

from __future__ import annotations

import builtins
import errno
import json
from pathlib import Path
from typing import Any

import pytest
from integrations._prime_rl_dump import episode

from snooze.cli.main import main
from snooze.logs import read_reward_log

G = 4


def _verl(folder: Path, steps: int = 3, **edit: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(1, steps + 1):
        rows = []
        for q in range(4):
            for r in range(G):
                row = {"input": f"q{q}", "score": float((r + q) % 2), "acc": (r + q) % 3 == 0, "step": s}
                row["uid"] = f"u{s}x{q}_{r}_0"
                rows.append(row)
        if s == 1:
            rows[0].update(edit)
        (folder / f"{s}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("snooze import: error: "), err
    return err


@pytest.mark.parametrize(
    ("uid", "message"),
    [
        (["a", "b"], r"line 1, field 'uid': \['a', 'b'\] is not a string or an integer"),
        ({"g": 1}, r"line 1, field 'uid': \{'g': 1\} is not a string or an integer"),
        ("u_0_" + "7" * 5000, r"line 1, field 'uid': the output index, <a number of 5,000 digits> is not an integer"),
        (1.5, r"field 'uid': 1\.5 is not a string or an integer"),
    ],
)
def test_verl_refuses_a_uid_of_a_type_it_does_not_expect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], uid: Any, message: str
) -> None:
    import re

    dump = _verl(tmp_path / "d", uid=uid)
    assert main(["import", "verl", str(dump), "--out", str(tmp_path / "r.jsonl")]) == 2
    assert re.search(message, _err(capsys))
    assert not (tmp_path / "r.jsonl").exists()


def test_names_are_read_in_ascii_digits_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = _verl(tmp_path / "d")
    for odd in ("\u0661.jsonl", "2.jsonl\n"):  # Arabic-Indic one; a trailing newline
        (dump / odd).write_bytes((dump / "1.jsonl").read_bytes())
    assert main(["import", "verl", str(dump), "--out", str(tmp_path / "r.jsonl")]) == 0  # was: two step-1 files
    out = capsys.readouterr().out
    assert "read 3 file(s)" in out and "not read: files" in out


def _prime(run: Path, groups: list[tuple[int, str, str, int, list[float]]], edit: dict | None = None) -> Path:
    """``groups``: (step of each episode's file, group id, task, first episode's step offset, rewards)."""
    for step, gid, key, spill, rewards in groups:
        for i, r in enumerate(rewards):
            ep = episode("gsm8k", key, gid, step, r)
            if edit and (step, gid, i) == (groups[0][0], groups[0][1], 0):
                ep["traces"][0]["agent"].update(edit.get("agent", {}))
                ep.update(edit.get("top", {}))
            at = step + (1 if i >= len(rewards) - spill else 0)  # the last `spill` episodes end in the next step
            path = run / "rollouts" / f"step_{at}" / "train" / "all" / "traces.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as handle:
                handle.write(json.dumps(ep) + "\n")
    return run


SPREAD = [1.0, 0.0, 1.0, 0.0]


def test_prime_rl_flags_are_real_bools(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for i, (edit, field) in enumerate(
        [({"agent": {"trainable": "false"}}, "traces[0].agent.trainable"), ({"top": {"ok": "false"}}, "ok")]
    ):
        run = _prime(tmp_path / f"r{i}", [(0, "g1", "t1", 0, SPREAD), (1, "g2", "t2", 0, SPREAD)], edit)
        assert main(["import", "prime-rl", str(run), "--out", str(tmp_path / f"o{i}.jsonl")]) == 2
        assert f"field '{field}': 'false' is not true or false" in _err(capsys)


def test_prime_rl_refuses_a_group_id_reused_by_two_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs' folders merged by hand, their group ids reused: appended into the same step folders (told by
    ``run.id``), or renamed to follow on (the id again steps later)."""
    groups = [(0, "g1", "t1", 0, SPREAD), (1, "g2", "t2", 0, SPREAD)]
    run = _prime(tmp_path / "r", groups)
    for step, path in ((0, "step_0"), (1, "step_1")):  # run 2's episodes appended to run 1's files
        with open(run / "rollouts" / path / "train" / "all" / "traces.jsonl", "a") as handle:
            for r in SPREAD:
                ep = episode("gsm8k", f"t{step + 1}", f"g{step + 1}", step, r)
                ep["run"]["id"] = "run-2"
                handle.write(json.dumps(ep) + "\n")
    assert main(["import", "prime-rl", str(run), "--out", str(tmp_path / "o.jsonl")]) == 2  # was: groups of 8
    err = _err(capsys)
    assert "field 'group.id': 'g1' was the group of task 't1' (gsm8k) at step 0 of run 'run-1'" in err
    assert "of run 'run-2' here" in err
    later = [(0, "g1", "t1", 0, SPREAD), *[(s, f"g{s + 1}", f"t{s + 1}", 0, SPREAD) for s in (1, 2, 3)]]
    run = _prime(tmp_path / "r2", [*later, (4, "g1", "t1", 0, SPREAD)])
    assert main(["import", "prime-rl", str(run), "--out", str(tmp_path / "o2.jsonl")]) == 2
    assert "'g1' was the group of task 't1' (gsm8k) at step 0 of run 'run-1', and names task 't1'" in _err(capsys)


def test_a_step_whose_groups_end_in_the_next_folder_is_not_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _prime(tmp_path / "r", [(0, "g1", "t1", 0, SPREAD), (1, "g2", "t2", 2, SPREAD), (2, "g3", "t3", 0, SPREAD)])
    assert main(["import", "prime-rl", str(run), "--out", str(tmp_path / "o.jsonl")]) == 0  # was: step 1 missing
    log = read_reward_log(tmp_path / "o.jsonl")
    assert log.steps.tolist() == [0, 2, 2] and log.header.caveats  # dynamic sampling: a guess, said so
    assert "dynamic_sampling false is a guess" in capsys.readouterr().err


def test_a_read_only_out_names_the_users_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dump, out = _verl(tmp_path / "d"), tmp_path / "o" / "r.jsonl"
    real = builtins.open

    def read_only(file: Any, mode: str = "r", *args: Any, **kw: Any) -> Any:
        if "w" in mode and Path(str(file)).parent == out.parent:
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real(file, mode, *args, **kw)

    monkeypatch.setattr(builtins, "open", read_only)  # (the tests run as root, which a chmod does not stop)
    assert main(["import", "verl", str(dump), "--out", str(out)]) == 2
    err = _err(capsys)
    assert f"{out}: the reward log could not be written (Permission denied)" in err and ".tmp-" not in err


def test_an_existing_out_is_not_written_over(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mine.jsonl"
    out.write_text("keep\n")
    assert main(["baseline", "--model", str(tmp_path / "absent.pt"), "--out", str(out)]) == 2
    assert "mine.jsonl: exists; pass --force" in capsys.readouterr().err and out.read_text() == "keep\n"
    assert main(["import", "verl", str(_verl(tmp_path / "d")), "--out", str(out)]) == 2
    assert out.read_text() == "keep\n"


def test_the_reward_field_is_read_and_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = _verl(tmp_path / "d")
    assert main(["import", "verl", str(dump), "--out", str(tmp_path / "a.jsonl"), "--reward-field", "acc"]) == 0
    log = read_reward_log(tmp_path / "a.jsonl")
    assert log.header.reward_field == "acc"
    assert log.rewards[0].tolist() == [1.0, 0.0, 0.0, 1.0]  # acc (true/false), not score ([0, 1, 0, 1])
    assert "rewards from field 'acc'" in capsys.readouterr().out
    assert main(["replay", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "rep"), "--no-plot"]) == 0
    assert "rewards: the dump's field 'acc'" in capsys.readouterr().out
    assert main(["import", "verl", str(dump), "--out", str(tmp_path / "b.jsonl"), "--reward-field", "nope"]) == 2
    assert "field 'nope': missing" in _err(capsys)
    run = tmp_path / "run"
    for s in range(2):
        path = run / "rollouts" / f"step_{s}" / "train" / "all" / "traces.jsonl"
        path.parent.mkdir(parents=True)
        eps = [episode("gsm8k", f"t{s}", f"g{s}", s, r) for r in SPREAD]
        for ep, penalty in zip(eps, (0.0, -0.5, 0.0, -0.25)):
            ep["traces"][0]["rewards"]["overlong"] = {"score": penalty, "weight": 1.0}
        path.write_text("".join(json.dumps(e) + "\n" for e in eps))
    name = next(iter(episode("gsm8k", "t", "g", 0, 1.0)["traces"][0]["rewards"]))
    assert main(["import", "prime-rl", str(run), "--out", str(tmp_path / "p.jsonl"), "--reward-field", name]) == 0
    p = read_reward_log(tmp_path / "p.jsonl")
    assert p.header.reward_field == name and p.rewards[0].tolist() == SPREAD  # the penalty left out
    assert main(["import", "prime-rl", str(run), "--out", str(tmp_path / "q.jsonl"), "--reward-range=-1,1"]) == 0
    assert read_reward_log(tmp_path / "q.jsonl").rewards[0].tolist() == [1.0, -0.5, 1.0, -0.25]  # the weighted sum

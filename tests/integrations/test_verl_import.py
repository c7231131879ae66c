"""``snooze import verl`` on dumps written by verl 0.9.1's own code (``_verl_dump``): the legacy trainer's
``_log_rollout_data`` on a real ``DataProto``, the v1 trainer's (uid keys, a fresh uid per prompt and step),
and verl's JSONL writer for the round trip; one clear error for each dump a replay cannot use."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("verl", reason="needs the [verl] extra")

from integrations import _verl_dump as vd  # noqa: E402
from snooze.cli.main import main  # noqa: E402
from snooze.logs import RewardLogHeader, RewardLogWriter, read_reward_log  # noqa: E402

pytestmark = pytest.mark.verl

G = 4
STEPS: dict[int, vd.Step] = {  # verl's global_steps start at 1
    1: [("q gsm 1", [1, 1, 1, 1], "a"), ("q gsm 2", [1, 0, 1, 0], "b"), ("q math 3", [0, 0, 0, 0], "c")],
    2: [("q gsm 1", [1, 1, 0, 1], "a"), ("q math 3", [0, 0, 1, 0], "c"), ("q math 4", [1, 1, 1, 1], "d")],
    3: [("q gsm 2", [1, 1, 1, 1], "b"), ("q math 3", [0, 0, 0, 0], "c"), ("q gsm 1", [1, 1, 1, 1], "a")],
}


def _groups(steps: dict[int, vd.Step]) -> list[tuple[int, str, list[float]]]:
    return sorted((s, text, [float(r) for r in rewards]) for s, groups in steps.items() for text, rewards, _ in groups)


def _import(dump: Path, out: Path, *extra: str) -> int:
    return main(["import", "verl", str(dump), "--out", str(out), *extra])


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("snooze import: error: "), err
    return err


@pytest.mark.parametrize("writer", ["dataproto", "v1"])
def test_a_dump_verl_wrote_imports_and_replays(
    writer: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = tmp_path / "rollouts"
    if writer == "dataproto":
        vd.dump_dataproto(dump, STEPS, vd.tokenizer())
    else:
        vd.dump_v1(dump, STEPS, vd.tokenizer(), monkeypatch)
    assert sorted(p.name for p in dump.iterdir()) == ["1.jsonl", "2.jsonl", "3.jsonl"]
    assert _import(dump, tmp_path / "r.jsonl") == 0
    out = capsys.readouterr().out
    assert "36 rollouts -> 9 groups of 4, steps 1..3, 4 prompts (keyed by prompt text)" in out
    assert "not read: fields gts, output" in out  # the responses and ground truths (and v1's uid, which is used)
    log = read_reward_log(tmp_path / "r.jsonl")
    assert sorted(zip(log.steps.tolist(), log.ids, log.rewards.tolist())) == _groups(STEPS)
    h = log.header
    assert (h.group_size, h.batch_size, h.gen_batch_size, h.policy, h.dynamic_sampling) == (4, 3, 3, "grpo", False)
    assert main(["replay", str(tmp_path / "r.jsonl"), "--out", str(tmp_path / "rep"), "--no-plot"]) == 0
    replayed = capsys.readouterr()
    assert "the comparison with DAPO does not apply" in replayed.err and "step sim: n/a" in replayed.out


def test_groups_are_a_uid_s_rollouts_so_a_prompt_twice_in_a_step_is_two_encounters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = {1: [("q gsm 1", [1, 0, 1, 1], "a"), ("q gsm 1", [1, 1, 1, 1], "a")], 2: [("q gsm 1", [0, 0, 0, 0], "a")]}
    vd.dump_v1(tmp_path / "v1", steps, vd.tokenizer(), monkeypatch)
    assert _import(tmp_path / "v1", tmp_path / "r.jsonl") == 0
    log = read_reward_log(tmp_path / "r.jsonl")
    assert log.steps.tolist() == [1, 1, 2] and sorted(map(sum, log.rewards.tolist())) == [0.0, 3.0, 4.0]


def _write_log(path: Path, ids: list[Any]) -> Path:
    """A reward log of 3 steps over two datasets (its header as the importer writes it)."""
    rng = np.random.default_rng(5)
    header = RewardLogHeader(group_size=G, batch_size=4, gen_batch_size=4, max_gen_rounds=1, policy="grpo")
    with RewardLogWriter(path, header=header) as log:
        for step in range(1, 4):
            pick = rng.choice(len(ids), size=4, replace=False)
            log.write(
                step,
                ["gsm" if i % 2 else "math" for i in pick],
                [ids[i] for i in pick],
                rng.integers(0, 2, size=(4, G)).astype(float),
            )
    return path


def _export(log_path: Path, folder: Path, text_ids: bool) -> None:
    """The reward log through verl's own JSONL writer, one step file a step: the prompt as ``input``, the dataset and
    the id as extra fields (as a reward function's extra info), keys ``{uid}_{rollout}_0``."""
    log = read_reward_log(log_path)
    for step in np.unique(log.steps).tolist():
        rows = np.flatnonzero(log.steps == step)
        rows_of = [(i, r) for i in rows.tolist() for r in range(G)]
        vd.write_generations(
            folder,
            step,
            {
                "input": [str(log.ids[i]) if text_ids else f"q {i}" for i, _ in rows_of],
                "score": [float(log.rewards[i, r]) for i, r in rows_of],
                "data_source": [log.datasets[i] for i, _ in rows_of],
                "index": [log.ids[i] for i, _ in rows_of],
                "uid": [f"u{step}x{i}_{r}_0" for i, r in rows_of],
            },
        )


@pytest.mark.parametrize("text_ids", [True, False], ids=["keyed-by-text", "keyed-by-index"])
def test_a_reward_log_exported_to_verl_and_imported_back_is_identical(tmp_path: Path, text_ids: bool) -> None:
    ids: list[Any] = [f"q gsm {i}" for i in range(8)] if text_ids else list(range(100, 108))
    original = _write_log(tmp_path / "orig.jsonl", ids)
    _export(original, tmp_path / "dump", text_ids)
    assert _import(tmp_path / "dump", tmp_path / "back.jsonl", *([] if text_ids else ["--id-field", "index"])) == 0
    a, b = read_reward_log(original), read_reward_log(tmp_path / "back.jsonl")
    assert (a.steps.tolist(), a.datasets, a.ids) == (b.steps.tolist(), b.datasets, b.ids)
    assert np.array_equal(a.rewards, b.rewards) and a.header.group_size == b.header.group_size  # type: ignore[union-attr]
    assert original.read_text().splitlines()[1:] == (tmp_path / "back.jsonl").read_text().splitlines()[1:]


def _cut_last_line(dump: Path) -> None:
    path = dump / "3.jsonl"
    path.write_bytes(path.read_bytes()[:-20])


def _drop_field(dump: Path, field: str) -> None:
    import json

    path = dump / "2.jsonl"
    lines = path.read_text().splitlines()
    obj = json.loads(lines[4])
    del obj[field]
    lines[4] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n")


def _drop_line(dump: Path) -> None:
    path = dump / "2.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2] + lines[3:]))


BAD = [
    (_cut_last_line, r"3\.jsonl, line 12: truncated JSONL"),
    (lambda d: _drop_field(d, "score"), r"2\.jsonl, line 5, field 'score': missing"),
    (lambda d: _drop_field(d, "input"), r"2\.jsonl, line 5, field 'input': missing"),
    (_drop_line, r"is incomplete \(3 of 4 rollouts\): the dump is partial"),
    (lambda d: (d / "2.jsonl").unlink(), r"step\(s\) 2 missing between 1 and 3: the dump is partial"),
    (lambda d: [p.unlink() for p in d.iterdir()], r"no verl rollout dump here \(an empty folder"),
]


@pytest.mark.parametrize(
    ("damage", "message"), BAD, ids=["truncated", "no-score", "no-input", "partial-group", "missing-step", "empty"]
)
def test_a_damaged_dump_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], damage, message) -> None:
    vd.dump_dataproto(tmp_path / "d", STEPS, vd.tokenizer())
    damage(tmp_path / "d")
    assert _import(tmp_path / "d", tmp_path / "r.jsonl") == 2
    err = _one_line_error(capsys)
    assert re.search(message, err), err
    assert not (tmp_path / "r.jsonl").exists()


def test_mixed_group_sizes_and_a_filtered_dump_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mixed = {1: [("q gsm 1", [1, 0, 1, 1], "a"), ("q gsm 2", [1, 0], "b")], 2: [("q gsm 3", [0, 1], "c")]}
    vd.dump_dataproto(tmp_path / "mixed", mixed, vd.tokenizer())
    assert _import(tmp_path / "mixed", tmp_path / "m.jsonl") == 2
    assert "the dump mixes group sizes, or the batch held the prompt twice" in _one_line_error(capsys)
    assert _import(tmp_path / "mixed", tmp_path / "m.jsonl", "--group-size", "2") == 0  # the prompt twice: 2 groups
    assert read_reward_log(tmp_path / "m.jsonl").steps.tolist() == [1, 1, 1, 2]
    # DAPO's filter on: verl dumps only the trained batch, every group with spread
    rng = np.random.default_rng(0)
    kept = {s: [(f"q gsm {i}", [1, 0, *rng.integers(0, 2, 2).tolist()], "x") for i in range(12)] for s in (1, 2, 3)}
    vd.dump_dataproto(tmp_path / "filtered", kept, vd.tokenizer())
    assert _import(tmp_path / "filtered", tmp_path / "f.jsonl") == 2
    err = _one_line_error(capsys)
    assert "every one of the 36 groups has reward spread" in err and "algorithm.filter_groups.enable=True" in err
    assert _import(tmp_path / "filtered", tmp_path / "f.jsonl", "--not-filtered") == 0

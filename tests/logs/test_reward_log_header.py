"""The reward log's header line: written by the writers, read back, kept on a cut-back, checked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import snooze
from snooze.logs import RewardLogHeader, RewardLogWriter, read_reward_log, truncate_log


def _header(**kw: object) -> RewardLogHeader:
    base = dict(group_size=2, batch_size=4, gen_batch_size=4, max_gen_rounds=3, policy="dynamic_sampling")
    return RewardLogHeader(**{**base, "dynamic_sampling": True, "source": "test", **kw})  # type: ignore[arg-type]


def _log(path: Path, header: RewardLogHeader | None, steps: int = 3) -> Path:
    with RewardLogWriter(path, header=header) as log:
        for step in range(steps):
            log.write(step, ["d", "d"], [f"a{step}", f"b{step}"], [[1.0, 0.0], [1.0, 1.0]])
    return path


def test_the_header_is_the_first_line_and_reads_back(tmp_path: Path) -> None:
    path = _log(tmp_path / "r.jsonl", _header(options={"factor": 5}))
    first = json.loads(path.read_text().splitlines()[0])
    assert first["format"] == "snooze-reward-log" and first["version"] == 1 and first["reward_range"] == [0.0, 1.0]
    log = read_reward_log(path)
    assert log.header == _header(options={"factor": 5}) and len(log) == 6
    assert int(log.lines[0]) == 2  # the groups' line numbers count the header


def test_a_cut_back_keeps_the_header_and_an_appending_writer_writes_none(tmp_path: Path) -> None:
    path = _log(tmp_path / "r.jsonl", _header())
    assert truncate_log(path, 1) == 4
    with RewardLogWriter(path, append=True, header=_header()) as log:  # a resumed run: the log has its header
        log.write(1, ["d"], ["c"], [[0.0, 1.0]])
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["format"] == "snooze-reward-log" and len(lines) == 4
    assert read_reward_log(path).steps.tolist() == [0, 0, 1]


def test_the_header_of_a_scheduler_config_names_its_loop_and_policy() -> None:
    grpo = RewardLogHeader.of_config(snooze.SchedulerConfig(batch_size=8, group_size=4, policy="grpo"), "x")
    assert (grpo.batch_size, grpo.gen_batch_size, grpo.dynamic_sampling, grpo.options) == (8, 8, False, {})
    cfg = snooze.SchedulerConfig(batch_size=8, gen_batch_size=12, policy="snooze", options={"factor": 3})
    sn = RewardLogHeader.of_config(cfg, "x")
    assert (sn.gen_batch_size, sn.max_gen_rounds, sn.dynamic_sampling, sn.options["factor"]) == (12, 8, True, 3)
    # with partial groups a round asks batch_size * G / k screens, but the log holds whole groups: its header keeps
    # DAPO's round of whole groups, which replay's DAPO counterfactual reads
    screened = snooze.SchedulerConfig(batch_size=8, group_size=8, screen_size=4, policy="dynamic_sampling")
    assert screened.gen_size == 16
    assert RewardLogHeader.of_config(screened, "x").gen_batch_size == 8


def test_the_reward_range_comes_from_the_header(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RewardLogWriter(path, header=_header(reward_range=(-1.0, 1.0))) as log:
        log.write(0, ["d"], ["a"], [[-1.0, 1.0]])
    assert read_reward_log(path).rewards.tolist() == [[-1.0, 1.0]]  # [0, 1] would refuse -1
    with pytest.raises(snooze.DataError, match=r"outside the reward range \[0.0, 1.0\]"):
        read_reward_log(path, reward_range=(0.0, 1.0))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"version": 2}, r"line 1 \(the header\), field 'version': 2: this snooze reads version 1 headers"),
        ({"group_size": 1}, r"field 'group_size': 1: must be an integer >= 2"),
        ({"batch_size": 0}, r"field 'batch_size': 0: must be an integer >= 1, or null when not known"),
        ({"reward_range": [1, 0]}, r"field 'reward_range': \[1, 0\]: must be \[low, high\], low < high"),
        ({"dynamic_sampling": "yes"}, r"field 'dynamic_sampling': 'yes': must be true, false or null"),
        ({"group_size": 3}, r"line 2, field 'rewards': 2 rewards, but the header has 3"),
        ({"version": True}, r"field 'version': True: this snooze reads version 1 headers"),  # (True == 1 in Python)
        ({"version": 1.0}, r"field 'version': 1\.0: this snooze reads version 1 headers"),
        # sizes the command line would refuse (replay died of an OverflowError): at most 2**63 - 1, as --batch-size
        (
            {"gen_batch_size": 10**20},
            r"field 'gen_batch_size': 100000000000000000000: must be an integer in \[1, 2\*\*63 - 1\]",
        ),
        (
            {"batch_size": 2**63},
            r"field 'batch_size': 9223372036854775808: must be an integer in \[1, 2\*\*63 - 1\], or null",
        ),
        (
            {"max_gen_rounds": 2**64},
            r"field 'max_gen_rounds': 18446744073709551616: must be an integer in \[1, 2\*\*63",
        ),
        ({"group_size": 2**63}, r"field 'group_size': 9223372036854775808: must be an integer in \[2, 2\*\*63 - 1\]"),
    ],
)
def test_a_bad_header_names_its_field(tmp_path: Path, edit: dict, message: str) -> None:
    path = _log(tmp_path / "r.jsonl", _header())
    lines = path.read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), **edit})
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(snooze.DataError, match=message):
        read_reward_log(path)


def test_the_largest_sizes_the_command_line_takes_are_read(tmp_path: Path) -> None:
    path = _log(tmp_path / "r.jsonl", _header(batch_size=2**63 - 1, gen_batch_size=2**63 - 1))
    assert read_reward_log(path).header.sizes()["gen_batch_size"] == 2**63 - 1  # type: ignore[union-attr]


def test_a_header_elsewhere_or_against_group_size_is_refused(tmp_path: Path) -> None:
    path = _log(tmp_path / "r.jsonl", _header())
    with pytest.raises(snooze.DataError, match=r"the header says groups of 2, but 3 was asked for"):
        read_reward_log(path, group_size=3)
    joined = tmp_path / "joined.jsonl"
    joined.write_text(path.read_text() * 2)
    with pytest.raises(snooze.DataError, match=r"line 8, field 'format': a header can only be the first line"):
        read_reward_log(joined)


def test_unknown_header_fields_are_kept_and_a_log_without_header_still_reads(tmp_path: Path) -> None:
    path = _log(tmp_path / "r.jsonl", _header(extra={"note": "hand-made"}))
    assert read_reward_log(path).header.extra == {"note": "hand-made"}  # type: ignore[union-attr]
    bare = _log(tmp_path / "bare.jsonl", None)
    log = read_reward_log(bare)
    assert log.header is None and np.array_equal(log.rewards, read_reward_log(path).rewards)

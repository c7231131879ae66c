"""docs/your-run.md's commands, run as written on dumps made by the frameworks' own writers, print what it shows.

The folder holds what a finished run leaves: ``rollouts/`` (verl 0.9.1's dump code on a real ``DataProto``:
``integrations._verl_dump``), ``runs/trl/rewards.jsonl`` (a real TRL ``GRPOTrainer.train()`` with
``RewardLogger``, the page's Python block with a tiny Llama) and ``outputs/my-run`` (prime-rl's episode files,
``integrations._prime_rl_dump``). Each ``bash`` block's commands run in it, in order; the ``text`` block after
one holds lines its output must show, in order (``...`` stands for lines left out; a ``WARNING:`` line is
looked for on stderr). The replay of the verl dump must hold the verdict block before its headline, and the verl
lines it prints must pass ``snooze check-verl`` beside a small run's own overrides (issue 53).
"""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="needs the [verl] extra")
pytest.importorskip("trl", reason="needs the [trl] extra")

from integrations import _trl_tiny as tiny  # noqa: E402
from integrations import _verl_dump as vd  # noqa: E402
from integrations._prime_rl_dump import write_run  # noqa: E402
from integrations._verl_env import make_model_dir, make_parquet  # noqa: E402

from snooze.cli.main import main  # noqa: E402

pytestmark = [pytest.mark.verl, pytest.mark.trl]

PAGE = Path(__file__).resolve().parents[1] / "docs" / "your-run.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def accuracy_reward(completions: list[str], **kwargs: Any) -> list[float]:
    return [float("is" in c.split()) for c in completions]


def format_reward(completions: list[str], **kwargs: Any) -> list[float]:
    return [float(len(c.split()) % 2) for c in completions]


def _trl_run(folder: Path) -> None:
    """The page's Python block, with the tiny model and prompts of the TRL tests."""
    from trl import GRPOConfig, GRPOTrainer

    from snooze.integrations.trl import RewardLogger

    logger = RewardLogger(folder / "runs" / "trl" / "rewards.jsonl")
    args = GRPOConfig(
        output_dir=str(folder / "runs" / "trl"),
        num_generations=4,
        per_device_train_batch_size=8,
        reward_weights=[1.0, 0.2],
        log_completions=True,
        max_steps=18,
        max_completion_length=5,
        report_to="none",
        use_cpu=True,
        bf16=False,
        disable_tqdm=True,
        save_strategy="no",
    )
    trainer = GRPOTrainer(
        model=tiny.save(tiny.causal_lm(), folder / "model"),
        reward_funcs=logger.wrap([accuracy_reward, format_reward]),
        args=args,
        train_dataset=tiny.prompts(),
        callbacks=[logger],
    )
    trainer.train()


def _dumps(folder: Path) -> None:
    steps = vd.example_steps(steps=16, prompts=48, per_step=12)
    vd.dump_dataproto(folder / "rollouts", steps, vd.tokenizer())
    rows = [
        (s, "gsm8k" if int(text.split()[-1]) % 2 else "math", "task-" + text.split()[-1], rewards)
        for s, groups in steps.items()
        for text, rewards, _ in groups
    ]
    write_run(folder / "outputs" / "my-run", rows)
    _trl_run(folder)


def _blocks() -> list[tuple[list[str], list[str]]]:
    """Each bash block's commands and the lines of the text block right after it (none: no check)."""
    found = BLOCK.findall(PAGE.read_text())
    out = []
    for i, (lang, body) in enumerate(found):
        if lang != "bash":
            continue
        commands = [x.split(" #", 1)[0].strip() for x in body.splitlines()]
        after = found[i + 1] if i + 1 < len(found) and found[i + 1][0] == "text" else ("text", "")
        out.append(([c for c in commands if c], after[1].splitlines()))
    return out


def _run(command: str, capsys: pytest.CaptureFixture[str]) -> tuple[list[str], list[str]]:
    argv = shlex.split(command)
    if argv[0] == "head":  # head -n N FILE
        return Path(argv[3]).read_text().splitlines()[: int(argv[2])], []
    assert argv[0] == "snooze", f"docs/your-run.md: a command the test does not run: {command}"
    assert main(argv[1:]) == 0, f"{command} failed: {capsys.readouterr().err}"
    out, err = capsys.readouterr()
    return out.splitlines(), err.splitlines()


def _shows(expected: list[str], out: list[str], err: list[str], command: str) -> None:
    at = 0
    for line in expected:
        if line.strip() == "..." or not line.strip():
            continue
        if line.startswith("WARNING:"):
            assert line in err, f"{command}: stderr does not show\n{line}\nbut\n" + "\n".join(err)
            continue
        stripped = [x.rstrip() for x in out]
        assert line.rstrip() in stripped[at:], f"{command}: does not show (in order)\n{line}\nin\n" + "\n".join(out)
        at = stripped.index(line.rstrip(), at) + 1


@pytest.mark.timeout(600)
def test_every_command_of_the_page_shows_what_the_page_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _dumps(tmp_path)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    blocks = _blocks()
    assert len(blocks) >= 5, "the page lost its commands: the parser is broken"
    t0 = time.perf_counter()
    printed: dict[str, list[str]] = {}
    for commands, expected in blocks:
        for command in commands:
            out, err = _run(command, capsys)
            printed[command] = out
            if command == commands[-1] and expected:
                _shows(expected, out, err, command)
    assert time.perf_counter() - t0 < 120  # the page says each command runs in seconds
    assert (tmp_path / "replay" / "replay.json").is_file()
    _the_verdict_holds(tmp_path, next(v for k, v in printed.items() if k.startswith("snooze replay rewards.jsonl")))
    assert main(["check-verl", *_small_verl_run(tmp_path), *_pasted(printed)]) == 0, capsys.readouterr().out
    report = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert report == ["ok"] * 7  # compose, trainer mode, plug-in, validate_config, options, resume, data


def _the_verdict_holds(folder: Path, out: list[str]) -> None:
    """The replay of the verl dump opens with the verdict: DAPO's rounds, the rule, the saving, the costs, the lines."""
    top = out.index("verdict")
    assert top < next(i for i, x in enumerate(out) if x.startswith("rollouts each policy"))
    block = "\n".join(out[top:])
    said = ("DAPO's rounds per step on this run", "    early: ", "    late: ", "the docs' rule", "-43.4", "next: ")
    for words in (*said, "the recommended setting (snooze factor 1, the surplus carried) would save"):
        assert words in block, words
    verdict = json.loads((folder / "replay" / "replay.json").read_text())["verdict"]
    assert verdict["framework"] == "verl" and verdict["dapo_rounds"]["basis"] == "estimated"


def _pasted(printed: dict[str, list[str]]) -> list[str]:
    """The verl lines the replay of the verl dump printed under its ``next:`` line."""
    out = next(v for k, v in printed.items() if k.startswith("snooze replay rewards.jsonl"))
    at = next(i for i, x in enumerate(out) if x.startswith("  next: ")) + 1
    lines = []
    while at < len(out) and out[at].startswith("    "):
        lines.append(out[at].strip())
        at += 1
    assert lines and lines[0] == "trainer.v1.trainer_mode=snooze", lines
    return lines


def _small_verl_run(folder: Path) -> list[str]:
    """A small verl run's own overrides, local data and model, no snooze setting: what the lines are added to."""
    (folder / "verl").mkdir()
    data = make_parquet(folder / "verl")
    return [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={data}",
        f"data.val_files={data}",
        "data.train_batch_size=2",
        f"actor_rollout_ref.model.path={make_model_dir(folder / 'verl')}",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
        "trainer.n_gpus_per_node=1",
        f"trainer.default_local_dir={folder / 'verl' / 'ckpt'}",
    ]

"""docs/your-run.md's commands, run as written on dumps made by the frameworks' own writers, print what it shows.

The folder holds what a finished run leaves: ``rollouts/`` (verl 0.9.1's dump code on a real ``DataProto``:
``integrations._verl_dump``), ``runs/trl/rewards.jsonl`` (a real TRL ``GRPOTrainer.train()`` with
``RewardLogger``, the page's Python block with a tiny Llama) and ``outputs/my-run`` (prime-rl's episode files,
``integrations._prime_rl_dump``). Each ``bash`` block's commands run in it, in order; the ``text`` block after
one holds lines its output must show, in order (``...`` stands for lines left out; a ``WARNING:`` line is
looked for on stderr).
"""

from __future__ import annotations

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
    for commands, expected in blocks:
        for command in commands:
            out, err = _run(command, capsys)
            if command == commands[-1] and expected:
                _shows(expected, out, err, command)
    assert time.perf_counter() - t0 < 120  # the page says each command runs in seconds
    assert (tmp_path / "replay" / "replay.json").is_file()

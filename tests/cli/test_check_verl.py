"""``snooze check-verl``: the example of docs/integrations/verl.md passes as printed, and no step's line goes missing
when an earlier one fails (issue 53: ``ppo_micro_batch_size`` made the example fail; the ``data`` line vanished)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="needs the [verl] extra")

from integrations._verl_env import make_model_dir, make_parquet  # noqa: E402

from snooze.cli.main import main  # noqa: E402

pytestmark = [pytest.mark.verl, pytest.mark.timeout(300)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "verl.md"
STEPS = ("compose", "trainer mode", "plug-in", "validate_config", "options", "resume", "data")


def _report(out: str) -> list[tuple[str, str, str]]:
    rows = []
    for line in out.splitlines():
        status, rest = line.split(None, 1)
        step = next(s for s in STEPS if rest.startswith(s))
        rows.append((status, step, rest[len(step) :].strip()))
    return rows


def _documented(tmp_path: Path) -> list[str]:
    """The page's ``snooze check-verl`` example, its ``$DATA`` and ``$MODEL`` made here."""
    block = next(b for b in DOC.read_text().split("```bash")[1:] if b.lstrip().startswith("snooze check-verl"))
    words = shlex.split(block.split("```")[0].replace("\\\n", " "))
    assert words[:2] == ["snooze", "check-verl"]
    (tmp_path / "data").mkdir()
    make_parquet(tmp_path / "data")
    make_parquet(tmp_path / "data", name="test")
    model = make_model_dir(tmp_path)
    out = [w.replace("$DATA", str(tmp_path / "data")).replace("$MODEL", str(model)) for w in words[2:]]
    return [*out, f"trainer.default_local_dir={tmp_path / 'ckpt'}"]  # (verl's default is relative: not the checkout)


def test_the_pages_example_passes_as_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    overrides = _documented(tmp_path)
    assert main(["check-verl", *overrides]) == 0, capsys.readouterr()
    assert [(s, step) for s, step, _ in _report(capsys.readouterr().out)] == [("ok", step) for step in STEPS]


def test_a_failed_validate_config_keeps_the_data_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    overrides = [o for o in _documented(tmp_path) if "micro_batch_size" not in o]  # the example before issue 53
    assert main(["check-verl", *overrides]) == 2
    report = _report(capsys.readouterr().out)
    assert [step for _, step, _ in report] == list(STEPS)  # every step has its line
    status = {step: (s, d) for s, step, d in report}
    assert status["validate_config"][0] == "ERROR" and "micro_batch_size" in status["validate_config"][1]
    assert status["data"] == (
        "skipped",
        "not checked: the trainer is built only from a config the steps above pass (validate_config failed)",
    )


def test_no_snooze_mode_says_what_was_not_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    overrides = [o for o in _documented(tmp_path) if not o.startswith("trainer.v1.trainer_mode")]
    assert main(["check-verl", *overrides]) == 2
    report = _report(capsys.readouterr().out)
    assert [step for _, step, _ in report] == list(STEPS)
    assert all(s == "skipped" and "names no snooze trainer" in d for s, step, d in report[-3:])

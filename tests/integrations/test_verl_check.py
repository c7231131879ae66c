"""``snooze check-verl OVERRIDES...``: verl 0.9.1's config composed with the overrides, checked as verl's
``main_ppo`` and the snooze trainer would check it, on this machine, with nothing started (no Ray)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="needs the [verl] extra")

from integrations._verl_env import B, G, documented_command, make_model_dir, make_parquet  # noqa: E402
from snooze.cli.main import main  # noqa: E402

pytestmark = [pytest.mark.verl, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


def _base(tmp: Path, data: Path | None = None) -> list[str]:
    """A small run's overrides (local data and model): valid for verl, no snooze settings yet."""
    data = data or make_parquet(tmp)
    model = make_model_dir(tmp)
    return [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={data}",
        f"data.val_files={data}",
        f"data.train_batch_size={B}",
        f"actor_rollout_ref.model.path={model}",
        f"actor_rollout_ref.rollout.n={G}",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
        "trainer.n_gpus_per_node=1",
        f"trainer.default_local_dir={tmp / 'ckpt'}",
    ]


def _lines(out: str) -> list[tuple[str, str, str]]:
    """The report: (status, step, detail) per line."""
    rows = []
    for line in out.splitlines():
        status, rest = line.split(None, 1)
        step = next(s for s in ("compose", "trainer mode", "plug-in", "validate_config", "options", "resume", "data")
                    if rest.startswith(s))  # fmt: skip
        rows.append((status, step, rest[len(step) :].strip()))
    return rows


def test_the_documented_command_passes_every_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_model_dir(tmp_path)
    assert main(["check-verl", *documented_command(tmp_path)]) == 0
    report = _lines(capsys.readouterr().out)
    assert [(s, step) for s, step, _ in report] == [
        ("ok", "compose"),
        ("ok", "trainer mode"),
        ("ok", "plug-in"),
        ("ok", "validate_config"),
        ("ok", "options"),
        ("ok", "resume"),
        ("ok", "data"),
    ]
    details = dict((step, d) for _, step, d in report)
    assert (
        "policy=snooze" in details["options"]
        and "batch_size=256, gen_batch_size=256, group_size=8" in details["options"]
    )  # read from data.train_batch_size, data.gen_batch_size and rollout.n, as the trainer reads them
    assert details["data"].endswith("(gsm: 4, math: 2)")  # the rows of the parquet file, by data_source


def test_bad_overrides_are_each_reported_and_nothing_raises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = [
        "trainer.v1.trainer_mode=snooze_colocate_async",
        "+trainer.v1.snooze.policy=snooze",
        "+trainer.v1.snooze.options.factr=1",  # a typo of factor
        "algorithm.filter_groups.enable=True",  # verl's own DAPO loop beside the scheduler's
        "+trainer.v1.snooze.on_short=pad",  # refused in the async modes
        "+trainer.v1.snooze.seed=-1",
        "trainer.resume_mode=resume_path",
        f"trainer.resume_from_path={tmp_path}/gone/global_step_3",
    ]
    assert main(["check-verl", *_base(tmp_path), *bad]) == 2
    captured = capsys.readouterr()
    errors = [(step, d) for s, step, d in _lines(captured.out) if s == "ERROR"]
    assert [step for step, _ in errors] == ["options"] * 4 + ["resume"]
    said = " ".join(d for _, d in errors)
    for words in ("algorithm.filter_groups.enable=False", "did you mean 'factor'", "on_short=pad cannot work",
                  "seed=-1: must be an integer >= 0", "does not exist"):  # fmt: skip
        assert words in said
    assert "snooze check-verl: error: 5 problem(s)" in captured.err and "Traceback" not in captured.err
    data = [(s, d) for s, step, d in _lines(captured.out) if step == "data"]  # no trainer built from a refused config,
    assert data == [("skipped", "not checked: the trainer is built only from a config the steps above pass "
                     "(options, resume failed)")]  # and the line says so (issue 53)  # fmt: skip


def test_independent_option_errors_are_all_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """rollout.n left at 1 hid the bad policy, the misplaced batch_size and the bad weights: one error shown."""
    overrides = [o for o in _base(tmp_path) if not o.startswith("actor_rollout_ref.rollout.n=")]
    bad = ["trainer.v1.trainer_mode=snooze", "+trainer.v1.snooze.policy=bogus", "+trainer.v1.snooze.batch_size=3",
           "+trainer.v1.snooze.weights=5", "+trainer.v1.snooze.seed=-1"]  # fmt: skip
    assert main(["check-verl", *overrides, *bad]) == 2
    captured = capsys.readouterr()
    errors = [d for s, step, d in _lines(captured.out) if s == "ERROR" and step == "options"]
    said = " ".join(errors)
    for words in ("actor_rollout_ref.rollout.n=1: must be an integer in [2,", "policy='bogus': must be one of",
                  "batch_size is read from verl's data.train_batch_size", "weights=5: must map each data_source",
                  "seed=-1: must be an integer >= 0"):  # fmt: skip
        assert words in said, errors
    assert len(errors) == 5 and "5 problem(s)" in captured.err


@pytest.mark.parametrize(
    ("overrides", "step", "says"),
    [
        (["+trainer.v1.snooze.policy=snooze"], "trainer mode", "trainer.v1.trainer_mode=sync: verl runs its own"),
        (["trainer.v1.trainer_mode=snooze", "trainer.v1.snooze.policy=snooze"], "compose", "use +trainer.v1.snooze"),
        (["trainer.v1.trainer_mode=snooze", "data.train_batch_size=3"], "validate_config", "must be divisible"),
    ],
    ids=["not-snooze-mode", "missing-plus", "verl-validate"],
)
def test_a_single_mistake_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], overrides: list[str], step: str, says: str
) -> None:
    overrides = [*_base(tmp_path), *overrides]
    if step == "validate_config":
        overrides = [o for o in overrides if not o.startswith("trainer.n_gpus_per_node")] + [
            "trainer.n_gpus_per_node=8"
        ]
    assert main(["check-verl", *overrides]) == 2
    errors = [(s, d) for status, s, d in _lines(capsys.readouterr().out) if status == "ERROR"]
    assert len(errors) == 1 and errors[0][0] == step and says in errors[0][1], errors


def test_data_without_stable_ids_is_found_and_data_elsewhere_is_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    no_index = make_parquet(tmp_path, index=False, name="noindex")
    assert main(["check-verl", *_base(tmp_path, no_index), "trainer.v1.trainer_mode=snooze"]) == 2
    errors = [d for status, s, d in _lines(capsys.readouterr().out) if status == "ERROR" and s == "data"]
    assert len(errors) == 1 and "extra_info" in errors[0]
    elsewhere = [o for o in _base(tmp_path) if not o.startswith("data.train_files")]
    assert (
        main(
            [
                "check-verl",
                *elsewhere,
                "data.train_files=/cluster/gsm8k/train.parquet",
                "trainer.v1.trainer_mode=snooze",
            ]
        )
        == 0
    )
    report = _lines(capsys.readouterr().out)
    assert report[-1][:2] == ("skipped", "data") and "/cluster/gsm8k/train.parquet" in report[-1][2]


def test_the_plugin_that_verl_would_not_load_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_USE_EXTERNAL_PLUGINS", "none")
    monkeypatch.delenv("VERL_USE_EXTERNAL_MODULES", raising=False)
    assert main(["check-verl", *_base(tmp_path), "trainer.v1.trainer_mode=snooze"]) == 2
    errors = [d for status, s, d in _lines(capsys.readouterr().out) if status == "ERROR"]
    assert len(errors) == 1 and "VERL_USE_EXTERNAL_PLUGINS=none" in errors[0]
    monkeypatch.setenv("VERL_USE_EXTERNAL_MODULES", "snooze.integrations.verl")
    assert main(["check-verl", *_base(tmp_path), "trainer.v1.trainer_mode=snooze"]) == 0


def test_the_installed_command_prints_no_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "snooze.cli.main", "check-verl", "trainer.v1.no_such_key=1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=240,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stdout.startswith("ERROR    compose") and "no_such_key" in done.stdout

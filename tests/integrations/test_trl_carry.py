"""``carry_surplus`` in ``SnoozeGRPOTrainer``, a real TRL run on the tiny local model: the signal groups a step's
last round found beyond its batch are trained at the next step (from the completions the trainer kept), and a
resume, whose checkpoint does not hold those completions, gives them up with a warning and generates in their
place, so the resumed step still trains on a full batch."""

from __future__ import annotations

import logging
import zlib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="needs the [trl] extra")
pytest.importorskip("torch")

from integrations import _trl_tiny as tiny  # noqa: E402

pytestmark = [pytest.mark.trl, pytest.mark.usefixtures("one_thread")]

G = 4
RECORDS = [{"id": f"m{i}", "prompt": line} for i, line in enumerate(tiny.LINES)]
CARRY = {"policy": "dynamic_sampling", "carry_surplus": True, "gen_batch_size": 4}  # rounds of 4 groups, batch of 2


def _signal(completions: list[Any], id: list[str], **kwargs: Any) -> list[float]:
    return [float(zlib.crc32(c.encode()) % 2) for c in completions]  # a coin per completion: most groups have signal


def _trainer(model_name: str, out: Path, steps: int, batches: list[Any], config: Any = None) -> Any:
    from datasets import Dataset
    from trl import GRPOConfig

    from snooze.integrations.trl import SnoozeGRPOTrainer

    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=8,  # 8 rows a step: 2 groups of 4
        num_generations=G,
        max_completion_length=4,
        max_steps=steps,
        learning_rate=0.05,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="steps",
        save_steps=2,
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
    )
    return SnoozeGRPOTrainer(
        model=model_name,
        reward_funcs=_signal,
        args=args,
        train_dataset=Dataset.from_list(RECORDS),
        snooze_config=CARRY if config is None else config,
        on_batch=batches.append,
    )


def test_the_surplus_is_trained_next_step_and_a_resume_generates_in_its_place(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model_name = tiny.save(tiny.causal_lm(), tmp_path / "lm")
    batches: list[Any] = []
    _trainer(model_name, tmp_path / "out", 4, batches).train()
    carried_in = [int(b.record.carried_in[b.record.where("trained")].sum()) for b in batches]
    rounds = [int(b.metrics["gen/rounds"]) for b in batches]
    assert len(batches) == 4 and all(len(b.candidates) == 2 for b in batches)
    assert any(carried_in), carried_in  # surplus groups of a step were trained at the next one...
    assert all(r == 0 for r, c in zip(rounds, carried_in) if c == 2)  # ...with no round when they filled it
    assert batches[1].record.tickets("carried").size or carried_in[2] == 0  # step 3 starts with step 2's surplus

    resumed: list[Any] = []
    with caplog.at_level(logging.WARNING, logger="snooze.integrations.trl._trainer"):
        _trainer(model_name, tmp_path / "out", 4, resumed).train(
            resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-2")
        )
    lost = carried_in[2]  # the surplus of step 2 that step 3's batch took (the rest was discarded there)
    assert len(resumed) == 2 and all(len(b.candidates) == 2 for b in resumed)  # full batches after the resume
    assert lost > 0  # (deterministic on seed 0: the resume does lose carried groups)
    assert f"{lost} group(s) carried into step 2 (carry_surplus) were lost with the restart" in caplog.text
    assert int(resumed[0].metrics["gen/rounds"]) >= 1  # generated in their place
    assert not resumed[0].record.carried_in[resumed[0].record.where("trained")].any()


def test_the_recommended_setting_as_the_docs_pass_it(tmp_path: Path) -> None:
    """``snooze_config=dict(snooze.RECOMMENDED)``, as the README writes it: snoozing at factor 1 with the
    surplus carried, in a real run; every batch full of signal groups, the surplus trained at the next step."""
    import snooze

    model_name = tiny.save(tiny.causal_lm(), tmp_path / "lm")
    batches: list[Any] = []
    trainer = _trainer(model_name, tmp_path / "out", 4, batches, {**snooze.RECOMMENDED, "gen_batch_size": 4})
    cfg = trainer.scheduler.config
    assert (cfg.policy, cfg.options.factor, cfg.carry_surplus, cfg.audit) == ("snooze", 1, True, 0.05)
    trainer.train()
    assert len(batches) == 4 and all(len(b.candidates) == 2 for b in batches)
    assert any(b.record.carried_in[b.record.where("trained")].any() for b in batches)

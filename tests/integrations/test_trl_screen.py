"""Partial groups (``screen_size``) in ``SnoozeGRPOTrainer``, a real TRL run on the tiny local model: each round
generates screens of k and rests of G - k (each width in its own TRL call), a screen that stops is never trained,
a screen that passes is trained as a whole group of G rows (its k screening rows and its G - k rest rows) whose
advantages are TRL's over all G rewards, and the reward log holds the whole groups only."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("trl", reason="needs the [trl] extra")
torch = pytest.importorskip("torch")

from integrations import _trl_tiny as tiny  # noqa: E402

pytestmark = [pytest.mark.trl, pytest.mark.usefixtures("one_thread")]

RECORDS = [{"id": f"m{i}", "prompt": line} for i, line in enumerate(tiny.LINES)]


def _coin(completions: list[Any], **kwargs: Any) -> list[float]:
    return [float(zlib.crc32(c.encode()) % 2) for c in completions]  # a coin per completion: screens pass and stop


def _trainer(model_name: str, out: Path, steps: int, batches: list[Any], G: int, K: int, **args: Any) -> Any:
    from datasets import Dataset
    from trl import GRPOConfig

    import snooze
    from snooze.integrations.trl import SnoozeGRPOTrainer

    settings = {
        "output_dir": str(out),
        "per_device_train_batch_size": 2 * G,  # 2 groups a step
        "num_generations": G,
        "max_completion_length": 4,
        "max_steps": steps,
        "learning_rate": 0.05,
        "report_to": "none",
        "use_cpu": True,
        "bf16": False,
        "save_strategy": "no",
        "logging_steps": 1,
        "disable_tqdm": True,
        "seed": 0,
    }
    config = GRPOConfig(**{**settings, **args})
    return SnoozeGRPOTrainer(
        model=model_name,
        reward_funcs=_coin,
        args=config,
        train_dataset=Dataset.from_list(RECORDS),
        snooze_config={**snooze.RECOMMENDED, "gen_batch_size": 4, "screen_size": K},
        reward_log=out / "rewards.jsonl",
        on_batch=batches.append,
    )


def _trl_advantages(rewards: np.ndarray, scale: bool) -> np.ndarray:
    """TRL's advantages of one group of G rewards (mean over the group; std with Bessel's correction, + 1e-4)."""
    r = torch.tensor(rewards, dtype=torch.float32)
    adv = r - r.mean()
    return (adv / (r.std() + 1e-4) if scale else adv).numpy()


@pytest.mark.parametrize(("G", "K", "scale_rewards"), [(4, 2, "group"), (6, 2, "none"), (4, 3, "group")])
def test_screened_groups_train_whole_with_trls_advantages(
    G: int, K: int, scale_rewards: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trl
    from trl import GRPOTrainer
    from trl.trainer.utils import nanstd

    from snooze.integrations.trl import _screen as screening
    from snooze.logs import read_reward_log

    model_name = tiny.save(tiny.causal_lm(), tmp_path / "lm")
    batches: list[Any] = []
    trainer = _trainer(model_name, tmp_path / "out", 3, batches, G, K, scale_rewards=scale_rewards)
    calls: list[tuple[int, int, dict[str, Any], np.ndarray]] = []  # (num_generations, rows, TRL's output, rewards)
    original = GRPOTrainer._generate_and_score_completions
    excluded = screening.unscored_excluded(trl.__version__)

    def one_call(inner: Any, inputs: Any) -> Any:
        out = original(inner, inputs)
        n, per_func = inner.num_generations, inner._round_rewards.detach()
        ours = [  # the adapter's formula for a joined group, on the groups TRL formed itself: bit for bit TRL's
            screening.group_advantages(per_func[lo : lo + n], inner.reward_weights, scale_rewards, excluded, nanstd)
            for lo in range(0, len(inputs), n)
        ]
        assert torch.equal(torch.cat(ours), out["advantages"])
        calls.append((n, len(inputs), out, per_func.float().cpu().sum(dim=1).numpy()))
        return out

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", one_call)
    handed: list[dict[str, Any]] = []
    scheduled = trainer._generate_and_score_completions

    def generation(inputs: Any) -> Any:
        out = scheduled(inputs)
        handed.append(out)
        return out

    trainer._generate_and_score_completions = generation
    before = tiny.snapshot(trainer.model)
    trainer.train()

    assert trainer.num_generations == G  # restored after every call of another width
    widths = {n for n, _, _, _ in calls}
    assert widths == {K, G - K}, widths  # screens of k and rests of G - k (one call each), never a whole G
    assert all(rows % n == 0 for n, rows, _, _ in calls)
    total = trainer.scheduler.metrics()
    assert total["total/screened"] > 0 and total["total/screen_stopped"] > 0 and total["total/screen_continued"] > 0
    assert total["total/screened"] == total["total/screen_stopped"] + total["total/screen_continued"]
    logged = [e for e in trainer.state.log_history if "snooze/gen/screened" in e]
    assert sum(e["snooze/gen/screened"] for e in logged) == total["total/screened"]
    assert sum(e["snooze/gen/screen_stopped"] for e in logged) > 0

    # every generated row (prompt, completion) and its reward: the reward is a function of the completion's text
    reward_of = {
        (p, c): float(r)
        for _, _, out, rewards in calls
        for (p, c, _), r in zip(tiny.rows_of(out, 0, len(rewards)), rewards)
    }
    assert len(batches) == len(handed) == 3
    for batch, out in zip(batches, handed):
        assert len(batch.candidates) == 2  # full batches of whole groups
        for i in range(len(batch.candidates)):
            rows = tiny.rows_of(out, i * G, (i + 1) * G)
            assert len({p for p, _, _ in rows}) == 1  # one prompt's rows
            rewards = np.array([reward_of[(p, c)] for p, c, _ in rows])
            np.testing.assert_array_equal(rewards, batch.rewards[i])  # the G rewards the scheduler recorded
            assert np.ptp(rewards) > 0  # a screen that passed: signal
            advantages = np.array([a for _, _, a in rows])
            np.testing.assert_allclose(advantages, _trl_advantages(rewards, scale_rewards == "group"), atol=1e-5)
            assert abs(advantages.sum()) < 1e-4
        assert not out["completion_mask"][len(batch.candidates) * G :].any()  # the rest is inert padding
    assert not tiny.changed(before, trainer.model)  # trained
    assert any(b.record.carried_in[b.record.where("trained")].any() for b in batches)  # carry_surplus: joined groups

    log = read_reward_log(tmp_path / "out" / "rewards.jsonl")
    assert log.rewards.shape == (total["total/screen_continued"], G)  # whole groups only: no stopped screen


def test_the_advantages_of_a_joined_group_are_trls_on_either_side_of_1_6() -> None:
    """An unscored completion (every reward function gave None: NaN) counts as 0 before TRL 1.6 and is left out
    of its group's mean and std from 1.6 on, with advantage 0."""
    from trl.trainer.utils import nanstd

    from snooze.integrations.trl import _screen as screening

    nan = float("nan")
    per_func = torch.tensor([[1.0, nan], [0.0, 0.0], [nan, nan], [1.0, 1.0]])
    weights = torch.tensor([1.0, 0.5])
    new = screening.group_advantages(per_func, weights, "group", True, nanstd)
    scored = torch.tensor([1.0, 0.0, 1.5])
    want = (scored - scored.mean()) / (scored.std() + 1e-4)
    torch.testing.assert_close(new, torch.stack([want[0], want[1], torch.tensor(0.0), want[2]]))
    old = screening.group_advantages(per_func, weights, "none", False, nanstd)
    every = torch.tensor([1.0, 0.0, 0.0, 1.5])
    torch.testing.assert_close(old, every - every.mean())
    assert screening.unscored_excluded("1.16.0") and screening.unscored_excluded("1.6.0")
    assert not screening.unscored_excluded("1.5.0") and not screening.unscored_excluded("1.0.0")


def test_a_run_with_screening_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    """A checkpoint falls between steps, where no screen waits for its rest: the resumed run loads the scheduler
    state saved with screen_size, cuts the reward log back to the checkpoint and goes on screening, every batch
    full of whole groups."""
    from snooze.logs import read_reward_log

    model_name = tiny.save(tiny.causal_lm(), tmp_path / "lm")
    out = tmp_path / "out"
    first: list[Any] = []
    _trainer(model_name, out, 4, first, 4, 2, save_strategy="steps", save_steps=2).train()
    resumed: list[Any] = []
    trainer = _trainer(model_name, out, 4, resumed, 4, 2, save_strategy="steps", save_steps=2)
    trainer.train(resume_from_checkpoint=str(out / "checkpoint-2"))
    assert [b.step for b in resumed] == [2, 3] and all(len(b.candidates) == 2 for b in resumed)
    assert all(b.metrics["gen/screened"] > 0 for b in resumed)  # still screening
    assert np.all(np.isfinite(np.concatenate([b.rewards for b in resumed])))  # whole groups of G rewards
    log = read_reward_log(out / "rewards.jsonl")
    assert log.rewards.shape[1] == 4 and sorted(set(log.steps.tolist())) == [0, 1, 2, 3]
    assert log.rewards.shape[0] == trainer.scheduler.metrics()["total/screen_continued"]  # no line twice, none lost

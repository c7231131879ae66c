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


def _unscored(text: str) -> bool:
    return zlib.crc32(text.encode()) % 5 == 0  # about one completion in five: no reward function scores it


def _coin_or_none(completions: list[Any], **kwargs: Any) -> list[float | None]:
    return [None if _unscored(c) else float(zlib.crc32(c.encode()) % 2) for c in completions]


def _third_or_none(completions: list[Any], **kwargs: Any) -> list[float | None]:
    return [None if _unscored(c) else float(zlib.crc32(c.encode()) % 3 == 0) for c in completions]


def _trainer(
    model_name: str, out: Path, steps: int, batches: list[Any], G: int, K: int, funcs: Any = _coin, **args: Any
) -> Any:
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
        reward_funcs=funcs,
        args=config,
        train_dataset=Dataset.from_list(RECORDS),
        # issue 52's rule: rounds of fresh screens hold the batch's 2 * G rollouts (gen_batch_size unset: 2G / k
        # screens); with 3 of 4 that rounds up to 3 screens, so that case asks 4 screens a round by hand
        snooze_config={**snooze.RECOMMENDED, "screen_size": K, "gen_batch_size": None if 2 * G % K == 0 else 4},
        reward_log=out / "rewards.jsonl",
        on_batch=batches.append,
    )


class Watch:
    """Every call of TRL's generation (``num_generations`` then, rows, output, per-function rewards) and every batch
    handed to TRL. Each call's advantages are checked against the adapter's formula for a joined group, applied to
    the groups TRL formed itself: they must be TRL's bit for bit."""

    def __init__(self, trainer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        import trl
        from trl import GRPOTrainer
        from trl.trainer.utils import nanstd

        from snooze.integrations.trl import _screen as screening

        self.calls: list[tuple[int, int, dict[str, Any], torch.Tensor]] = []
        self.handed: list[dict[str, Any]] = []
        original = GRPOTrainer._generate_and_score_completions
        excluded = screening.unscored_excluded(trl.__version__)

        def one_call(inner: Any, inputs: Any) -> Any:
            out = original(inner, inputs)
            n, per_func = inner.num_generations, inner._round_rewards.detach()
            ours = [
                screening.group_advantages(
                    per_func[lo : lo + n], inner.reward_weights, inner.scale_rewards, excluded, nanstd
                )
                for lo in range(0, len(inputs), n)
            ]
            assert torch.equal(torch.cat(ours), out["advantages"])
            self.calls.append((n, len(inputs), out, per_func.float().cpu()))
            return out

        monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", one_call)
        scheduled = trainer._generate_and_score_completions

        def generation(inputs: Any) -> Any:
            out = scheduled(inputs)
            self.handed.append(out)
            return out

        trainer._generate_and_score_completions = generation

    def per_func(self) -> dict[tuple[Any, Any], torch.Tensor]:
        """Every generated row, (prompt, completion) -> its per-function rewards (a function of the completion)."""
        return {
            (p, c): per_func[r]
            for _, rows, out, per_func in self.calls
            for r, (p, c, _) in enumerate(tiny.rows_of(out, 0, rows))
        }


def _trl_advantages(rewards: np.ndarray, scale: bool) -> np.ndarray:
    """TRL's advantages of one group of G rewards (mean over the group; std with Bessel's correction, + 1e-4)."""
    r = torch.tensor(rewards, dtype=torch.float32)
    adv = r - r.mean()
    return (adv / (r.std() + 1e-4) if scale else adv).numpy()


def _check_whole_groups(batches: list[Any], watch: Watch, G: int, scale: bool) -> None:
    """Each batch handed to TRL is its step's groups, in order, each G rows of one prompt whose rewards are the ones
    the scheduler recorded, with signal, and whose advantages are TRL's over the G; every other row is inert."""
    reward_of = {key: float(r.sum()) for key, r in watch.per_func().items()}
    for batch, out in zip(batches, watch.handed):
        for i in range(len(batch.candidates)):
            rows = tiny.rows_of(out, i * G, (i + 1) * G)
            assert len({p for p, _, _ in rows}) == 1  # one prompt's rows
            rewards = np.array([reward_of[(p, c)] for p, c, _ in rows])
            np.testing.assert_array_equal(rewards, batch.rewards[i])  # the G rewards the scheduler recorded
            assert np.ptp(rewards) > 0  # a screen that passed: signal
            advantages = np.array([a for _, _, a in rows])
            np.testing.assert_allclose(advantages, _trl_advantages(rewards, scale), atol=1e-5)
            assert abs(advantages.sum()) < 1e-4
        assert not out["completion_mask"][len(batch.candidates) * G :].any()  # the rest is inert padding


@pytest.mark.parametrize(("G", "K", "scale_rewards"), [(4, 2, "group"), (6, 2, "none"), (4, 3, "group")])
def test_screened_groups_train_whole_with_trls_advantages(
    G: int, K: int, scale_rewards: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from snooze.logs import read_reward_log

    model_name = tiny.save(tiny.causal_lm(), tmp_path / "lm")
    batches: list[Any] = []
    trainer = _trainer(model_name, tmp_path / "out", 3, batches, G, K, scale_rewards=scale_rewards)
    watch = Watch(trainer, monkeypatch)
    before = tiny.snapshot(trainer.model)
    trainer.train()

    assert trainer.num_generations == G  # restored after every call of another width
    widths = {n for n, _, _, _ in watch.calls}
    assert widths == {K, G - K}, widths  # screens of k and rests of G - k (one call each), never a whole G
    assert all(rows % n == 0 for n, rows, _, _ in watch.calls)
    total = trainer.scheduler.metrics()
    assert total["total/screened"] > 0 and total["total/screen_stopped"] > 0 and total["total/screen_continued"] > 0
    assert total["total/screened"] == total["total/screen_stopped"] + total["total/screen_continued"]
    logged = [e for e in trainer.state.log_history if "snooze/gen/screened" in e]
    assert sum(e["snooze/gen/screened"] for e in logged) == total["total/screened"]
    assert sum(e["snooze/gen/screen_stopped"] for e in logged) > 0

    assert len(batches) == len(watch.handed) == 3 and all(len(b.candidates) == 2 for b in batches)  # full batches
    _check_whole_groups(batches, watch, G, scale_rewards == "group")
    assert not tiny.changed(before, trainer.model)  # trained
    assert any(b.record.carried_in[b.record.where("trained")].any() for b in batches)  # carry_surplus: joined groups

    log = read_reward_log(tmp_path / "out" / "rewards.jsonl")
    assert log.rewards.shape == (total["total/screen_continued"], G)  # whole groups only: no stopped screen


@pytest.mark.parametrize(
    "setting",
    [
        {"num_iterations": 2},  # old log-probs computed at generation, per call
        {"beta": 0.1},  # a reference model's log-probs, per call
        {"gradient_accumulation_steps": 2, "loss_type": "dapo"},  # 4 groups a step
        {"steps_per_generation": 2},  # one generation, two optimizer steps
    ],
    ids=["num_iterations", "beta", "accumulation", "steps_per_generation"],
)
def test_screening_under_trls_other_settings(
    setting: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_name = tiny.save(tiny.causal_lm(), tmp_path / "lm")
    batches: list[Any] = []
    trainer = _trainer(model_name, tmp_path / "out", 4, batches, 4, 2, **setting)
    watch = Watch(trainer, monkeypatch)
    before = tiny.snapshot(trainer.model)
    trainer.train()
    size = trainer.args.generation_batch_size // 4
    assert batches and all(len(b.candidates) == size for b in batches)
    assert trainer.scheduler.metrics()["total/screen_stopped"] > 0
    _check_whole_groups(batches, watch, 4, True)
    assert not tiny.changed(before, trainer.model)


def test_unscored_completions_in_a_joined_group_as_trl_treats_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two reward functions that both leave some completions unscored (None): a joined group's advantages are
    TRL's (from 1.6 the unscored rows are left out of the mean and std and get 0; before, they count as 0)."""
    import trl

    from snooze.integrations.trl import _screen as screening

    G = 4
    model_name = tiny.save(tiny.causal_lm(), tmp_path / "lm")
    batches: list[Any] = []
    trainer = _trainer(model_name, tmp_path / "out", 3, batches, G, 2, [_coin_or_none, _third_or_none])
    watch = Watch(trainer, monkeypatch)
    trainer.train()
    per_func, excluded = watch.per_func(), screening.unscored_excluded(trl.__version__)
    unscored_trained = 0
    for batch, out in zip(batches, watch.handed):
        for i in range(len(batch.candidates)):
            rows = tiny.rows_of(out, i * G, (i + 1) * G)
            funcs = torch.stack([per_func[(p, c)] for p, c, _ in rows]).double()
            unscored = torch.isnan(funcs).all(dim=1).numpy()
            rewards = funcs.nansum(dim=1).numpy()
            unscored_trained += int(unscored.sum())
            keep = ~unscored if excluded else np.ones(G, dtype=bool)
            mean, std = rewards[keep].mean(), rewards[keep].std(ddof=1)
            want = np.where(keep, (rewards - mean) / (std + 1e-4), 0.0)
            np.testing.assert_allclose([a for _, _, a in rows], want, atol=1e-4)
    assert unscored_trained > 0  # (deterministic on seed 0: joined groups did hold unscored completions)


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

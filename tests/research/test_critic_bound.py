"""research/critic_ceiling.py computes what it claims: the chance of a signal group from a pass rate,
a critic that learns pass rates from correct counts without touching the policy's random state, and
the value probe's and critics' scores read from the log."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from critic_ceiling import Critic, _CriticDapo, critic_batches, scores, shared_update, signal_chance
from probe_ceiling import auc

from snooze.trainer import loop
from snooze.trainer.grpo import GRPOConfig, grpo_loss
from snooze.trainer.model import ModelConfig, TinyGPT
from snooze.trainer.tokenizer import CharTokenizer


def test_signal_chance_by_hand() -> None:
    assert signal_chance(np.array([0.5]), 2)[0] == 0.5  # of the four outcomes, two disagree
    np.testing.assert_allclose(
        signal_chance(np.array([0.0, 1.0, -0.2, 1.3]), 8), 0.0
    )  # a fitted value outside [0, 1] is a sure outcome
    assert abs(signal_chance(np.array([0.9]), 8)[0] - (1 - 0.9**8 - 0.1**8)) < 1e-12


def _trunk() -> TinyGPT:
    torch.manual_seed(0)
    return TinyGPT(ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=1, d_model=32, n_head=2))


def _two_families(rng: np.random.Generator) -> list[str]:
    letters = list("abcdefgh")
    easy = [">" + "".join(rng.choice(letters, 3)) + "=" for _ in range(20)]  # pass rate 0.9
    hard = [":" + "".join(rng.choice(letters, 6)) + "=" for _ in range(20)]  # pass rate 0.1
    return easy + hard


PASS_RATES = np.r_[np.full(20, 0.9), np.full(20, 0.1)]


def test_critic_learns_pass_rates_from_correct_counts() -> None:
    rng = np.random.default_rng(0)
    prompts = _two_families(rng)
    critic = Critic(_trunk(), lr=3e-3, seed=0)
    before = critic.pass_rates(prompts)
    np.testing.assert_allclose(before, 0.5, atol=0.05)  # a fresh head knows nothing
    losses = [critic.fit(prompts, rng.binomial(8, PASS_RATES), 8, epochs=1) for _ in range(150)]
    after = critic.pass_rates(prompts)
    assert after[:20].mean() > 0.8 and after[20:].mean() < 0.2
    assert np.mean(losses[-10:]) < np.mean(losses[:10])


def test_critic_leaves_the_policy_and_its_random_state_alone() -> None:
    trunk = _trunk()
    weights = {k: v.clone() for k, v in trunk.state_dict().items()}
    state = torch.get_rng_state()
    critic = Critic(trunk, lr=1e-3, seed=3)
    critic.fit([">ab=", ":abc="], np.array([8, 0]), 8, epochs=3)
    critic.pass_rates([">ab="])
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(v, weights[k]) for k, v in trunk.state_dict().items())
    assert not torch.equal(critic.trunk.state_dict()["tok.weight"], weights["tok.weight"])  # its own copy moved
    again = Critic(_trunk(), lr=1e-3, seed=3)
    assert torch.equal(again.head.weight, Critic(_trunk(), lr=1e-3, seed=3).head.weight)  # seeded: the same head


def test_scores_read_the_critic_and_the_value_probe() -> None:
    """A critic that reports the true pass rate ranks exactly as the oracle; a feature that is the pass
    rate makes the value probe near the oracle, where a ridge to "signal" on it is near chance
    (signal is high in the middle of the pass rate's range, not at one end)."""
    rng = np.random.default_rng(1)
    steps, per_step, group = 30, 60, 8
    n = steps * per_step
    p = rng.random(n)
    correct = rng.binomial(group, p)
    features = np.hstack([p[:, None], rng.normal(size=(n, 2))]).astype(np.float32)
    log = {
        "step": np.repeat(np.arange(steps), per_step),
        "ds": rng.integers(0, 2, n),
        "row": rng.integers(0, 300, n),
        "correct": correct,
        "p": p,
        "features": features,
        "critic_p": np.stack([p, np.full(n, 0.5)], axis=1),
    }
    out, sig, _ = scores(log, group, window=10, lam=1.0, from_step=10, lrs=[1e-3, 1e-4])
    oracle = auc(out["oracle"], sig)
    assert auc(out["critic (lr 0.001)"], sig) == oracle > 0.7
    assert auc(out["value-probe"], sig) > oracle - 0.03
    assert abs(auc(out["probe"], sig) - 0.5) < 0.08
    assert set(out) >= {"critic (lr 0.0001)", "critic (lr 0.0001)+history", "critic (lr 0.001)+history"}
    assert all(v.shape == sig.shape and not np.isnan(v).any() for v in out.values())


def _batches_after(replay: int, steps: int) -> list[list[tuple[list[str], np.ndarray]]]:
    past: deque[tuple[list[str], np.ndarray]] = deque(maxlen=max(1, replay))
    rng = np.random.default_rng(0)
    return [critic_batches(past, [f"s{t}p{i}" for i in range(4)], np.full(4, t), 3, replay, rng) for t in range(steps)]


def test_critic_batches_are_the_last_step_or_a_draw_from_the_last_k() -> None:
    last = _batches_after(0, 5)[-1]
    assert len(last) == 3 and all(p == [f"s4p{i}" for i in range(4)] and (c == 4).all() for p, c in last)
    drawn = _batches_after(2, 5)[-1]
    assert len(drawn) == 3
    for prompts, counts in drawn:
        assert len(prompts) == 4 == len(set(prompts))  # as many as the step had, without repeats
        assert set(counts.tolist()) <= {3, 4} and all(p.startswith(f"s{c}") for p, c in zip(prompts, counts.tolist()))
    assert {c for _, counts in drawn for c in counts.tolist()} == {3, 4}  # both of the last two steps are drawn from


def test_a_shared_critic_learns_with_the_policy_through_its_update() -> None:
    """``--shared-trunk``: the head reads the policy itself; its loss is added to the one GRPO loss the
    update backpropagates, its head joins the policy's optimizer once, and nothing is left patched."""
    rng = np.random.default_rng(0)
    prompts, policy = _two_families(rng), _trunk()
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    critic = Critic(policy, lr=3e-3, seed=0, shared=True)
    assert critic.trunk is policy and critic.opt is None
    run = SimpleNamespace(model=policy, opt=torch.optim.AdamW(policy.parameters(), lr=3e-3))
    seen: list[float] = []

    def update(
        run: Any, batch: Any, cfg: GRPOConfig, device: str, temperature: float
    ) -> dict[str, float]:  # _update's shape, on a fixed loss
        logp = policy.tok.weight[:4, :3]  # a GRPO loss that reads the policy (zero advantages: no gradient of its own)
        loss, _ = loop.grpo_loss(logp, logp.detach(), torch.zeros(4), torch.ones(4, 3), cfg)
        run.opt.zero_grad(set_to_none=True)
        loss.backward()
        run.opt.step()
        seen.append(loss.item())
        return {"train/loss": loss.item()}

    with_critic = shared_update(update, coef=1.0, group_size=8)
    _CriticDapo.critics = [critic]
    try:
        _CriticDapo.pending = None
        with_critic(run, None, GRPOConfig(), "cpu", 1.0)
        assert seen[-1] == 0.0  # nothing pending: GRPO's loss alone
        for _ in range(150):
            _CriticDapo.pending = (prompts, rng.binomial(8, PASS_RATES))
            with_critic(run, None, GRPOConfig(), "cpu", 1.0)
            assert _CriticDapo.pending is None and loop.grpo_loss is grpo_loss
    finally:
        _CriticDapo.critics, _CriticDapo.pending = [], None
    after = critic.pass_rates(prompts)
    assert after[:20].mean() > 0.8 and after[20:].mean() < 0.2
    assert np.mean(seen[-10:]) < np.mean(seen[1:11])  # the value loss, added to GRPO's, fell
    assert len(run.opt.param_groups) == 2 and run.opt.param_groups[1]["params"][0] is critic.head.weight
    assert not torch.equal(
        policy.state_dict()["blocks.0.qkv.weight"], before["blocks.0.qkv.weight"]
    )  # the policy's trunk moved: only the value loss reaches it

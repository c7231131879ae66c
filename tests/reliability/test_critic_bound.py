"""benchmarks/critic_ceiling.py computes what it claims: the chance of a signal group from a pass rate,
a critic that learns pass rates from correct counts without touching the policy's random state, and
the value probe's and critics' scores read from the log."""

from __future__ import annotations

from collections import deque

import numpy as np
import torch
from critic_ceiling import Critic, critic_batches, scores, signal_chance
from probe_ceiling import auc

from snooze.trainer.model import ModelConfig, TinyGPT
from snooze.trainer.tokenizer import CharTokenizer


def test_signal_chance_by_hand() -> None:
    assert signal_chance(np.array([0.5]), 2)[0] == 0.5  # of the four outcomes, two disagree
    np.testing.assert_allclose(signal_chance(np.array([0.0, 1.0, -0.2, 1.3]), 8), 0.0)  # a fitted value outside [0, 1] is a sure outcome
    assert abs(signal_chance(np.array([0.9]), 8)[0] - (1 - 0.9**8 - 0.1**8)) < 1e-12


def _trunk() -> TinyGPT:
    torch.manual_seed(0)
    return TinyGPT(ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=1, d_model=32, n_head=2))


def test_critic_learns_pass_rates_from_correct_counts() -> None:
    rng = np.random.default_rng(0)
    letters = list("abcdefgh")
    easy = [">" + "".join(rng.choice(letters, 3)) + "=" for _ in range(20)]  # pass rate 0.9
    hard = [":" + "".join(rng.choice(letters, 6)) + "=" for _ in range(20)]  # pass rate 0.1
    prompts = easy + hard
    critic = Critic(_trunk(), lr=3e-3, seed=0)
    before = critic.pass_rates(prompts)
    np.testing.assert_allclose(before, 0.5, atol=0.05)  # a fresh head knows nothing
    losses = [critic.fit(prompts, rng.binomial(8, np.r_[np.full(20, 0.9), np.full(20, 0.1)]), 8, epochs=1) for _ in range(150)]
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
    log = {"step": np.repeat(np.arange(steps), per_step), "ds": rng.integers(0, 2, n), "row": rng.integers(0, 300, n), "correct": correct,
           "p": p, "features": features, "critic_p": np.stack([p, np.full(n, 0.5)], axis=1)}  # fmt: skip
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

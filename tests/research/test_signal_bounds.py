"""The bounds of issue 12's analysis compute what they claim (research/pass_rate_oracle.py,
research/history_ceiling.py, research/screening_bound.py, research/probe_ceiling.py): the exact
pass rate is what sampling gives, the expected rounds are what simulated steps take, the history table
counts a log's repeat encounters, a screen replayed on logged groups costs what its closed form says,
and the probe's features and scores are what they claim."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from history_ceiling import ceiling, cells, encounters, expected_rounds, level_encounters
from pass_rate_oracle import pass_rates
from probe_ceiling import auc, kept_share, predictors, prompt_features, rolling_ridge
from screening_bound import groups_per_signal, screened

from snooze.logs import RewardLogWriter
from snooze.trainer.model import ModelConfig, TinyGPT, greedy, sample
from snooze.trainer.tasks import verify
from snooze.trainer.tokenizer import CharTokenizer


def test_exact_pass_rate_matches_sampling() -> None:
    torch.manual_seed(0)
    tok = CharTokenizer()
    model = TinyGPT(ModelConfig(vocab_size=tok.vocab_size, n_layer=1, d_model=32, n_head=2)).eval()
    prompts = [">ab=", ">hdfag=", ":cba="]  # different lengths: left padding must not matter
    ids, mask = (torch.from_numpy(x) for x in tok.encode_prompts(prompts))
    # the answer each prompt's greedy completion gives (so the pass rate is far from 0 at a low temperature)
    answers = [tok.decode(t) for t in greedy(model, ids, mask, 4).numpy()]
    answers = [a if a else "a" for a in answers]
    records = [{"prompt": p, "answer": a} for p, a in zip(prompts, answers)]
    temperature, n = 0.5, 4000
    exact = pass_rates(model, records, temperature)
    out = sample(model, ids, mask, n, 10, temperature, torch.Generator().manual_seed(1))
    texts = [tok.decode(t) for t in out.tokens.numpy()]
    empirical = np.array([verify(texts[i], answers[i // n]) for i in range(len(texts))]).reshape(-1, n).mean(axis=1)
    assert exact.shape == (3,) and ((exact > 0) & (exact < 1)).all()
    assert np.abs(empirical - exact).max() < 4 * np.sqrt(0.25 / n) + 1e-3  # 4 standard errors


def test_expected_rounds_match_simulated_steps() -> None:
    assert expected_rounds(1.0, 16, 8) == 1.0
    assert expected_rounds(0.0, 16, 8) == 8.0
    rng = np.random.default_rng(0)
    for r in (0.3, 0.8):
        rounds = []
        for _ in range(4000):
            have, k = 0, 0
            while have < 16 and k < 8:
                have += int((rng.random(16) < r).sum())
                k += 1
            rounds.append(k)
        assert abs(expected_rounds(r, 16, 8) - np.mean(rounds)) < 0.05


def test_history_table_counts_repeat_encounters(tmp_path: Path) -> None:
    path = tmp_path / "rewards.jsonl"
    with RewardLogWriter(path) as log:
        log.write(0, ["d", "d"], ["a", "b"], [[1, 1, 1, 1], [0, 1, 0, 0]])
        log.write(3, ["d"], ["a"], [[1, 0, 1, 1]])  # a again, 3 steps later, after 4 of 4: signal
        log.write(
            20, ["d", "d"], ["a", "b"], [[1, 1, 1, 1], [0, 0, 0, 0]]
        )  # a after 3 of 4 (17 steps); b after 1 of 4 (20 steps)
    prev, age, sig = encounters(path)
    assert prev.tolist() == [4, 3, 1] and age.tolist() == [3, 17, 20] and sig.tolist() == [True, False, False]
    table = cells(prev, age, sig, group_size=4)
    assert sum(c[2] for c in table) == 3
    curve = ceiling(table)
    assert curve[0] == (1 / 3, 1.0) and curve[-1] == (1.0, 1 / 3)
    assert all(a[1] >= b[1] for a, b in zip(curve, curve[1:]))  # best cells first


def test_level_evidence_is_the_recent_signal_share_of_the_level(tmp_path: Path) -> None:
    path = tmp_path / "rewards.jsonl"
    with RewardLogWriter(path) as log:
        log.write(
            0, ["d", "d", "d"], ["a", "b", "c"], [[1, 0], [1, 1], [0, 1]]
        )  # level 1: a, b (1 of 2 signal); level 2: c
        log.write(1, ["d", "d"], ["b", "c"], [[1, 1], [0, 0]])
        log.write(9, ["d"], ["a"], [[0, 1]])  # nothing of level 1 in the 3 steps before
    feature, sig = level_encounters(path, {"a": 1, "b": 1, "c": 2}, window=3)
    assert feature.tolist() == [-1, -1, -1, 5, 9, -1]  # b at step 1: level 1 had 1 of 2 with signal; c: 1 of 1
    assert sig.tolist() == [True, False, True, False, False, True]


def test_a_screen_replays_logged_groups_by_hand_and_in_expectation() -> None:
    R = np.array([[1, 1, 1, 1], [1, 0, 1, 1], [1, 1, 0, 1], [0, 0, 0, 0]], dtype=float)
    assert screened(R, 2) == (2 + 4 + 2 + 2, 1)  # the third group's signal is missed by its screen
    assert screened(R, 4) == (16, 2) and groups_per_signal(R, 4) == 2.0
    p, G, k = 0.9, 8, 3
    rewards = (np.random.default_rng(0).random((40_000, G)) < p).astype(float)
    rollouts, found = screened(rewards, k)
    s_k = 1 - p**k - (1 - p) ** k  # the screen disagrees
    assert abs(found / 40_000 - s_k) < 0.01
    assert abs(rollouts / 40_000 - (k + (G - k) * s_k)) < 0.05


def test_prompt_features_do_not_depend_on_the_batch() -> None:
    torch.manual_seed(0)
    tok = CharTokenizer()
    model = TinyGPT(ModelConfig(vocab_size=tok.vocab_size, n_layer=1, d_model=32, n_head=2)).train()
    alone = prompt_features(model, [{"prompt": ">ab="}], 0.4)
    padded = prompt_features(model, [{"prompt": ">hdfagbc="}, {"prompt": ">ab="}], 0.4)  # left padding for ">ab="
    assert alone.shape == (1, 2 * 32 + 1) and padded.shape == (2, 65)
    np.testing.assert_allclose(padded[1], alone[0], atol=1e-5)
    assert not np.allclose(padded[0], padded[1])
    assert model.training  # put back as it was


def test_kept_share_and_auc_by_hand() -> None:
    score = np.array([0.9, 0.1, 0.5, 0.7, 0.2, 0.8])
    label = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 0.0])
    step = np.array([0, 0, 0, 1, 1, 1])
    assert kept_share(score, label, step, 1 / 3) == 0.5  # step 0 keeps 0.9 (signal), step 1 keeps 0.8 (none)
    assert kept_share(score, label, step, 2 / 3) == 0.5  # {0.9, 0.5} and {0.8, 0.7}
    assert auc(score, label) == 6 / 9  # of the 9 (signal, no signal) pairs, 6 are ranked the right way


def test_predictors_find_signal_where_it_is() -> None:
    """A synthetic log whose first feature says which groups have signal and whose history says nothing:
    the probe ranks nearly perfectly, history at chance, and the oracle reads the pass rate given."""
    rng = np.random.default_rng(0)
    steps, per_step, group = 40, 40, 8
    n = steps * per_step
    signal = rng.random(n) < 0.3
    correct = np.where(signal, rng.integers(1, group, n), np.where(rng.random(n) < 0.5, 0, group))
    features = rng.normal(size=(n, 3)).astype(np.float32)
    features[:, 0] += 3.0 * signal
    p = np.where(signal, 0.5, np.where(correct == 0, 0.001, 0.999))
    log = {
        "step": np.repeat(np.arange(steps), per_step),
        "ds": rng.integers(0, 2, n),
        "row": rng.integers(0, 200, n),
        "correct": correct,
        "p": p,
        "features": features,
    }
    scores, sig, step = predictors(log, group, window=10, lam=1.0, from_step=10)
    assert sig.shape == (n - 10 * per_step,) and (step >= 10).all()
    assert auc(scores["probe"], sig) > 0.95 and auc(scores["probe+history"], sig) > 0.95
    assert abs(auc(scores["history"], sig) - 0.5) < 0.06
    assert auc(scores["oracle"], sig) > 0.99
    assert (
        kept_share(scores["probe"], sig, step, 0.25) > 0.85 > 0.4 > kept_share(scores["history"], sig, step, 0.25)
    )  # signal share 0.3


def test_rolling_ridge_reads_only_the_window_before() -> None:
    """With nothing to regress on, each step's prediction is the mean of the window's targets: the
    mean of the steps before it, never its own."""
    step = np.repeat(np.arange(12), 3)
    y = step.astype(float)
    out = rolling_ridge(np.zeros((step.shape[0], 1)), y, step, window=4, lam=1.0, from_step=2)
    assert np.isnan(out[step < 2]).all()
    for t in range(2, 12):
        np.testing.assert_allclose(out[step == t], np.mean(np.arange(max(0, t - 4), t)), atol=1e-9)

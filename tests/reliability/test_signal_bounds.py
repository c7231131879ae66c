"""The bounds of issue 12's analysis compute what they claim (benchmarks/pass_rate_oracle.py,
benchmarks/history_ceiling.py, benchmarks/screening_bound.py): the exact pass rate is what sampling
gives, the expected rounds are what simulated steps take, the history table counts a log's repeat
encounters, and a screen replayed on logged groups costs what its closed form says."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from history_ceiling import ceiling, cells, encounters, expected_rounds, level_encounters
from pass_rate_oracle import pass_rates
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
        log.write(20, ["d", "d"], ["a", "b"], [[1, 1, 1, 1], [0, 0, 0, 0]])  # a after 3 of 4 (17 steps); b after 1 of 4 (20 steps)
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
        log.write(0, ["d", "d", "d"], ["a", "b", "c"], [[1, 0], [1, 1], [0, 1]])  # level 1: a, b (1 of 2 signal); level 2: c
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

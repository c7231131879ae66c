"""The headline's bootstrap in chunks: the same numbers, bit for bit, as every resample at once (issue 51).

The reference below is the computation before the chunking, written out: all ``resamples x prompts`` draws and
counts held at once (1.2 GB at 300,000 prompts). The chunked one must give exactly its numbers for a fixed seed,
whatever the chunk size, and hold far less at once."""

from __future__ import annotations

import numpy as np
import pytest

from snooze.analysis import estimate
from snooze.analysis.estimate import chunk_rows, headline


def _reference(prompt: np.ndarray, signal: np.ndarray, skipped: dict[str, np.ndarray], resamples: int, seed: int):
    """The old bootstrap: ``[policies, resamples, 4]`` sums of (N, K, S, M), every resample's counts at once."""
    n_prompts = int(prompt.max()) + 1
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_prompts, size=(resamples, n_prompts)) + n_prompts * np.arange(resamples)[:, None]
    counts = np.bincount(draws.ravel(), minlength=resamples * n_prompts).reshape(resamples, n_prompts)
    per = [
        np.stack(
            [
                np.bincount(prompt, minlength=n_prompts),
                np.bincount(prompt, weights=mask, minlength=n_prompts),
                np.bincount(prompt, weights=signal, minlength=n_prompts),
                np.bincount(prompt, weights=mask & signal, minlength=n_prompts),
            ],
            axis=1,
        ).astype(np.float64)
        for mask in skipped.values()
    ]  # [P, 4] per policy
    return np.stack([counts.astype(np.float64) @ x for x in per])


def _log(n_prompts: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    prompt = np.concatenate([np.arange(n_prompts), rng.integers(0, n_prompts, 3 * n_prompts)])  # every prompt once
    signal = rng.random(prompt.size) < 0.4
    skipped = {"a": rng.random(prompt.size) < 0.3, "b": rng.random(prompt.size) < 0.6}
    return prompt, signal, skipped


@pytest.mark.parametrize("budget", [None, 8 * 97 * 7, 1])  # all at once; 7 resamples a chunk; one at a time
def test_chunked_bootstrap_equals_every_resample_at_once(budget: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    prompt, signal, skipped = _log(97)
    if budget is not None:
        monkeypatch.setattr(estimate, "_CHUNK_BYTES", budget)
    assert chunk_rows(97, 300) == (300 if budget is None else 7 if budget > 1 else 1)
    got = headline(prompt, signal, skipped, resamples=300, seed=5)
    old = _reference(prompt, signal, skipped, 300, 5)
    for q, name in enumerate(skipped):
        ratio, risk, missed = estimate._ratios(old[q])
        n = float(prompt.size)
        lo, hi = estimate._interval(ratio, estimate.LEVEL)
        h = got[name]
        assert h["groups_interval"] == [lo * n, hi * n]  # bit for bit, not approx
        assert h["risk_interval"] == estimate._interval(risk, estimate.LEVEL)
        assert h["missed_share_interval"] == estimate._interval(missed, estimate.LEVEL)


def test_missed_signal_is_a_count_and_a_share_of_all_signal() -> None:
    # 4 prompts, 2 encounters each; signal on 4 groups; the policy skips 2 of them and 2 without signal
    prompt = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    signal = np.array([1, 1, 1, 0, 0, 0, 1, 0], dtype=bool)
    skipped = np.array([0, 1, 0, 1, 0, 1, 1, 0], dtype=bool)
    h = headline(prompt, signal, {"p": skipped}, resamples=50)["p"]
    assert (h["signal_groups"], h["skipped_with_signal"], h["skipped_groups"]) == (4, 2, 4)
    assert h["missed_share"] == 0.5 and h["risk"] == 0.5
    lo, hi = h["missed_share_interval"]
    assert 0.0 <= lo <= 0.5 <= hi <= 1.0


def test_chunks_bound_the_memory_at_a_million_prompts() -> None:
    assert chunk_rows(1_000_000, 1000) == 8  # 64 MB of counts a chunk, not 100 resamples x 1M prompts at once
    assert chunk_rows(500, 1000) == 1000

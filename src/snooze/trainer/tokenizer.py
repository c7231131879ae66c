"""Character-level tokenizer for the built-in tasks: one token per character, plus PAD, BOS and EOS."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from snooze.core.errors import DataError

__all__ = ["CharTokenizer", "PAD", "BOS", "EOS"]

PAD, BOS, EOS = 0, 1, 2
_CHARS = "0123456789abcdefghijklmnopqrstuvwxyz+=>#:-?"


class CharTokenizer:
    """Maps the tasks' characters to ids ``3..`` (0, 1, 2 are PAD, BOS, EOS)."""

    def __init__(self, chars: str = _CHARS) -> None:
        self.chars = chars
        self._index = {c: i + 3 for i, c in enumerate(chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars) + 3

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` (no BOS/EOS)."""
        try:
            return [self._index[c] for c in text]
        except KeyError as exc:
            raise DataError(f"character {exc.args[0]!r} is not in the tokenizer's alphabet {self.chars!r}") from None

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """Text of ``ids`` up to the first EOS; PAD and BOS are skipped."""
        out = []
        for i in np.asarray(ids).tolist():
            if i == EOS:
                break
            if i >= 3:
                out.append(self.chars[i - 3])
        return "".join(out)

    def encode_prompts(self, prompts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Left-padded ``BOS + prompt`` ids ``[N, P]`` (int64) and their mask ``[N, P]`` (bool).

        Left padding puts every prompt's last token in the same column, so batched sampling
        continues all rows at once.
        """
        seqs = [[BOS, *self.encode(p)] for p in prompts]
        width = max((len(s) for s in seqs), default=1)
        ids = np.full((len(seqs), width), PAD, dtype=np.int64)
        for row, s in enumerate(seqs):
            ids[row, width - len(s) :] = s
        return ids, ids != PAD

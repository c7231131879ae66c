"""The rollout function the scheduler calls, and the store of what it sampled.

:class:`Roller` is a :class:`snooze.RolloutFn`: it samples ``G`` completions per candidate, checks
them with the task's verifier, returns the rewards with each group's completion tokens (``gen/tokens``),
logs each group to the reward log in generation order, and keeps the
sampled tokens and their log-probs under ``candidate.ticket``, so the update uses exactly the
rollouts of ``batch.candidates`` (including groups carried over from an earlier step).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from snooze.core.errors import StateError
from snooze.core.types import Candidate, Candidates, Generated
from snooze.logs import RewardLogWriter
from snooze.trainer.model import TinyGPT, sample
from snooze.trainer.tasks import verify
from snooze.trainer.tokenizer import PAD, CharTokenizer

__all__ = ["Roller", "Group", "collate"]

_FIELDS = ("prompt", "tokens", "logprobs", "mask")


class Group:
    """One prompt's ``G`` rollouts: ``prompt [P]`` (BOS + prompt, unpadded), ``tokens``/``logprobs``/``mask [G, T]``."""

    __slots__ = _FIELDS

    def __init__(self, prompt: torch.Tensor, tokens: torch.Tensor, logprobs: torch.Tensor, mask: torch.Tensor) -> None:
        self.prompt, self.tokens, self.logprobs, self.mask = prompt, tokens, logprobs, mask


class Roller:
    """Samples and verifies rollouts for the scheduler; remembers them by ticket.

    The trainer tells it which step is being built (:meth:`begin_step`), where to log (:meth:`log_to`)
    and, on resume, which step the restored groups were sampled in (:meth:`load_state_dict`)."""

    def __init__(
        self,
        model: TinyGPT,
        group_size: int,
        temperature: float,
        max_new: int,
        generator: torch.Generator,
        reward_log: RewardLogWriter | None = None,
    ) -> None:
        self.model = model
        self.group_size = group_size
        self.temperature = temperature
        self.max_new = max_new
        self.generator = generator
        self.reward_log = reward_log
        self.tok = CharTokenizer()
        self.store: dict[int, Group] = {}
        self._born: dict[int, int] = {}  # ticket -> step it was sampled in
        self._first: dict[int, tuple[np.ndarray, int]] = {}  # screening: a screen's k rewards and tokens, for the log
        self._step = 0

    @property
    def step(self) -> int:
        """The training step being built; stamped on every reward-log line and on every group sampled."""
        return self._step

    def begin_step(self, step: int) -> None:
        """The trainer starts building step ``step``: what is sampled from now on belongs to it."""
        self._step = int(step)

    def log_to(self, reward_log: RewardLogWriter | None) -> None:
        """Write each sampled group to ``reward_log`` from now on (``None``: log nothing)."""
        self.reward_log = reward_log

    @torch.no_grad()
    def __call__(self, candidates: Candidates) -> Generated:
        """The rewards ``[N, G]`` and each group's sampled completion tokens ``[N]`` (EOS included, padding not).

        With partial groups (``SchedulerConfig.screen_size``) each candidate asks for ``candidate.n`` rollouts: the
        rewards are then one row of ``n`` per candidate (a list when they differ), the rollouts of a screen are kept
        under its ticket and those of its rest joined to them, so the update sees the whole group; the reward log
        gets a group when it is whole (a screen that stops after its k rollouts is not logged: docs/concepts.md)."""
        widths = [self.group_size] * len(candidates) if candidates.n is None else candidates.n.tolist()
        records = [c.record for c in candidates]
        device = next(self.model.parameters()).device
        ids, mask = (torch.from_numpy(x).to(device) for x in self.tok.encode_prompts([r["prompt"] for r in records]))
        was_training = self.model.training
        self.model.eval()
        rewards: list[Any] = [None] * len(candidates)
        tokens = np.zeros(len(candidates), dtype=np.int64)
        for g in sorted(set(widths), reverse=True):  # whole groups: one call, as without screening
            sub = [i for i, w in enumerate(widths) if w == g]
            at = torch.tensor(sub, device=device)
            out = sample(self.model, ids[at], mask[at], g, self.max_new, self.temperature, self.generator)
            texts = [self.tok.decode(t) for t in out.tokens.cpu().numpy()]
            got = np.array([verify(texts[j], records[sub[j // g]]["answer"]) for j in range(len(texts))])
            tokens[sub] = out.mask.reshape(len(sub), -1).sum(dim=1).cpu().numpy()
            for j, n in enumerate(sub):
                rows = slice(j * g, (j + 1) * g)
                rewards[n] = got[rows]
                self._keep(candidates[n].ticket, ids[n][mask[n]], out.tokens[rows], out.logprobs[rows], out.mask[rows])
        self.model.train(was_training)
        whole, rows_of, tokens_of = self._whole(candidates, widths, rewards, tokens)
        if self.reward_log is not None and whole:
            done = [candidates[i] for i in whole]
            self.reward_log.write(
                self._step, [c.dataset for c in done], [c.id for c in done], np.array(rows_of), tokens_of
            )
        if len(set(widths)) > 1 or 0 < len(whole) < len(candidates):  # G = 2k: screens and rests of one width
            return Generated(rewards, tokens)  # rows of n (screens and rests), [N]
        return Generated(np.array(rewards).reshape(len(candidates), -1), tokens)  # [N, G] (or [N, n]), [N]

    def _whole(
        self, candidates: Candidates, widths: list[int], rewards: list[Any], tokens: np.ndarray
    ) -> tuple[list[int], list[Any], list[int]]:
        """The candidates whose group is whole now, its ``G`` rewards and its tokens: every one without screening;
        with it, the rests (joined to their screen's first k rewards, their tokens added to the screen's). A
        screen's rewards and tokens are kept until its rest comes."""
        if all(w == self.group_size for w in widths):
            return list(range(len(candidates))), rewards, tokens.tolist()
        whole, rows, counts = [], [], []
        for i, c in enumerate(candidates):
            first = self._first.pop(c.ticket, None)
            if first is None:
                self._first[c.ticket] = (rewards[i], int(tokens[i]))
            else:
                whole.append(i)
                rows.append(np.concatenate([first[0], rewards[i]]))
                counts.append(first[1] + int(tokens[i]))
        return whole, rows, counts

    def _keep(
        self, ticket: int, prompt: torch.Tensor, tokens: torch.Tensor, logp: torch.Tensor, mask: torch.Tensor
    ) -> None:
        """Store a candidate's rollouts under its ticket; the rest of a screened group is joined to its screen."""
        first = self.store.get(ticket)
        if first is not None:  # a rest: its screen's k rollouts come first, padded to one length
            t = max(first.tokens.shape[1], tokens.shape[1])

            def cat(a: torch.Tensor, b: torch.Tensor, value: float | bool) -> torch.Tensor:
                pad = torch.nn.functional.pad
                return torch.cat([pad(a, (0, t - a.shape[1]), value=value), pad(b, (0, t - b.shape[1]), value=value)])

            tokens, logp, mask = (
                cat(first.tokens, tokens, PAD),
                cat(first.logprobs, logp, 0.0),
                cat(first.mask, mask, False),
            )
        self.store[ticket] = Group(prompt, tokens, logp, mask)
        self._born[ticket] = self._step

    def take(self, candidates: Sequence[Candidate]) -> list[Group]:
        """The stored groups of ``candidates`` (removed from the store)."""
        missing = [c.ticket for c in candidates if c.ticket not in self.store]
        if missing:
            raise StateError(
                f"no stored rollouts for ticket(s) {missing[:5]}: the batch holds groups this trainer never sampled"
            )
        for c in candidates:
            self._born.pop(c.ticket, None)
        return [self.store.pop(c.ticket) for c in candidates]

    def prune(self, keep_carried: bool) -> None:
        """After a step: drop the stored groups that can no longer enter a batch.

        Surplus is carried at most one step (never twice), so with ``keep_carried`` only groups
        sampled in the step just finished are kept; without it, none.
        """
        keep = {t for t, s in self._born.items() if keep_carried and s == self._step}
        self.store = {t: g for t, g in self.store.items() if t in keep}
        self._born = {t: self._step for t in keep}
        self._first = {}  # a step finishes every group it screened: what is left stopped after its screen

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Stored groups as a flat ``{"<ticket>/<field>": tensor}`` (loadable with ``weights_only=True``)."""
        return {f"{t}/{f}": getattr(grp, f).cpu() for t, grp in self.store.items() for f in _FIELDS}

    def load_state_dict(self, state: dict[str, Any], sampled_in: int) -> None:
        """Restore :meth:`state_dict` output: groups sampled for step ``sampled_in`` (the last batch the
        checkpoint had generated), the step :meth:`prune` keeps carried groups of until the next
        :meth:`begin_step`."""
        tickets = sorted({int(k.split("/")[0]) for k in state})
        self.store = {t: Group(*(state[f"{t}/{f}"] for f in _FIELDS)) for t in tickets}
        self._step = int(sampled_in)
        self._born = {t: self._step for t in tickets}


def collate(groups: Sequence[Group], device: torch.device | str) -> tuple[torch.Tensor, ...]:
    """Rows ``[B*G, ...]``: left-padded prompts and mask, right-padded tokens, log-probs and mask."""
    prompts = [grp.prompt for grp in groups for _ in range(grp.tokens.shape[0])]
    width = max(p.shape[0] for p in prompts)
    pid = torch.full((len(prompts), width), PAD, dtype=torch.long)
    for row, p in enumerate(prompts):
        pid[row, width - p.shape[0] :] = p.cpu()
    t_max = max(grp.tokens.shape[1] for grp in groups)

    def pad(x: torch.Tensor, value: float | bool) -> torch.Tensor:
        return torch.nn.functional.pad(x.cpu(), (0, t_max - x.shape[1]), value=value)

    tokens = torch.cat([pad(grp.tokens, PAD) for grp in groups])
    logp = torch.cat([pad(grp.logprobs, 0.0) for grp in groups])
    mask = torch.cat([pad(grp.mask, False) for grp in groups])
    return pid.to(device), (pid != PAD).to(device), tokens.to(device), logp.to(device), mask.to(device)

"""Supervised warm-up: the tiny analogue of a pretrained base model, shared by every arm.

Trains on a *fresh stream* of problems that never contains an RL-pool or test prompt (a warm-up on a
fixed small set memorises it), and stops at a *target accuracy* on a fresh validation draw rather
than after a fixed step count (where a small model's accuracy jumps depends on the seed). The result
is cached on disk under a hash of everything that shapes it, so every arm, seed and later run starts
from the same weights.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from snooze._kit.checks import as_bool, as_real
from snooze._kit.files import open_regular, remove_quietly
from snooze.core.errors import StateError
from snooze.trainer._records import read_warmup_meta
from snooze.trainer.checkpoint import write_atomic
from snooze.trainer.config import check_int, check_temperature
from snooze.trainer.model import ModelConfig, TinyGPT, completion_logprobs
from snooze.trainer.tasks import TaskSpec, warmup_stream
from snooze.trainer.tokenizer import EOS, PAD, CharTokenizer

__all__ = ["WarmupConfig", "WarmupResult", "warmup", "default_cache_dir", "encode_answers"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WarmupConfig:
    """How the base model is made."""

    target_accuracy: float = 0.5
    """Stop once the validation accuracy on a fresh draw reaches this: the mean over tasks, or each
    task's own with ``per_task``."""

    per_task: bool = False
    """A target per task, not a mean: stop once *every* task's own validation accuracy has reached
    ``target_accuracy`` (a mean lets one task start near 1 and another near 0). Every task stays in the
    batches until then: a task taken out of them once it reached its target was forgotten within 25
    steps (``rev`` 0.41 -> 0.0 while ``count`` trained on; docs/results.md)."""

    val_temperature: float = 0.0
    """0: greedy validation; 0.001 or above: avg@k at this temperature (set it to the rollout temperature,
    so the target is on the accuracy RL optimises)."""

    val_samples: int = 1
    """Completions per validation prompt when ``val_temperature`` > 0 (the k of avg@k)."""

    max_steps: int = 6000
    """Give up (and keep the last weights) after this many optimizer steps."""

    batch_size: int = 64
    """Problems per supervised step."""

    lr: float = 2e-3
    """AdamW learning rate (cosine-free: constant after a short linear warm-up)."""

    eval_every: int = 100
    """Steps between validation checks."""

    val_per_task: int = 100
    """Validation problems per task (fresh, outside the RL pool and test split)."""

    seed: int = 0
    """Seeds the weights' init, the problem stream and the validation draw."""

    def __post_init__(self) -> None:
        as_real(self.target_accuracy, "WarmupConfig.target_accuracy", 0.0, 1.0, above=True)
        object.__setattr__(self, "per_task", as_bool(self.per_task, "WarmupConfig.per_task"))
        check_temperature(self.val_temperature, "WarmupConfig.val_temperature", greedy=True)
        as_real(self.lr, "WarmupConfig.lr", 0.0, above=True)
        for name in ("max_steps", "batch_size", "eval_every", "val_per_task", "val_samples"):
            check_int(self, name, 1)


@dataclass
class WarmupResult:
    """The base weights and how they were reached."""

    state_dict: dict[str, torch.Tensor]
    steps: int
    val_accuracy: float
    val_by_task: dict[str, float]
    seconds: float
    key: str
    cached: bool
    task_steps: dict[str, int] = field(default_factory=dict)
    """Per task, the first validation check at which it had reached the target (absent: never)."""


def default_cache_dir() -> Path:
    """``$SNOOZE_CACHE_DIR`` or ``~/.cache/snooze``."""
    return Path(os.environ.get("SNOOZE_CACHE_DIR", Path.home() / ".cache" / "snooze"))


def encode_answers(tok: CharTokenizer, answers: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded ``answer + EOS`` ids ``[N, T]`` and their mask."""
    seqs = [[*tok.encode(a), EOS] for a in answers]
    width = max(len(s) for s in seqs)
    ids = np.full((len(seqs), width), PAD, dtype=np.int64)
    for row, s in enumerate(seqs):
        ids[row, : len(s)] = s
    return ids, ids != PAD


def _key(cfg: WarmupConfig, model_cfg: ModelConfig, specs: Sequence[TaskSpec], exclude: Iterable[str]) -> str:
    h = hashlib.sha256()
    h.update(
        json.dumps(
            {"warmup": asdict(cfg), "model": model_cfg.to_dict(), "tasks": [s.name for s in specs]}, sort_keys=True
        ).encode()
    )
    h.update("\x00".join(sorted(exclude)).encode())
    return h.hexdigest()[:16]


def _batches(
    streams: Mapping[str, Iterator[tuple[str, str]]], names: Sequence[str], size: int
) -> tuple[list[str], list[str]]:
    """``size`` problems drawn from the tasks' streams in turn."""
    pairs = [next(streams[names[i % len(names)]]) for i in range(size)]
    return [p for p, _ in pairs], [a for _, a in pairs]


def warmup(
    specs: Sequence[TaskSpec],
    exclude: Iterable[str],
    cfg: WarmupConfig,
    model_cfg: ModelConfig,
    cache_dir: Path | None = None,
    device: str = "cpu",
    evaluate: Callable[[TinyGPT, dict[str, list[dict[str, Any]]]], dict[str, float]] | None = None,
) -> WarmupResult:
    """Train (or load from cache) the base model. ``exclude``: every RL-pool and test prompt."""
    from snooze.trainer.evaluate import accuracy_by_task, sampled_accuracy_by_task

    exclude = frozenset(exclude)
    key = _key(cfg, model_cfg, specs, exclude)
    path = (cache_dir or default_cache_dir()) / f"warmup-{key}"
    if (path / "model.pt").exists() and (path / "meta.json").exists():
        return _cached(path, key)
    if evaluate is None:
        evaluate = (
            (lambda m, sets: accuracy_by_task(m, sets))
            if cfg.val_temperature == 0
            else (lambda m, sets: sampled_accuracy_by_task(m, sets, cfg.val_samples, cfg.val_temperature))
        )
    result = _train(specs, exclude, cfg, model_cfg, device, evaluate)
    result.key = key
    path.mkdir(parents=True, exist_ok=True)
    tmp = path / "model.pt.tmp"
    try:
        torch.save(result.state_dict, tmp)
        tmp.replace(path / "model.pt")
    except BaseException:  # a full disk: leave no partial file behind
        remove_quietly(tmp)
        raise
    meta = {
        "steps": result.steps,
        "val_accuracy": result.val_accuracy,
        "val_by_task": result.val_by_task,
        "seconds": result.seconds,
        "task_steps": result.task_steps,
    }
    # written last and atomically: a run killed while caching leaves no meta.json, so the next one trains again
    write_atomic(
        path / "meta.json", json.dumps({**meta, "config": asdict(cfg), "model": model_cfg.to_dict()}, indent=1)
    )
    return result


def _cached(path: Path, key: str) -> WarmupResult:
    """The cached warm-up in ``path``; a damaged cache is a :class:`StateError` saying to delete it."""
    fix = f"delete {path} to train the warm-up again"
    meta = read_warmup_meta(path / "meta.json", fix)  # (int() read true as 1 step, 0.9 as 0)
    try:
        with open_regular(path / "model.pt") as fh:  # (a FIFO there is refused, not read)
            sd = torch.load(fh, map_location="cpu", weights_only=True)
        result = WarmupResult(
            sd,
            meta["steps"],
            meta["val_accuracy"],
            meta["val_by_task"],
            meta["seconds"],
            key,
            True,
            meta["task_steps"],
        )
    except Exception as exc:  # torch raises many types for a damaged file; translate at the boundary
        raise StateError(f"{path}: the cached warm-up cannot be read ({type(exc).__name__}: {exc}); {fix}") from None
    logger.info("warm-up %s loaded from cache (%d steps, val accuracy %.3f)", key, result.steps, result.val_accuracy)
    return result


def _val_sets(specs: Sequence[TaskSpec], exclude: frozenset[str], cfg: WarmupConfig) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for spec in specs:
        stream = warmup_stream([spec], exclude, seed=cfg.seed + 7919)  # a different draw from training's
        out[spec.name] = [{"prompt": p, "answer": a} for p, a in (next(stream) for _ in range(cfg.val_per_task))]
    return out


def _train(
    specs: Sequence[TaskSpec],
    exclude: frozenset[str],
    cfg: WarmupConfig,
    model_cfg: ModelConfig,
    device: str,
    evaluate: Callable[[TinyGPT, dict[str, list[dict[str, Any]]]], dict[str, float]],
) -> WarmupResult:
    t0 = time.perf_counter()
    torch.manual_seed(cfg.seed)
    model = TinyGPT(model_cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    tok = CharTokenizer()
    val = _val_sets(specs, exclude, cfg)
    # one stream per task, drawn in turn: the same problems as one stream over every task
    streams = {s.name: warmup_stream([s], exclude, seed=cfg.seed) for s in specs}
    names = [s.name for s in specs]
    task_steps: dict[str, int] = {}  # the first check at which each task had reached the target
    acc: dict[str, float] = {}
    step = 0
    while step < cfg.max_steps:
        loss = _supervised_step(
            model, opt, tok, *_batches(streams, names, cfg.batch_size), cfg.lr * min(1.0, (step + 1) / 100), device
        )
        step += 1
        if step % cfg.eval_every == 0 or step == cfg.max_steps:
            acc = evaluate(model, val)
            logger.info(
                "warm-up step %d loss %.3f val accuracy %.3f %s", step, loss, float(np.mean(list(acc.values()))), acc
            )
            task_steps.update({n: step for n in names if n not in task_steps and acc[n] >= cfg.target_accuracy})
            if _reached(acc, cfg):
                break
    if not acc or not _reached(acc, cfg):
        logger.warning(
            "warm-up stopped at max_steps=%d below target accuracy %.2f: %s", cfg.max_steps, cfg.target_accuracy, acc
        )
    sd = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    mean = float(np.mean(list(acc.values()))) if acc else 0.0
    return WarmupResult(sd, step, mean, acc, time.perf_counter() - t0, "", False, task_steps)


def _reached(acc: Mapping[str, float], cfg: WarmupConfig) -> bool:
    """Every task at its target (``per_task``), or the mean over tasks at it."""
    values = list(acc.values())
    return bool(values) and (min(values) if cfg.per_task else float(np.mean(values))) >= cfg.target_accuracy


def _supervised_step(
    model: TinyGPT,
    opt: torch.optim.Optimizer,
    tok: CharTokenizer,
    prompts: list[str],
    answers: list[str],
    lr: float,
    device: str,
) -> float:
    """One teacher-forced step on ``answer + EOS`` given the prompt; the loss."""
    pi, pm = (torch.from_numpy(x).to(device) for x in tok.encode_prompts(prompts))
    ai, am = (torch.from_numpy(x).to(device) for x in encode_answers(tok, answers))
    logp = completion_logprobs(model, pi, pm, ai, am)  # [B, T]
    loss = -logp.sum() / am.sum()
    for g in opt.param_groups:
        g["lr"] = lr  # linear warm-up of the lr over the first 100 steps (the caller's schedule)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()

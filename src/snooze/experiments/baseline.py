"""Baseline completions for the built-in tasks, from one or more checkpoints of the reference model.

Each model samples ``samples`` completions of every RL-pool prompt (temperature as in training) and
the exact-answer verifier scores them; one output row per ``(dataset, id, model)`` with the list of
rewards, which is what :func:`snooze.analysis.stratify` reads. torch and the trainer are imported
inside the functions, so importing :mod:`snooze.analysis` stays numpy-only.

The pool must be the one the training run draws from: same task specs, pool and test sizes and
seed (the ids, ``"add:1-3/pool/17"``, are derived from them, so a mismatch shows up as unknown ids
when the curriculum is applied).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from snooze._kit.files import open_regular, write_atomic
from snooze._kit.json import read_json
from snooze._kit.record import Record
from snooze.core.errors import DataError
from snooze.trainer.config import check_int, check_temperature

__all__ = ["BaselineConfig", "task_pool", "load_checkpoint", "baseline_completions", "write_completions"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BaselineConfig:
    """How baseline completions are sampled."""

    samples: int = 16
    """Completions per prompt and model. 16 resolves pass rates to 1/16; pass rate 1 (too easy) then
    means all 16 were right."""

    temperature: float = 1.0
    """Sampling temperature (use the training run's, so pass rates predict its groups): finite, at least 0.001."""

    pool_size: int = 500
    """RL-pool prompts per task (must match the training run)."""

    test_size: int = 200
    """Held-out prompts per task; drawn first and kept out of the pool (must match the training run)."""

    seed: int = 0
    """Seeds the task splits (must match the training run) and the sampling: an integer >= 0, as every seed in
    snooze (the sampling streams take it modulo 2**64, so any size works; the command line takes up to 2**63 - 1)."""

    chunk: int = 256
    """Prompts per sampling call (bounds memory)."""

    def __post_init__(self) -> None:
        for name in ("samples", "pool_size", "test_size", "chunk"):
            check_int(self, name, 1)
        check_int(self, "seed", 0)  # as Scheduler's seed and Profile.first_seed
        check_temperature(self.temperature, "BaselineConfig.temperature")


def task_pool(specs: Sequence[Any], cfg: BaselineConfig) -> dict[str, list[dict[str, Any]]]:
    """The RL pool of each task, from :func:`snooze.trainer.tasks.task_splits` (the builder ``snooze compare``
    uses, so the same tasks, sizes and seed give the training run's ids)."""
    from snooze.trainer.tasks import task_splits

    pools, _ = task_splits(specs, cfg.pool_size, cfg.test_size, cfg.seed)
    return pools


def load_checkpoint(path: str | os.PathLike[str]) -> Any:
    """A :class:`TinyGPT` from a ``.pt`` state dict, a folder with ``model.pt`` (and ``meta.json`` or
    ``config.json``), or a reference-trainer run folder (its last committed checkpoint).

    The model's shape comes from ``meta.json``'s ``"model"`` (as the warm-up cache writes it) or
    ``config.json``'s (as a trainer checkpoint does), else from the weights' shapes with
    ``ModelConfig``'s default head count.
    """
    import torch

    from snooze.trainer.model import ModelConfig, TinyGPT

    weights = _weights_file(Path(path))
    try:
        with open_regular(weights) as fh:  # (a FIFO is refused, not waited on)
            sd = torch.load(fh, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for a bad file; translate at the boundary
        found = re.search(r"WeightsUnpickler error: (.*)", str(exc))  # torch's own message is a page long
        detail = found.group(1) if found else (str(exc).splitlines() or [type(exc).__name__])[0]
        raise DataError(
            f"{weights}: not a loadable state dict ({detail[:200]}); pass a .pt file saved with torch.save"
        ) from None
    shape = _shape(weights, sd)
    try:
        model = TinyGPT(ModelConfig(**shape))
        model.load_state_dict(sd)
    except (RuntimeError, TypeError, ValueError) as exc:  # ModelConfig's own checks raise ConfigError (a ValueError)
        raise DataError(f"{weights}: weights do not fit the model shape {shape} ({exc})") from None
    return model.eval()


def _weights_file(p: Path) -> Path:
    """The ``model.pt`` of ``p``: the file itself, a folder holding it, or the committed step folder of a
    reference-trainer run folder or of its ``checkpoint/`` (verified against its commit record)."""
    from snooze.trainer.checkpoint import committed

    if p.is_file() or (p / "model.pt").is_file():
        return p if p.is_file() else p / "model.pt"
    for root in (p / "checkpoint", p):
        folder = committed(root) if (root / "LATEST").is_file() else None
        if folder is not None and (folder / "model.pt").is_file():
            return folder / "model.pt"
    raise DataError(
        f"{p}: no checkpoint (expected a .pt state dict, a folder with model.pt, or a reference-trainer run folder)"
    )


def _shape(weights: Path, sd: Any) -> dict[str, Any]:
    """The model shape of a checkpoint: the ``"model"`` of ``meta.json`` next to it (the warm-up cache's) or of
    ``config.json`` (a reference-trainer step folder's), else read off the weights (default head count). A
    shape from a file must be ``ModelConfig``'s integers and agree with the weights, checked before a model is
    built (a ``d_model`` of ``2**40`` would allocate the model first)."""
    found = _weights_shape(weights, sd)
    for meta_path in (weights.parent / "meta.json", weights.parent / "config.json"):
        meta = read_json(meta_path, DataError) if meta_path.exists() else {}
        shape = meta.get("model") if isinstance(meta, dict) else None
        if isinstance(shape, dict):
            return _checked_shape(Record(shape, str(meta_path), DataError, path="model"), found)
    return found


def _weights_shape(weights: Path, sd: Any) -> dict[str, Any]:
    try:
        vocab, d_model = sd["tok.weight"].shape
        n_layer = len({k.split(".")[1] for k in sd if k.startswith("blocks.")})
        return {"vocab_size": vocab, "d_model": d_model, "n_layer": n_layer, "max_len": sd["pos.weight"].shape[0]}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(
            f"{weights}: not a state dict of the reference trainer's model (no {exc} weights); pass a snooze checkpoint"
        ) from None


def _checked_shape(shape: Record, weights: Mapping[str, int]) -> dict[str, Any]:
    from snooze.trainer.model import ModelConfig

    known = {f.name for f in fields(ModelConfig)}
    unknown = sorted(set(shape.keys()) - known)
    if unknown:
        raise shape.fail(unknown[0], f"not a field of ModelConfig ({sorted(known)})")
    out = {**weights, **{name: shape.integer(name, 1) for name in shape.keys()}}  # a field left out: the weights'
    for name, size in weights.items():
        if name in out and out[name] != size:
            raise shape.fail(name, f"{out[name]}, but the weights have {size}")
    if weights["d_model"] % out.get("n_head", 1):
        raise shape.fail("n_head", f"{out['n_head']} heads do not divide d_model={weights['d_model']}")
    return out


def _rewards(model: Any, records: Sequence[Mapping[str, Any]], cfg: BaselineConfig, gen: Any) -> list[list[float]]:
    import torch

    from snooze.trainer.config import MAX_NEW_TOKENS
    from snooze.trainer.model import sample
    from snooze.trainer.tasks import verify
    from snooze.trainer.tokenizer import CharTokenizer

    tok = CharTokenizer()
    out: list[list[float]] = []
    for start in range(0, len(records), cfg.chunk):
        chunk = records[start : start + cfg.chunk]
        ids, mask = tok.encode_prompts([r["prompt"] for r in chunk])
        roll = sample(
            model, torch.from_numpy(ids), torch.from_numpy(mask), cfg.samples, MAX_NEW_TOKENS, cfg.temperature, gen
        )
        texts = [tok.decode(t) for t in roll.tokens.numpy()]  # [N*K], row n*K + k
        for n, rec in enumerate(chunk):
            out.append([verify(texts[n * cfg.samples + k], rec["answer"]) for k in range(cfg.samples)])
    return out


def _stream_seed(seed: int, m: int) -> int:
    """The seed of model ``m``'s sampling stream (``m``: its place among the models): ``seed * 1_000_003 + m``
    modulo 2**64, the range a torch generator takes. Below 2**64 (every seed up to about 1.8e13) that is the
    product itself, as it always was; a larger seed wraps around instead of overflowing the generator."""
    return (seed * 1_000_003 + m) % 2**64


def baseline_completions(
    models: Mapping[str, Any],
    pools: Mapping[str, Sequence[Mapping[str, Any]]],
    cfg: BaselineConfig,
    progress: Callable[[str, str], None] | None = None,
) -> list[dict[str, Any]]:
    """Rows ``{"dataset", "id", "model", "rewards"}`` for every model (name -> TinyGPT) and pool prompt."""
    import torch

    rows: list[dict[str, Any]] = []
    for m, (model_name, model) in enumerate(models.items()):
        gen = torch.Generator().manual_seed(_stream_seed(cfg.seed, m))  # each model its own sampling stream
        for dataset, records in pools.items():
            if progress is not None:
                progress(model_name, dataset)
            for rec, rewards in zip(records, _rewards(model, records, cfg, gen)):
                rows.append({"dataset": dataset, "id": rec["id"], "model": model_name, "rewards": rewards})
    logger.info("baseline: %d rows from %d model(s)", len(rows), len(models))
    return rows


def write_completions(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike[str]) -> None:
    """Write rows as JSONL (the input format of ``snooze stratify``), atomically: a write that fails (a full disk)
    leaves the file as it was and no temporary file beside it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        write_atomic(path, "".join(json.dumps(r) + "\n" for r in rows).encode())
    except OSError as exc:  # named after the file asked for, not its temporary one (or none: a full disk)
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc

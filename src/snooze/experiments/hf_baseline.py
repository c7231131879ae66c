"""Baseline completions of *your* dataset from any Hugging Face causal LM (``snooze baseline --model M --dataset F``).

The rows ``snooze stratify`` reads (``{"dataset", "id", "model", "rewards"}``) must name the prompts as the
trainer that will take the curriculum names them, so the dataset file is read as that trainer reads it:

- **verl** (rows with ``data_source``, a chat ``prompt``, ``reward_model.ground_truth``,
  ``extra_info.index``; verl's parquet): dataset ``data_source``, id ``extra_info.index``: the verl
  adapter's ``(data_source, extra_info.index)``.
- **TRL** (rows with a ``prompt``, text or chat, and any other columns): dataset ``train``, id the ``id``
  column when there is one, else the prompt's key (``<16 hex digits>``, ``#k`` for a repeated prompt): what
  ``SnoozeGRPOTrainer`` calls the rows of the same ``train_dataset``, in the same order.

The reward of a completion: ``reward`` (:func:`load_reward`), a verl custom reward function
(``compute_score(data_source, solution_str, ground_truth, extra_info)``, returning a number or a dict with
``score``) or a TRL reward function (``f(prompts, completions, **columns) -> list``), scaled to
``reward_range``; without one, 1.0 when the row's answer (``reward_model.ground_truth``, or an ``answer``,
``solution`` or ``ground_truth`` column) appears in the completion, else 0.0.

Sampling: ``samples`` completions per prompt at ``temperature`` (``do_sample``), ``max_new_tokens`` each,
``chunk`` prompts per ``generate`` call, seeded; a chat prompt goes through the tokenizer's chat template
(with the generation prompt), a text prompt as it is. torch and transformers are imported here only.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snooze._kit.checks import as_int, finite_float
from snooze.core.errors import ConfigError, DataError, SnoozeError

__all__ = ["PromptRow", "read_prompts", "load_reward", "hf_completions", "ANSWER_COLUMNS", "TRL_DATASET"]

log = logging.getLogger(__name__)

ANSWER_COLUMNS = ("answer", "solution", "ground_truth")
"""TRL rows: the columns the default reward reads the answer from, the first present."""

TRL_DATASET = "train"  # SnoozeGRPOTrainer's one dataset


@dataclass(frozen=True)
class PromptRow:
    """One prompt of the dataset file, named as its trainer names it."""

    dataset: str
    id: str | int
    prompt: Any
    """Text, or chat messages (a list of ``{"role", "content"}``)."""
    answer: Any
    """The ground truth the default reward looks for (``None``: none)."""
    row: dict[str, Any]
    """The whole row (a TRL reward function gets its columns; a verl one its ``extra_info``)."""


def _rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        from snooze.core.source import read_parquet

        try:
            return list(read_parquet(path).to_pylist())
        except SnoozeError:
            raise
        except Exception as exc:  # pyarrow raises many types for a bad file: translate at the boundary
            raise DataError(f"{path}: not a readable Parquet file ({exc})") from None
    from snooze.logs.importers import objects

    return [obj for _, obj in objects(path)]


def _verl_row(path: Path, i: int, row: dict[str, Any]) -> PromptRow:
    extra = row.get("extra_info")
    index = extra.get("index") if isinstance(extra, Mapping) else None
    if index is None or isinstance(index, bool) or not isinstance(index, (str, int)):
        raise DataError(
            f"{path}, row {i + 1}, field 'extra_info.index': {index!r}; the verl adapter names a prompt by "
            "(data_source, extra_info.index), so every row needs an index"
        )
    truth = row.get("reward_model")
    return PromptRow(str(row["data_source"]), index, row.get("prompt"), (truth or {}).get("ground_truth"), row)


def read_prompts(path: str | os.PathLike[str]) -> tuple[list[PromptRow], str]:
    """The prompts of a dataset file (JSONL or Parquet) and its kind (``verl`` or ``trl``); see the module docstring."""
    from snooze.integrations.trl import keyed_ids

    path = Path(path)
    rows = _rows(path)
    if not rows:
        raise DataError(f"{path}: no rows; a dataset file holds one prompt a row")
    missing = next((i for i, r in enumerate(rows) if "prompt" not in r), None)
    if missing is not None:
        raise DataError(f"{path}, row {missing + 1}, field 'prompt': missing; every row needs its prompt")
    if all("data_source" in r for r in rows):
        return [_verl_row(path, i, r) for i, r in enumerate(rows)], "verl"
    has_id = all("id" in r for r in rows)
    ids = [r["id"] for r in rows] if has_id else keyed_ids(r["prompt"] for r in rows)[0]
    if len(set(ids)) != len(ids):
        raise DataError(f"{path}: the 'id' column repeats ids; every prompt needs its own")
    column = next((c for c in ANSWER_COLUMNS if all(c in r for r in rows)), None)
    return [PromptRow(TRL_DATASET, i, r["prompt"], r[column] if column else None, r) for i, r in zip(ids, rows)], "trl"


def load_reward(spec: str) -> Callable[..., Any]:
    """``FILE.py:NAME`` or ``module:NAME`` (``NAME`` default ``compute_score``, verl's default name)."""
    target, _, name = spec.rpartition(":") if ":" in spec else (spec, "", "compute_score")
    name = name or "compute_score"
    try:
        if target.endswith(".py"):
            module_spec = importlib.util.spec_from_file_location(Path(target).stem, target)
            if module_spec is None or module_spec.loader is None or not Path(target).is_file():
                raise ConfigError(f"--reward {spec!r}: {target} is not a Python file")
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except ConfigError:
        raise
    except Exception as exc:  # the user's module failed to import: say which and why, no traceback
        raise ConfigError(f"--reward {spec!r}: {target} could not be loaded ({type(exc).__name__}: {exc})") from None
    func = getattr(module, name, None)
    if not callable(func):
        raise ConfigError(f"--reward {spec!r}: {target} has no function {name!r}")
    return func


def _score(value: Any, where: str) -> float:
    value = value.get("score") if isinstance(value, Mapping) else value
    out = finite_float(value)
    if out is None:
        raise DataError(f"{where}: the reward function returned {value!r}, not a finite number")
    return out


def _rewards(
    reward: Callable[..., Any] | None, rows: Sequence[PromptRow], texts: list[str], samples: int
) -> list[list[float]]:
    """``[prompt][sample]`` rewards of the completions (``texts``: prompt-major, ``samples`` each)."""
    if reward is None:
        return [
            [float(r.answer is not None and str(r.answer).strip() in t) for t in texts[n * samples : (n + 1) * samples]]
            for n, r in enumerate(rows)
        ]
    params = inspect.signature(reward).parameters
    keywords = any(p.kind is p.VAR_KEYWORD for p in params.values())
    if "completions" in params or (keywords and "solution_str" not in params):  # TRL's form, else verl's
        columns = {k: [r.row.get(k) for r in rows for _ in range(samples)] for k in rows[0].row if k != "prompt"}
        prompts = [r.prompt for r in rows for _ in range(samples)]
        out = list(reward(prompts=prompts, completions=texts, **columns))
        if len(out) != len(texts):
            raise DataError(f"the reward function returned {len(out)} rewards for {len(texts)} completions")
        flat = [0.0 if v is None else _score(v, "reward") for v in out]
    else:
        flat = [
            _score(reward(r.dataset, t, r.answer, r.row.get("extra_info")), f"prompt {r.dataset}/{r.id}")
            for n, r in enumerate(rows)
            for t in texts[n * samples : (n + 1) * samples]
        ]
    return [flat[n * samples : (n + 1) * samples] for n in range(len(rows))]


def _prompt_text(tok: Any, prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if getattr(tok, "chat_template", None):
        return str(tok.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=False))
    return "\n".join(str(m.get("content", "")) for m in prompt)


def _load(name: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(name)
        model = AutoModelForCausalLM.from_pretrained(name)
    except (OSError, ValueError) as exc:  # transformers' errors for a path or name it cannot load
        raise ConfigError(
            f"--model {name}: not a causal LM transformers can load ({str(exc).splitlines()[0]})"
        ) from None
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok, model.eval()


def _generate(tok: Any, model: Any, part: Sequence[PromptRow], samples: int, temperature: float, new: int) -> list[str]:
    """``samples`` sampled completions of each prompt of ``part``, prompt-major (``[len(part) * samples]``)."""
    import torch

    enc = tok([_prompt_text(tok, r.prompt) for r in part], return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        gen = model.generate(
            **enc,
            do_sample=True,
            temperature=temperature,
            top_k=0,
            max_new_tokens=new,
            num_return_sequences=samples,
            pad_token_id=tok.pad_token_id,
        )  # [len(part) * samples, prompt + new]
    return list(tok.batch_decode(gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True))


def hf_completions(
    model_name: str,
    label: str,
    rows: Sequence[PromptRow],
    samples: int,
    temperature: float,
    max_new_tokens: int,
    chunk: int,
    seed: int,
    reward: Callable[..., Any] | None = None,
    reward_range: tuple[float, float] = (0.0, 1.0),
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Rows ``{"dataset", "id", "model": label, "rewards"}`` (rewards scaled to ``[0, 1]`` by ``reward_range``)."""
    import torch

    as_int(max_new_tokens, "--max-new-tokens", 1)
    seed = as_int(seed, "seed", 0)  # as BaselineConfig.seed
    tok, model = _load(model_name)
    torch.manual_seed(seed % 2**64)  # torch takes 64 bits; below 2**64 (every seed the CLI takes) the seed itself
    low, high = reward_range
    out: list[dict[str, Any]] = []
    for start in range(0, len(rows), chunk):
        part = rows[start : start + chunk]
        texts = _generate(tok, model, part, samples, temperature, max_new_tokens)
        for r, rewards in zip(part, _rewards(reward, part, texts, samples)):
            bad = [x for x in rewards if x < low or x > high]
            if bad:
                raise DataError(
                    f"prompt {r.dataset}/{r.id}: reward {bad[0]:g} outside --reward-range [{low:g}, {high:g}]"
                )
            out.append(
                {
                    "dataset": r.dataset,
                    "id": r.id,
                    "model": label,
                    "rewards": [(x - low) / (high - low) for x in rewards],
                }
            )
        if progress is not None:
            progress(min(start + chunk, len(rows)), len(rows))
    log.info("baseline of %s: %d prompts x %d samples", model_name, len(rows), samples)
    return out

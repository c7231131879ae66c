"""What the tests of ``SnoozeAsyncGRPOTrainer`` share: prompts of three kinds, a reward function TRL's spawned
rollout worker can import, the trainer built on the CPU stand-ins (``_trl_async_server``), and :class:`Events`, a
record of every candidate the scheduler issued and every group reported (appended line by line, so it survives a
killed process)."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from integrations import _trl_tiny as tiny

G = 4  # completions per prompt
ROWS = 8  # rows TRL trains on a step: per_device_train_batch_size 8 x 1 process x 1 accumulation step
KINDS = "eemmhmmmmmmm"  # e: always solved (too easy), h: never (too hard), m: a coin per completion
RECORDS = [
    {"id": f"{kind}{i}", "prompt": [{"role": "user", "content": line}]}
    for i, (kind, line) in enumerate(zip(KINDS, tiny.LINES))
]
EASY = {r["id"] for r in RECORDS if r["id"][0] == "e"}
SNOOZE = {"policy": "snooze", "options": {"factor": 5}, "max_gen_rounds": 3}


def score(completions: list[Any], id: list[str], **kwargs: Any) -> list[float]:
    """Easy prompts pass, the hard one fails, a mid prompt's completion passes on the parity of its text's CRC
    (a fair coin over sampled texts, the same for the same text)."""
    out = []
    for completion, i in zip(completions, id):
        text = completion[-1]["content"] if isinstance(completion, list) else completion
        out.append(1.0 if i[0] == "e" else 0.0 if i[0] == "h" else float(zlib.crc32(text.encode()) % 2))
    return out


def config(out: Path, url: str, **kw: Any) -> Any:
    from trl.experimental.async_grpo import AsyncGRPOConfig

    base = {
        "output_dir": str(out),
        "per_device_train_batch_size": ROWS,
        "gradient_accumulation_steps": 1,
        "num_generations": G,
        "max_completion_length": 4,
        "max_steps": 6,
        "logging_steps": 1,
        "report_to": "none",
        "use_cpu": True,
        "bf16": False,
        "vllm_server_base_url": url,
        "save_strategy": "steps",
        "save_steps": 2,
        "disable_tqdm": True,
        "learning_rate": 0.05,
        "heartbeat_stale_after_s": 120,
        "max_inflight_tasks": 4 * G,  # 4 groups out at most: 2 rounds of 2
        "seed": 0,
    }
    return AsyncGRPOConfig(**{**base, **kw})


def trainer(model: str, url: str, out: Path, events: Events | None = None, **kw: Any) -> Any:
    """A SnoozeAsyncGRPOTrainer on the stand-ins: snoozing, at most 3 rounds a step."""
    from datasets import Dataset

    from integrations._trl_async_server import StandInWeightTransfer
    from snooze.integrations.trl import SnoozeAsyncGRPOTrainer

    own = {k: kw.pop(k) for k in ("snooze_config", "scheduler", "on_batch", "reward_log") if k in kw}
    own.setdefault("snooze_config", SNOOZE)
    built = SnoozeAsyncGRPOTrainer(
        model=model,
        reward_funcs=score,
        args=config(out, url, **kw),
        train_dataset=Dataset.from_list(RECORDS),
        processing_class=tiny.chat_tokenizer(),
        weight_transfer=StandInWeightTransfer(url),
        **own,
    )
    if events is not None:
        events.watch(built.run)
    return built


class Events:
    """Every candidate the run issues and every group it reports, as JSON lines in ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def watch(self, run: Any) -> None:
        send, report = run.send, run.report

        def sent(ticket: int, record: dict[str, Any]) -> None:
            self._write({"event": "issued", "ticket": ticket, "id": record["id"], "step": run.scheduler.step_index})
            send(ticket, record)

        def reported(item: Any) -> None:
            cand = run.out[int(item.ticket)][0]
            self._write({"event": "reported", "ticket": cand.ticket, "id": cand.id, "step": run.scheduler.step_index})
            report(item)

        run.send, run.report = sent, reported

    def _write(self, event: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(event) + "\n")

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(x) for x in self.path.read_text().splitlines() if x.strip()]

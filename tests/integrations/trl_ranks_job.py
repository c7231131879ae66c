"""The job ``test_trl_ranks.py`` launches: the real TRL ``GRPOTrainer`` under torchrun (or one plain process).

    python -m torch.distributed.run --standalone --nproc_per_node 2 trl_ranks_job.py OUT SCENARIO...
    python trl_ranks_job.py OUT SCENARIO...          # the same scenarios on one process

Each scenario trains a tiny Llama (built here, nothing downloaded) with ``SnoozeGRPOTrainer`` and writes
what every rank saw to ``OUT/<scenario>/rank<r>.json``; the test compares the ranks, the runs, and the
one-process run. Scenarios (run in this order, in the same processes):

- ``full``: G=4, 3 candidates a round (so a group spans both ranks), 4 steps, a checkpoint at step 2;
- ``resume``: ``full`` resumed from its ``checkpoint-2``, in the same output folder and reward log;
- ``padded``: G=3, 3 candidates a round (9 rows: one inert group pads the round to 6 rows a rank);
- ``seed``: rank 1 builds its scheduler with another seed (refused at construction);
- ``excluded``: after step 0 the main process alone excludes a prompt (refused before step 1 generates);
- ``flipped``: at step 1 rank 1 reports one reward flipped (refused after step 1).

The reward function gives every rank-independent answer the scheduler needs: easy prompts pass, the
hard one fails, a mid prompt's completions alternate 0, 1, 0, 1 within their group, whatever the
sampled text. So the decisions can be compared across runs; learning still happens (mid groups have
signal, so every parameter moves).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the tiny model of test_trl

import snooze  # noqa: E402
from integrations.test_trl import _model, _tokenizer  # noqa: E402

RECORDS = [
    {"id": i, "prompt": {"e": "q easy", "m": "q mid", "h": "q hard"}[i[0]]}
    for i in ["e0", "m0", "e1", "m1", "h0", "m2"]
]
EASY, HARD = {"e0", "e1"}, {"h0"}


class Scorer:
    """Easy 1, hard 0, a mid prompt's completions alternate 0, 1 along their group (same on any layout)."""

    def __init__(self, G: int) -> None:
        self.G = G
        self.scored: list[tuple[int, str]] = []  # (global step, id) of every completion this rank scored
        self.__name__ = "scorer"

    def __call__(
        self, prompts: list[Any], completions: list[str], id: list[str], trainer_state: Any, **kw: Any
    ) -> list[float]:
        self.scored.extend((trainer_state.global_step, i) for i in id)
        seen: dict[str, int] = {}
        out = []
        for i in id:
            k = seen.get(i, 0)  # this row's place among the rows of its id this rank scores now
            seen[i] = k + 1
            out.append(1.0 if i in EASY else 0.0 if i in HARD else float((k % self.G) % 2))
        return out


def _trainer_class() -> type:
    from snooze.integrations.trl import SnoozeGRPOTrainer

    class Recording(SnoozeGRPOTrainer):  # type: ignore[misc,valid-type]
        """Keeps, per step, what this rank handed TRL's loss; can flip a reward to simulate a diverging rank."""

        flip_at: int | None = None

        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self.handed: list[dict[str, Any]] = []

        def _scheduled_generation(self) -> dict[str, Any]:
            out = super()._scheduled_generation()
            live = out["completion_mask"].sum(dim=1) > 0
            self.handed.append(
                {
                    "rows": int(live.shape[0]),
                    "live": int(live.sum()),
                    "live_zero_adv": int((out["advantages"][live] == 0).sum()),
                    "num_items": int(out["num_items_in_batch"]),
                    "local_tokens": int(out["completion_mask"].sum()),
                }
            )
            return out

        def _slot_rewards(self) -> np.ndarray:
            rewards = super()._slot_rewards()
            if self.scheduler.step_index == self.flip_at and self.accelerator.process_index == 1:
                rewards[0, 0] = 1.0 - rewards[0, 0]  # slot 0 is candidate 0's group
            return rewards

    return Recording


def _params_crc(model: Any) -> int:
    crc = 0
    for _, p in sorted(model.named_parameters()):
        crc = zlib.crc32(p.detach().cpu().numpy().tobytes(), crc)
    return crc


def build(out: Path, G: int, max_steps: int, seed: int = 0, gen: int = 3) -> tuple[Any, Scorer, list[dict[str, Any]]]:
    from datasets import Dataset
    from trl import GRPOConfig

    world = int(os.environ.get("WORLD_SIZE", "1"))
    batch_size = 2
    cfg = snooze.SchedulerConfig(
        batch_size=batch_size,
        group_size=G,
        gen_batch_size=gen,
        options=snooze.SnoozeOptions(factor=5),
        max_gen_rounds=3,
    )
    sched = snooze.Scheduler({"toy": RECORDS}, cfg, seed=seed)
    accumulate = 2 if batch_size * G % (world * 2) == 0 else 1  # TRL: generation batch = per device x world x this
    per_device = batch_size * G // (world * accumulate)
    args = GRPOConfig(
        output_dir=str(out / "out"),
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=accumulate,
        num_generations=G,
        max_completion_length=3,
        max_steps=max_steps,
        learning_rate=5e-2,
        logging_steps=1,
        save_strategy="steps",
        save_steps=2,
        report_to=[],
        use_cpu=True,
        bf16=False,
        seed=0,
        beta=0.0,
        temperature=1.0,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    tok, scorer, steps = _tokenizer(), Scorer(G), []
    trainer = _trainer_class()(
        model=_model(len(tok)),
        reward_funcs=scorer,
        args=args,
        train_dataset=Dataset.from_list(RECORDS),
        processing_class=tok,
        scheduler=sched,
        reward_log=out / "rewards.jsonl",
    )

    def on_batch(b: snooze.Batch) -> None:
        steps.append(
            {
                "step": b.step,
                "digest": list(trainer.last_digest),
                "ids": [c.id for c in b.candidates],
                "signal": bool(b.signal.all()),
                "min_std": float(b.rewards.std(axis=1).min()) if len(b) else None,
                "totals": {k: v for k, v in b.metrics.items() if k.startswith("total/")},
            }
        )

    trainer.on_batch = on_batch
    return trainer, scorer, steps


def run(out: Path, name: str, rank: int) -> dict[str, Any]:
    """One scenario on this rank; returns what the test reads."""
    resumes = name in ("resume", "damaged")  # both resume the full run from its checkpoint-2
    folder = out / ("full" if resumes else name)
    G = 3 if name == "padded" else 4
    steps_n = {"full": 4, "resume": 4, "damaged": 4, "padded": 3}.get(name, 2)
    seed = 1 if name == "seed" and rank == 1 else 0
    report: dict[str, Any] = {"rank": rank}
    try:
        trainer, scorer, steps = build(folder, G, steps_n, seed=seed)
    except snooze.IntegrationError as exc:
        return {**report, "error": str(exc)}
    if name == "excluded" and rank == 0:
        trainer.on_batch = lambda b, on=trainer.on_batch: (
            on(b),
            trainer.scheduler.set_excluded("toy", ["m0", "m1", "m2", "h0"]),
        )
    if name == "flipped":
        trainer.flip_at = 1
    if name == "damaged" and rank == 1:  # this process alone cannot read the state (its node's copy is damaged)
        import snooze.integrations.trl._trainer as adapter

        def damaged(path: Any) -> Any:
            raise snooze.StateError(f"{path}: simulated damage on this node only")

        adapter.load_state = damaged
    log_file = folder / "rewards.jsonl"
    lines_before = len(log_file.read_text().splitlines()) if log_file.exists() else None
    before = _params_crc(trainer.model)
    try:
        trainer.train(resume_from_checkpoint=str(folder / "out" / "checkpoint-2") if resumes else None)
    except snooze.IntegrationError as exc:
        report["error"] = str(exc)
        report["cause"] = repr(exc.__cause__) if exc.__cause__ is not None else None
    if name == "damaged":
        report["log_lines"] = [lines_before, len(log_file.read_text().splitlines())]
    logged = [{k: v for k, v in h.items() if k.startswith("snooze/")} for h in trainer.state.log_history]
    return {
        **report,
        "steps": steps,
        "scored": scorer.scored,
        "handed": trainer.handed,
        "params_before": before,
        "params_after": _params_crc(trainer.model),
        "logged": [h for h in logged if h],
    }


def main() -> None:
    torch.set_num_threads(1)  # one thread a process: two processes share the machine's cores
    out, names = Path(sys.argv[1]), sys.argv[2:]
    rank = int(os.environ.get("RANK", "0"))
    for name in names:
        result = run(out, name, rank)
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"rank{rank}.json").write_text(json.dumps(result))
        if name == "full" and rank == 0 and (out / "full" / "rewards.jsonl").exists():
            shutil.copy(out / "full" / "rewards.jsonl", out / "full" / "rewards.uninterrupted.jsonl")
        if torch.distributed.is_initialized():
            torch.distributed.barrier()
    if torch.distributed.is_initialized():  # else gloo's threads can abort the interpreter's exit (SIGABRT, seen in CI)
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()

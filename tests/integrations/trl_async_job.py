"""One SnoozeAsyncGRPOTrainer run in a process of its own, for the kill test of ``test_trl_async.py``:

    python trl_async_job.py FOLDER MODEL_DIR NAME [CHECKPOINT]

trains on the CPU stand-ins (its own stand-in server, in this process), saving a checkpoint every step, and
records every issued candidate and reported group in ``FOLDER/events.NAME.jsonl`` and every prompt the server
was asked for in ``FOLDER/asked.NAME.jsonl``; with CHECKPOINT it resumes from it. The test kills it with SIGKILL
in the middle of a step, and resumes the run in its own process.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: the helpers, and the reward function the spawned worker imports


class _Patch:
    def setattr(self, obj: object, name: str, value: object) -> None:
        setattr(obj, name, value)


def main() -> None:
    import torch

    torch.set_num_threads(1)
    from integrations import _trl_async as job
    from integrations._trl_async_server import StandInServer, cpu_seams

    folder, model, name = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    checkpoint = sys.argv[4] if len(sys.argv) > 4 else None
    cpu_seams(_Patch())
    server = StandInServer(model, record=folder / f"asked.{name}.jsonl")
    trainer = job.trainer(
        model,
        server.url,
        folder / "out",
        job.Events(folder / f"events.{name}.jsonl"),
        reward_log=folder / "rewards.jsonl",
        max_steps=6,
        save_steps=1,
    )
    trainer.train(resume_from_checkpoint=checkpoint)
    server.close()


if __name__ == "__main__":
    main()

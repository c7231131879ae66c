"""verl 0.9.1's own ``fit()`` on CPU with partial groups: the snooze trainer at the recommended setting with
``screen_size`` set, in a process of its own (``python -m integrations._verl_screen FOLDER``, ``tests/`` on
``PYTHONPATH``).

The run is ``_verl_fit``'s snooze run (same stand-ins and steps) on ``ROWS`` with ``SCREEN`` added to verl's
overrides, and one probe: after verl's own ``_compute_advantage`` (GRPO, grouped by each trajectory's ``uid``
field), every trained row's TransferQueue key, ``uid`` field, prompt, score and advantage is appended to
``FOLDER/trained.jsonl``, one line per step: what verl trained on, as verl grouped it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from integrations import _verl_fit as fit

K, GEN = 2, 4  # screen_size; data.gen_batch_size: a round of fresh screens (4 x 2) holds a batch's 2 x 4 rollouts
SCREEN = [
    f"data.gen_batch_size={GEN}",
    "trainer.v1.snooze.options.factor=1",  # snooze.RECOMMENDED: snoozing at factor 1, the surplus carried
    "+trainer.v1.snooze.carry_surplus=True",
    f"+trainer.v1.snooze.screen_size={K}",
    "trainer.save_freq=1",  # a checkpoint and a validation after every step: a resume may start at any of them
    "trainer.test_freq=1",  # (validating before a resumed run's first step asks the server what the first run did)
]
TRAINED = "trained.jsonl"
ROWS = [(ds, i, "easy" if i % 4 == 0 else "odd") for ds in ("gsm", "math") for i in range(20)]
"""40 prompts (the stand-in tokenizer's words), so that no prompt is drawn twice in a step: the stand-in server
seeds a sample by (prompt, weights, how often that prompt was asked at those weights), and two requests of one
prompt in flight together (a rest and a fresh screen) would split those draws by timing."""


def _overrides(mode: str, plain: Any = fit.overrides) -> list[str]:
    return [*plain(mode), *SCREEN]


def _plain(value: Any) -> Any:
    value = getattr(value, "data", value)
    return value.item() if hasattr(value, "item") else value


def _probe(folder: Path) -> None:
    """Wrap the snooze trainer's ``_compute_advantage`` (verl's) to write what each step trained on."""
    import transfer_queue as tq

    from integrations._verl_cpu import _rows
    from snooze.integrations.verl import SnoozeTrainer

    verls = SnoozeTrainer._compute_advantage

    def compute(self: Any, batch: Any, metrics: dict) -> Any:
        batch = verls(self, batch, metrics)
        fields = ["uid", "advantages", "rm_scores", "data_source", "extra_info"]
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        uids, sources, extras = (list(data[f]) for f in ("uid", "data_source", "extra_info"))
        scores, advantages = _rows(data["rm_scores"]), _rows(data["advantages"])
        rows = [
            {
                "key": key,
                "uid": str(uids[i]),
                "prompt": [str(sources[i]), _plain(extras[i])["index"]],
                "score": float(scores[i].sum()),
                "advantage": float(advantages[i][0]),  # GRPO's: one value over the response's tokens
            }
            for i, (key, tag) in enumerate(zip(batch.keys, batch.tags))
            if not tag.get("is_padding", False)
        ]
        with open(folder / TRAINED, "a") as out:
            out.write(json.dumps({"step": self.global_steps, "rows": rows}) + "\n")
        return batch

    SnoozeTrainer._compute_advantage = compute


def main(argv: list[str]) -> None:
    folder = Path(argv[0])
    folder.mkdir(parents=True, exist_ok=True)
    fit.overrides = _overrides  # config() and write_data() read the module's names
    fit.ROWS = ROWS
    _probe(folder)
    fit.main(["snooze", str(folder)])


if __name__ == "__main__":
    main(sys.argv[1:])

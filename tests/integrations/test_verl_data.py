"""The prompts the snooze trainer issues are rows of the dataset verl trains on (issue 25).

verl's ``RLHFDataset`` drops overlong prompts (``data.filter_overlong_prompts``) and keeps a sample of
the rows (``data.train_max_samples``, shuffled or not) through HF ``datasets``' ``.filter``/``.select``,
which keep the full Arrow table and an indices mapping. Reading the table gave the scheduler rows verl
no longer had: on 8 rows with 2 filtered, position 6 and 7 did not exist (verl's ``fit()`` stopped with
``IndexError: Invalid key: 6 is out of bounds for size 6``), and a shuffled sample named the wrong rows.
No Ray here: the dataset, the scheduler and the loader are built as ``_init_dataloader`` builds them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="needs the [verl] extra")

from integrations._verl_env import compose, make_parquet  # noqa: E402

pytestmark = [pytest.mark.verl, pytest.mark.timeout(300)]

ROWS8 = [("gsm", i) for i in range(5)] + [("math", 10 + i) for i in range(3)]
LONG = {("gsm", 1), ("math", 11)}  # prompts longer than data.max_prompt_length


def _data(tmp: Path) -> Path:
    path = make_parquet(tmp, ROWS8)
    import datasets

    rows = datasets.Dataset.from_parquet(str(path)).to_list()
    for row in rows:
        if (row["data_source"], row["extra_info"]["index"]) in LONG:
            row["prompt"][0]["content"] += " 1" * 40
    datasets.Dataset.from_list(rows).to_parquet(str(path))
    return path


def _trainer(tmp: Path, *overrides: str) -> Any:
    from verl.trainer.ppo.v1 import get_trainer_cls

    config = compose(tmp, "data.max_prompt_length=16", "data.filter_overlong_prompts_workers=1", *overrides,
                     data=_data(tmp))
    trainer = get_trainer_cls("snooze")(config=config)
    trainer._init_tokenizer()
    trainer._init_dataloader()
    return trainer


def _verl_rows(dataset: Any) -> list[tuple[str, Any]]:
    """What verl hands its workers, row by row (``RLHFDataset.__getitem__``)."""
    return [(r["data_source"], r["extra_info"]["index"]) for r in (dataset[i] for i in range(len(dataset)))]


def _issued(trainer: Any, rounds: int) -> list[tuple[str, Any]]:
    """The rows the loader collates for the scheduler's first rounds, as verl's dataloader path reads them."""
    it = iter(trainer.train_dataloader)
    out = []
    for _ in range(rounds):
        batch = next(it)
        out += [(str(s), dict(getattr(e, "data", e))["index"]) for s, e in zip(batch["data_source"], batch["extra_info"])]
    trainer.snooze._unbound.clear()
    return out


def test_filtered_overlong_prompts_are_not_issued(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, "data.filter_overlong_prompts=True")
    rows = _verl_rows(trainer.train_dataset)
    assert len(rows) == 6 and not LONG & set(rows)  # verl filtered the two long prompts
    assert sorted(trainer.snooze.index.sources["gsm"].ids.tolist()) == [0, 2, 3, 4]
    assert trainer.snooze.config.weights == {"gsm": 4.0, "math": 2.0}  # the rows verl trains on
    issued = _issued(trainer, 3)  # 3 rounds x 2 prompts: every row once (was an IndexError on position 6)
    assert sorted(issued) == sorted(rows)


@pytest.mark.parametrize("shuffle", [True, False])
def test_a_sample_of_the_rows_train_max_samples_is_what_is_issued(tmp_path: Path, shuffle: bool) -> None:
    trainer = _trainer(tmp_path, "data.filter_overlong_prompts=False", "data.train_max_samples=4",
                       f"data.shuffle={shuffle}", "data.seed=3")
    rows = _verl_rows(trainer.train_dataset)
    assert len(rows) == 4
    if shuffle:
        assert rows != [k for k in ROWS8[:4]]  # seed 3 picks other rows than the first four (the test would be moot)
    keys = [(n, i) for n, src in trainer.snooze.index.sources.items() for i in src.ids.tolist()]
    assert sorted(keys) == sorted(rows)
    issued = _issued(trainer, 2)
    assert sorted(issued) == sorted(rows)  # each issued prompt is the row verl hands its workers


def test_sample_then_filter_together(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, "data.filter_overlong_prompts=True", "data.train_max_samples=6",
                       "data.shuffle=True", "data.seed=1")
    rows = _verl_rows(trainer.train_dataset)
    assert not LONG & set(rows) and 4 <= len(rows) <= 6
    assert set(_issued(trainer, (len(rows) + 1) // 2)) == set(rows)  # every row verl kept, nothing else

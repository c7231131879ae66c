"""snooze baseline -> snooze stratify on a tiny checkpoint: the pipeline runs and the ids line up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from snooze.cli.main import main  # noqa: E402
from snooze.experiments.baseline import BaselineConfig, task_pool  # noqa: E402
from snooze.trainer.model import ModelConfig, TinyGPT  # noqa: E402
from snooze.trainer.tasks import parse_tasks  # noqa: E402


def _checkpoint(folder: Path, seed: int) -> Path:
    torch.manual_seed(seed)
    cfg = ModelConfig(n_layer=1, n_head=2, d_model=16)
    folder.mkdir()
    torch.save(TinyGPT(cfg).state_dict(), folder / "model.pt")
    (folder / "meta.json").write_text(json.dumps({"model": cfg.to_dict()}))
    return folder


def test_baseline_then_stratify(tmp_path: Path) -> None:
    a, b = _checkpoint(tmp_path / "a", 0), _checkpoint(tmp_path / "b", 1)
    out = tmp_path / "base.jsonl"
    args = [
        "baseline",
        "--tasks",
        "add:1,rev:3",
        "--model",
        f"a={a}",
        "--model",
        f"b={b / 'model.pt'}",
        "--out",
        str(out),
        "--samples",
        "3",
        "--pool-size",
        "6",
        "--test-size",
        "4",
    ]
    assert main(args) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 * 2 * 6 and {r["model"] for r in rows} == {"a", "b"}
    assert all(len(r["rewards"]) == 3 and set(r["rewards"]) <= {0.0, 1.0} for r in rows)
    pool = task_pool(parse_tasks("add:1,rev:3"), BaselineConfig(pool_size=6, test_size=4))
    assert {r["id"] for r in rows} == {rec["id"] for recs in pool.values() for rec in recs}
    assert main(["stratify", str(out), "--out", str(tmp_path / "s"), "--no-plot", "--models", "a,b"]) == 0
    header = (tmp_path / "s" / "prompts.csv").read_text().splitlines()[0]
    assert "pass_rate/a" in header and "pass_rate/b" in header


def test_baseline_needs_a_model(tmp_path: Path) -> None:
    assert main(["baseline", "--out", str(tmp_path / "x.jsonl")]) == 2


def test_a_trainer_run_folder_loads_its_committed_model_with_its_own_shape(tmp_path: Path) -> None:
    """``--model late=runs/x/snooze/seed0`` (a run folder, its checkpoint/ or a step folder) loads the committed
    model.pt, with the head count of the step folder's config.json (the weights alone cannot tell it)."""
    from snooze.core.errors import DataError
    from snooze.experiments.baseline import load_checkpoint
    from snooze.trainer.checkpoint import commit

    cfg = ModelConfig(n_layer=1, n_head=2, d_model=16)  # not ModelConfig's default head count (4)
    torch.manual_seed(0)
    model = TinyGPT(cfg)

    def write(folder: Path) -> None:
        torch.save(model.state_dict(), folder / "model.pt")
        (folder / "config.json").write_text(json.dumps({"model": cfg.to_dict()}))

    run = tmp_path / "run"
    step = commit(run / "checkpoint", 3, write)
    ids, pos = torch.tensor([[1, 2, 3, 4]]), torch.arange(4)[None]
    mask = torch.ones(1, 4, dtype=torch.bool)
    want = model.eval()(ids, mask, pos)[0]
    for given in (run, run / "checkpoint", step, step / "model.pt"):
        loaded = load_checkpoint(given)
        assert loaded.cfg.n_head == 2, given
        assert torch.equal(loaded(ids, mask, pos)[0], want), given
    with pytest.raises(DataError, match="a reference-trainer run folder"):
        load_checkpoint(tmp_path)

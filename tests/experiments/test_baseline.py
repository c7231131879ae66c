"""snooze baseline -> snooze stratify on a tiny checkpoint: the pipeline runs and the ids line up."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

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


def _tiny_args(tmp_path: Path, *extra: str) -> list[str]:
    """``snooze baseline`` on one tiny checkpoint and a two-prompt pool of ``add:1``."""
    model = tmp_path / "m" if (tmp_path / "m").exists() else _checkpoint(tmp_path / "m", 0)
    out = ["--out", str(tmp_path / "b.jsonl"), "--samples", "2", "--pool-size", "2", "--test-size", "1"]
    return ["baseline", "--tasks", "add:1", "--model", f"m={model}", *out, *extra]


def test_each_model_s_sampling_stream_is_seeded_as_before_and_any_seed_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Model ``m`` samples from a generator seeded ``seed * 1_000_003 + m`` (so today's seeds give today's
    completions), wrapped modulo 2**64 for a seed so large the product overflows the generator."""
    from snooze.experiments import baseline

    seeds: list[int] = []
    real = baseline._rewards
    monkeypatch.setattr(
        baseline,
        "_rewards",
        lambda model, recs, cfg, gen: seeds.append(gen.initial_seed()) or real(model, recs, cfg, gen),
    )
    models = {name: baseline.load_checkpoint(_checkpoint(tmp_path / name, i)) for i, name in enumerate("ab")}
    for seed in (0, 1, 12_345, 2**44):  # 2**44 * 1_000_003 is below 2**64 yet beyond 2**63
        cfg = BaselineConfig(samples=2, pool_size=2, test_size=1, seed=seed)
        seeds.clear()
        baseline.baseline_completions(models, task_pool(parse_tasks("add:1"), cfg), cfg)
        assert seeds == [seed * 1_000_003, seed * 1_000_003 + 1], seed
    for seed in (2**62, 2**63 - 1, 10**30):  # 2**62: the seed that overflowed; 2**63 - 1: the CLI's largest
        cfg = BaselineConfig(samples=2, pool_size=2, test_size=1, seed=seed)
        seeds.clear()
        first = baseline.baseline_completions(models, task_pool(parse_tasks("add:1"), cfg), cfg)
        assert seeds == [(seed * 1_000_003 + m) % 2**64 for m in (0, 1)], seed
        assert baseline.baseline_completions(models, task_pool(parse_tasks("add:1"), cfg), cfg) == first


def test_the_largest_seeds_the_command_line_takes_run(tmp_path: Path) -> None:
    for seed in ("4611686018427387904", str(2**63 - 1)):
        assert main(_tiny_args(tmp_path, "--seed", seed, "--force")) == 0, seed  # the second writes over the first
        assert len((tmp_path / "b.jsonl").read_text().splitlines()) == 2


def test_a_negative_seed_is_refused_as_everywhere_else(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from snooze.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"BaselineConfig.seed=-1: must be an integer >= 0"):
        BaselineConfig(seed=-1)
    assert main(_tiny_args(tmp_path, "--seed", "-1")) == 2
    assert "BaselineConfig.seed=-1: must be an integer >= 0 (option --seed)" in capsys.readouterr().err
    assert not (tmp_path / "b.jsonl").exists()


def _disk_full(*args: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


class _DiskFull:
    """A file that takes half of what is written to it, then says the disk is full."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def write(self, data: Any) -> int:
        self.handle.write(data[: len(data) // 2])
        self.handle.flush()
        _disk_full()

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)

    def __enter__(self) -> _DiskFull:
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.close()


@pytest.mark.parametrize("fails", ["write", "fsync"])
def test_a_write_that_fails_leaves_the_old_output_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fails: str
) -> None:
    """The disk fills up while the rows are written (or flushed to it): the old file is kept byte for byte and
    no temporary file is left beside it."""
    import builtins

    from snooze._kit import files as _files
    from snooze.experiments import baseline

    args = _tiny_args(tmp_path)
    assert main(args) == 0
    out = tmp_path / "b.jsonl"
    old, before = out.read_bytes(), sorted(os.listdir(tmp_path))
    if fails == "write":
        for module in (baseline, _files):  # whichever module opens the output file
            monkeypatch.setattr(module, "open", lambda *a, **k: _DiskFull(builtins.open(*a, **k)), raising=False)
    else:
        monkeypatch.setattr(os, "fsync", _disk_full)
    assert main([*args, "--samples", "3", "--force"]) == 2  # --force: write over the first run's rows
    assert f"{out}: No space left on device" in capsys.readouterr().err
    assert out.read_bytes() == old and sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize(
    ("extra", "flags"),
    [
        (["--max-new-tokens", "0", "--reward-range", "5,6"], "--max-new-tokens, --reward-range: for --dataset"),
        (["--max-new-tokens", "256"], "--max-new-tokens: for --dataset"),  # its default, given: refused too
        (["--reward-range", "0,1"], "--reward-range: for --dataset"),
        (["--reward", "r.py:score"], "--reward: for --dataset"),
        (["--cache", "warm"], "--cache: the warm-up cache, used only with --warmup"),
    ],
)
def test_an_option_the_built_in_tasks_do_not_use_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], flags: str
) -> None:
    """Without --dataset, the options of --dataset alone (and --cache without --warmup) are refused, not ignored."""
    assert main(_tiny_args(tmp_path, *extra)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flags in err, err
    assert not (tmp_path / "b.jsonl").exists()


def test_with_dataset_the_options_of_the_built_in_tasks_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": "simple is"}) + "\n")
    base = ["baseline", "--dataset", str(data), "--model", "m", "--out", str(tmp_path / "o.jsonl")]
    assert main([*base, "--cache", str(tmp_path / "warm"), "--test-size", "3"]) == 2
    assert "--test-size, --cache: for the built-in tasks" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("tasks", "pool_size", "test_size", "seed", "digest"),
    [
        ("add:1-3,rev:3-7,count:4-10,sort:3-7", 40, 10, 0, "6b0708867e510178"),
        ("add:1-3,rev:3-7,count:4-10,sort:3-7", 40, 10, 7, "066549d0396338a3"),
        ("add:1", 99, 1, 0, "f6efd17354d41ff5"),  # every one-digit sum but the test split's one
        ("rev:1-2", 100, 10, 3, "95b3c2dd484d37d0"),  # all 110 strings
        ("count:1", 20, 5, 0, "c0c47405a2945432"),  # all 25 prompts
        ("sort:1-2", 60, 5, 2**63 - 1, "e4cf18c10a2cc1b6"),
    ],
)
def test_the_pools_are_the_ones_they_always_were(
    tasks: str, pool_size: int, test_size: int, seed: int, digest: str
) -> None:
    """The same problems in the same order as before pools were sized up front (digests of the records then):
    a baseline's ids must stay those of the training runs already made."""
    import hashlib

    pools = task_pool(parse_tasks(tasks), BaselineConfig(pool_size=pool_size, test_size=test_size, seed=seed))
    assert hashlib.sha256(json.dumps(pools).encode()).hexdigest()[:16] == digest


@pytest.mark.parametrize("name", ["add:1", "add:1-2", "rev:1-2", "sort:1", "count:1-2"])
def test_a_split_takes_every_distinct_problem_and_one_more_is_refused_before_drawing(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from snooze.core.errors import DataError
    from snooze.trainer import tasks

    spec = tasks.TaskSpec.parse(name)
    every = {r["prompt"] for r in tasks.make_split(spec, "pool", tasks._distinct(spec))}
    assert len(every) == tasks._distinct(spec)
    held = sorted(every)[:3] + ["1+2", ">k=", "#f:aa="]  # three of its prompts, three of no task
    assert len(tasks.make_split(spec, "pool", len(every) - 3, exclude=held)) == len(every) - 3

    def no_draws(*args: Any) -> Any:
        raise AssertionError("a split that cannot be filled was drawn")

    monkeypatch.setattr(tasks, "_draw", no_draws)
    with pytest.raises(DataError, match=rf"only {len(every) - 3:,} distinct pool problems exist \("):
        tasks.make_split(spec, "pool", len(every) - 2, exclude=held)


def test_a_pool_larger_than_its_tasks_have_is_refused_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--pool-size 100000`` of ``add:1`` (100 sums) took 26 s of draws to fail, 10**7 would take 40 minutes."""
    from snooze.trainer import tasks

    draws = 0
    real = tasks._draw

    def counted(*args: Any) -> Any:
        nonlocal draws
        draws += 1
        assert draws < 1_000, "the pool was drawn"
        return real(*args)

    monkeypatch.setattr(tasks, "_draw", counted)
    assert main(_tiny_args(tmp_path, "--pool-size", "10000000")) == 2
    err = capsys.readouterr().err
    assert (
        "task add:1-1: only 99 distinct pool problems exist (100 in all, 1 of them excluded), 10,000,000 wanted" in err
    )
    assert not (tmp_path / "b.jsonl").exists()

"""One pool builder for ``snooze compare`` and ``snooze baseline``; ``snooze compare --curriculum``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from snooze.cli.main import main
from snooze.experiments.baseline import BaselineConfig, task_pool
from snooze.experiments.compare import PROFILES, _data, check_curriculum
from snooze.experiments.profiles import model_config, warmup_config
from snooze.trainer.model import TinyGPT
from snooze.trainer.tasks import make_split, parse_tasks, task_splits
from snooze.trainer.tokenizer import EOS
from snooze.trainer.warmup import _key


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_compare_and_baseline_build_the_same_pool(name: str) -> None:
    profile = PROFILES[name]
    pools, tests, banned = _data(profile, profile.tasks)
    base = task_pool(
        parse_tasks(profile.tasks), BaselineConfig(pool_size=profile.pool_size, test_size=profile.test_size)
    )
    assert {k: [r["id"] for r in v] for k, v in pools.items()} == {k: [r["id"] for r in v] for k, v in base.items()}
    assert pools == base and banned == {r["prompt"] for recs in (*pools.values(), *tests.values()) for r in recs}
    # the profiles' data is what compare built before the shared builder existed (make_split's default seed 0)
    for spec in parse_tasks(profile.tasks):
        test = make_split(spec, "test", profile.test_size)
        assert tests[spec.name] == test
        assert pools[spec.name] == make_split(spec, "pool", profile.pool_size, exclude=[r["prompt"] for r in test])


def test_the_seed_changes_the_pool() -> None:
    specs = parse_tasks("rev:3-5")
    a, _ = task_splits(specs, 20, 10, seed=0)
    b = task_pool(specs, BaselineConfig(pool_size=20, test_size=10, seed=1))
    assert [r["id"] for r in a["rev:3-5"]] == [r["id"] for r in b["rev:3-5"]]  # ids are positions...
    assert [r["prompt"] for r in a["rev:3-5"]] != [r["prompt"] for r in b["rev:3-5"]]  # ...of other prompts


def _seed_warmup_cache(cache: Path) -> str:
    """Put a stub base where ``snooze compare --profile quick`` looks for its warm-up (no 2-minute warm-up).

    The stub answers every prompt with EOS at once (final norm flattened to one direction that only
    EOS's tied embedding points along), so rollouts and evaluation are one forward pass each.
    """
    profile = PROFILES["quick"]
    _, _, banned = _data(profile, profile.tasks)
    model_cfg = model_config(profile)
    key = _key(warmup_config(profile), model_cfg, parse_tasks(profile.tasks), banned)
    folder = cache / f"warmup-{key}"
    folder.mkdir(parents=True)
    torch.manual_seed(0)
    sd = TinyGPT(model_cfg).state_dict()
    sd["ln_f.weight"].zero_()
    sd["ln_f.bias"].zero_()
    sd["ln_f.bias"][0] = 1.0
    sd["tok.weight"][:, 0] = 0.0
    sd["tok.weight"][EOS, 0] = 50.0
    torch.save(sd, folder / "model.pt")
    meta = {"steps": 0, "val_accuracy": 0.0, "val_by_task": {}, "seconds": 0.0, "model": model_cfg.to_dict()}
    (folder / "meta.json").write_text(json.dumps(meta))
    return key


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_compare_with_a_curriculum_runs_end_to_end(tmp_path: Path) -> None:
    profile = PROFILES["quick"]
    (task,) = parse_tasks(profile.tasks)
    pools, _ = task_splits([task], profile.pool_size, profile.test_size)
    hidden = [r["id"] for r in pools[task.name][: profile.pool_size // 2]]
    dropped = pools[task.name][-1]["id"]
    cur = {
        "version": 1,
        "drop": {task.name: [dropped]},
        "stages": [
            {"name": "half", "weights": None, "exclude": {task.name: hidden}, "advance": [{"step": 2}]},
            {"name": "all", "weights": None, "exclude": {}},
        ],
    }
    path = tmp_path / "curriculum.json"
    path.write_text(json.dumps(cur))
    key = _seed_warmup_cache(tmp_path / "cache")
    out = tmp_path / "out"
    args = [
        "compare",
        "--out",
        str(out),
        "--profile",
        "quick",
        "--arms",
        "snooze",
        "--steps",
        "4",
        "--cache",
        str(tmp_path / "cache"),
    ]
    assert main([*args, "--curriculum", str(path)]) == 0
    meta = json.loads((out / "run_meta.json").read_text())
    assert meta["warmup"]["key"] == key and meta["curriculum"]["path"] == str(path)
    run = out / "snooze" / "seed0"
    assert [m["curriculum/stage"] for m in _lines(run / "metrics.jsonl")] == [0, 0, 1, 1]
    groups = _lines(run / "rewards.jsonl")[1:]  # after the header
    early = {g["id"] for g in groups if g["step"] < 2}
    assert early and not early & set(hidden) and dropped not in {g["id"] for g in groups}
    assert json.loads((run / "config.json").read_text())["curriculum"]["stages"] == ["half", "all"]


def test_a_curriculum_for_other_tasks_fails_before_training(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "curriculum.json"
    path.write_text(json.dumps({"stages": [{"weights": {"add:1-3": 1.0}}]}))
    out = tmp_path / "out"
    assert (
        main(["compare", "--out", str(out), "--profile", "quick", "--arms", "snooze", "--curriculum", str(path)]) == 2
    )
    err = capsys.readouterr().err
    assert "['add:1-3'] are not in the task mix ['rev:3-5']" in err and "snooze baseline --tasks rev:3-5" in err
    assert not (out / "snooze").exists()
    # ids from a pool of another size: caught too
    path.write_text(json.dumps({"stages": [{"exclude": {"rev:3-5": ["rev:3-5/pool/48"]}}]}))
    assert (
        main(["compare", "--out", str(out), "--profile", "quick", "--arms", "snooze", "--curriculum", str(path)]) == 2
    )
    assert "not in its pool of 48" in capsys.readouterr().err


def test_baseline_with_a_profile_samples_the_compare_base_and_pools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """baseline --profile -> stratify -> a curriculum whose ids `snooze compare --curriculum` accepts."""
    profile = PROFILES["quick"]
    _seed_warmup_cache(tmp_path / "cache")  # the stub base under the quick profile's warm-up key
    rows_file = tmp_path / "baseline.jsonl"
    args = [
        "baseline",
        "--profile",
        "quick",
        "--warmup",
        "--samples",
        "2",
        "--out",
        str(rows_file),
        "--cache",
        str(tmp_path / "cache"),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "base: 0 steps" in out and "(cached)" in out  # the compare profile's cached base, not a new warm-up
    rows = _lines(rows_file)
    pools, _, _ = _data(profile, profile.tasks)
    assert sorted(r["id"] for r in rows) == sorted(r["id"] for r in pools[profile.tasks])
    assert {r["model"] for r in rows} == {"base"} and all(
        r["rewards"] == [0.0, 0.0] for r in rows
    )  # the stub answers nothing
    assert main(["stratify", str(rows_file), "--out", str(tmp_path / "strata"), "--group-size", "4", "--no-plot"]) == 0
    cur = check_curriculum(tmp_path / "strata" / "curriculum.json", pools, profile)  # raises on an unknown id
    assert cur.stages
    # --profile with --warmup samples the profile's own base: other tasks would not match it
    assert main([*args, "--tasks", "rev:3-6"]) == 2
    assert "drop --tasks/--pool-size/--test-size" in capsys.readouterr().err

"""``SnoozeSampler`` against verl 0.7.1's real classes on CPU: its sampler hook and base class,
``RLHFDataset`` over a parquet file, ``DataProto`` batches and the ``StatefulDataLoader`` checkpoint.

Generation and training need GPUs (Ray workers with vLLM/FSDP); everything up to the rollouts runs here,
and the rollouts' scores are written into ``DataProto`` by hand, as verl's reward step does.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("verl", reason="needs the [verl] extra")
torch = pytest.importorskip("torch")

import snooze  # noqa: E402

pytestmark = pytest.mark.verl

G, B = 4, 2  # rollouts per prompt, prompts per training batch
EASY = {("gsm", 0), ("gsm", 2)}
ROWS = [("gsm", 0), ("gsm", 1), ("gsm", 2), ("gsm", 3), ("math", 10), ("math", 11)]


def _tokenizer() -> Any:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<eos>", "<unk>", "user", ":", "q", "gsm", "math", "0", "1", "2", "3", "10", "11"]
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = Whitespace()
    out = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    out.chat_template = "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}"
    return out


def _parquet(tmp: Path, rows: list[tuple[str, Any]], index: bool = True) -> str:
    import datasets

    recs = [
        {
            "data_source": ds,
            "prompt": [{"role": "user", "content": f"q {ds} {i}"}],
            "reward_model": {"ground_truth": "1"},
            "extra_info": {"index": i} if index else {"split": "train"},
        }
        for ds, i in rows
    ]
    path = tmp / "train.parquet"
    datasets.Dataset.from_list(recs).to_parquet(str(path))
    return str(path)


def _config(tmp: Path, **snooze_opts: Any) -> Any:
    from omegaconf import OmegaConf

    opts = {"policy": "snooze", "snooze_factor": 5, "state_dir": str(tmp / "state"), "reward_log": str(tmp / "r.jsonl")}
    opts.update(snooze_opts)
    return OmegaConf.create(
        {
            "data": {
                "train_batch_size": B,
                "dataloader_num_workers": 0,
                "max_prompt_length": 32,
                "filter_overlong_prompts": False,
                "shuffle": False,
                "sampler": {
                    "class_path": "pkg://snooze.integrations.verl",
                    "class_name": "SnoozeSampler",
                    "snooze": opts,
                },
            },
            "actor_rollout_ref": {"rollout": {"n": G}},
            "trainer": {"default_local_dir": str(tmp / "ckpt")},
        }
    )


def _dataset(tmp: Path, cfg: Any, rows: list[tuple[str, Any]] = ROWS, index: bool = True) -> Any:
    from verl.utils.dataset.rl_dataset import RLHFDataset

    return RLHFDataset(data_files=[_parquet(tmp, rows, index)], tokenizer=_tokenizer(), config=cfg.data)


def _sampler(tmp: Path, **opts: Any) -> Any:
    from verl.trainer.main_ppo import create_rl_sampler

    cfg = _config(tmp, **opts)
    ds = _dataset(tmp, cfg)
    return create_rl_sampler(cfg.data, ds), ds


def _dataloader(ds: Any, sampler: Any) -> Any:
    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.utils.dataset.rl_dataset import collate_fn

    return StatefulDataLoader(ds, batch_size=B, sampler=sampler, num_workers=0, drop_last=True, collate_fn=collate_fn)


def _scored(batch_dict: dict[str, Any], step: int) -> Any:
    """What verl's fit() builds before the reward filter: G rollouts per prompt with a uid and scores."""
    from verl import DataProto

    nt = {k: np.asarray(batch_dict[k], dtype=object) for k in ("data_source", "index")}
    n = len(nt["index"])
    uid = np.array([f"s{step}-p{i}" for i in range(n)], dtype=object)
    rep = np.repeat(np.arange(n), G)
    scores = torch.zeros(n * G, 3)
    for r, p in enumerate(rep.tolist()):
        key = (str(nt["data_source"][p]), int(nt["index"][p]))
        scores[r, -1] = 1.0 if key in EASY else float(r % 2)  # easy: all pass; others: half pass
    non_tensors = {"uid": uid[rep], "data_source": nt["data_source"][rep], "index": nt["index"][rep]}
    return DataProto.from_dict(tensors={"token_level_scores": scores}, non_tensors=non_tensors)


def _dapo_filter(batch: Any) -> Any:
    """The DAPO recipe's filter: keep only groups whose rewards vary."""
    seq = batch.batch["token_level_scores"].sum(-1).numpy()
    uids = batch.non_tensor_batch["uid"]
    keep = [i for i, u in enumerate(uids) if np.std(seq[uids == u]) > 0]
    return batch[keep]


def _keys(batch_dict: dict[str, Any]) -> list[tuple[str, int]]:
    return [(str(d), int(i)) for d, i in zip(batch_dict["data_source"], batch_dict["index"])]


def test_verl_builds_the_sampler_from_config_and_it_yields_every_prompt_once_per_epoch(tmp_path: Path) -> None:
    from verl.experimental.dataset.sampler import AbstractCurriculumSampler

    from snooze.integrations.verl import SnoozeSampler

    sampler, ds = _sampler(tmp_path)
    assert isinstance(sampler, SnoozeSampler) and isinstance(sampler, AbstractCurriculumSampler)
    assert len(sampler) == len(ds) == 6
    assert sampler.scheduler.config.group_size == G and sampler.scheduler.config.batch_size == B
    positions = list(iter(sampler))
    assert sorted(positions) == list(range(6))
    assert sampler.scheduler.names == ["gsm", "math"]
    assert sampler.state_dir == tmp_path / "state"


def test_state_dir_defaults_beside_verls_checkpoints(tmp_path: Path) -> None:
    sampler, _ = _sampler(tmp_path, state_dir=None)
    assert sampler.state_dir == tmp_path / "ckpt" / "snooze"


def test_prefilter_observe_snoozes_easy_prompts_the_dapo_filter_hides(tmp_path: Path) -> None:
    sampler, ds = _sampler(tmp_path)
    dl = _dataloader(ds, sampler)
    seen: list[tuple[str, int]] = []
    for step, batch_dict in zip(range(3), dl):  # epoch 1: every prompt once
        seen += _keys(batch_dict)
        scored = _scored(batch_dict, step)
        assert sampler.observe(scored) == B  # pre-filter: every group reaches the scheduler
        sampler.update(_dapo_filter(scored))  # verl's hook sees only what DAPO kept
    assert sorted(seen) == sorted(ROWS)
    assert sampler.scheduler.metrics()["total/gen_groups"] == 6
    later = [k for _, bd in zip(range(3), dl) for k in _keys(bd)]  # epoch 2: easy prompts are asleep
    assert not EASY & set(later)
    assert sampler.metrics()["snooze/total/gen_groups"] == 6 and sampler.metrics()["snooze/snooze/asleep"] == 2
    log_lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert len(log_lines) == 6


def test_without_prefilter_capture_the_easy_prompts_are_never_snoozed(tmp_path: Path, caplog: Any) -> None:
    sampler, ds = _sampler(tmp_path)
    dl = _dataloader(ds, sampler)
    with caplog.at_level(logging.WARNING, logger="snooze.integrations.verl"):
        for step, batch_dict in zip(range(3), dl):
            sampler.update(_dapo_filter(_scored(batch_dict, step)))
    assert "never reached the sampler" in caplog.text
    later = [k for _, bd in zip(range(3), dl) for k in _keys(bd)]
    assert EASY <= set(later)  # the filter hid them, so they are generated again


def test_missing_extra_info_index_is_a_clear_error(tmp_path: Path) -> None:
    from verl.trainer.main_ppo import create_rl_sampler

    cfg = _config(tmp_path)
    ds = _dataset(tmp_path, cfg, index=False)
    with pytest.raises(snooze.IntegrationError, match="extra_info has no 'index'"):
        create_rl_sampler(cfg.data, ds)


def test_duplicate_prompt_ids_are_rejected(tmp_path: Path) -> None:
    from verl.trainer.main_ppo import create_rl_sampler

    cfg = _config(tmp_path)
    ds = _dataset(tmp_path, cfg, rows=[("gsm", 0), ("gsm", 0), ("gsm", 1), ("gsm", 2)])
    with pytest.raises(snooze.DataError):
        create_rl_sampler(cfg.data, ds)


def test_wrong_group_size_is_a_clear_error(tmp_path: Path) -> None:
    sampler, ds = _sampler(tmp_path, group_size=3)
    batch_dict = next(iter(_dataloader(ds, sampler)))
    with pytest.raises(snooze.IntegrationError, match="group_size=3"):
        sampler.observe(_scored(batch_dict, 0))


def test_state_round_trips_through_verls_dataloader_checkpoint(tmp_path: Path) -> None:
    sampler, ds = _sampler(tmp_path)
    dl = _dataloader(ds, sampler)
    it = iter(dl)
    for step in range(2):
        bd = next(it)
        scored = _scored(bd, step)
        if step == 1:
            data_pt = dl.state_dict()  # verl saves data.pt before update() for that step
        sampler.observe(scored)
        sampler.update(_dapo_filter(scored))
    assert (tmp_path / "state" / "step-00000002").exists()
    snapshot = sampler.scheduler.state_dict()
    expected_next = _keys(next(it))

    sampler2, ds2 = _sampler(tmp_path)
    dl2 = _dataloader(ds2, sampler2)
    dl2.load_state_dict(data_pt)
    it2 = iter(dl2)  # the dataloader applies a loaded state when its next iterator starts
    restored = sampler2.scheduler.state_dict()
    assert sampler2.scheduler.step_index == 2 and sampler2.scheduler.metrics()["total/gen_groups"] == 4
    assert restored["arrays"].keys() == snapshot["arrays"].keys()
    assert all(np.array_equal(restored["arrays"][k], v) for k, v in snapshot["arrays"].items())
    assert int(snapshot["arrays"]["ds0.counter"].max()) > 0  # the easy gsm prompts are asleep in the state
    assert _keys(next(it2)) == expected_next
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 4  # steps >= 2 cut from the log


def test_resume_before_the_state_was_written_says_what_to_do(tmp_path: Path) -> None:
    sampler, _ = _sampler(tmp_path)
    data = sampler.state_dict()  # verl checkpointed, then the run died before update()
    sampler2, _ = _sampler(tmp_path)
    with pytest.raises(snooze.StateError, match="resume_from_path"):
        sampler2.load_state_dict(data)

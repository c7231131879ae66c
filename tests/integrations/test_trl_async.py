"""``SnoozeAsyncGRPOTrainer`` end to end: TRL's real ``AsyncGRPOTrainer.train()`` on CPU, its real rollout worker
(a spawned child process) asking a stand-in server over HTTP for completions of a tiny local model, and a
stand-in weight transfer (``_trl_async_server``). One run of 6 steps is shared by the first tests; a resumed run
and a killed run (a subprocess killed with SIGKILL, then resumed) follow.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("trl", reason="needs the [trl] extra")
pytest.importorskip("aiohttp", reason="TRL's async rollout worker speaks HTTP with aiohttp")
torch = pytest.importorskip("torch")

import snooze  # noqa: E402
from integrations import _trl_tiny as tiny  # noqa: E402
from snooze.core.checkpoint import load_state  # noqa: E402
from snooze.integrations.trl import _checks as checks  # noqa: E402

pytestmark = [
    pytest.mark.trl,
    pytest.mark.slow,
    tiny.since("trl", checks.ASYNC_OLDEST, "SnoozeAsyncGRPOTrainer"),
]

JOB = Path(__file__).with_name("trl_async_job.py")
STEPS = 6


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from integrations._trl_async_server import StandInServer, cpu_seams

    patch = pytest.MonkeyPatch()
    cpu_seams(patch)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("trl_async")
    model = tiny.save(tiny.causal_lm(), folder / "lm")
    server = StandInServer(model)
    yield SimpleNamespace(model=model, server=server, folder=folder)
    server.close()
    torch.set_num_threads(threads)
    patch.undo()


def _prompt_ids() -> dict[tuple[int, ...], str]:
    """Each record's prompt as the rollout worker sends it (its chat template, tokenized), to its id."""
    from integrations import _trl_async as job

    tok = tiny.chat_tokenizer()
    return {
        tuple(tok.apply_chat_template(r["prompt"], add_generation_prompt=True, return_dict=False)): r["id"]
        for r in job.RECORDS
    }


def _state(sched: Any) -> dict[str, Any]:
    return copy.deepcopy(sched.state_dict())


def _same_state(a: dict[str, Any], b: dict[str, Any]) -> bool:
    meta = json.dumps(a["meta"], sort_keys=True) == json.dumps(b["meta"], sort_keys=True)
    arrays = a["arrays"].keys() == b["arrays"].keys()
    return meta and arrays and all(np.array_equal(a["arrays"][k], b["arrays"][k]) for k in a["arrays"])


@pytest.fixture(scope="module")
def fresh(stand_in: Any) -> Any:
    """A run of 6 steps, checkpoints every 2: the batches, the state at each step's close, every event."""
    from integrations import _trl_async as job

    folder = stand_in.folder / "fresh"
    folder.mkdir()
    events = job.Events(folder / "events.jsonl")
    batches, states = [], {}
    asked_before = len(stand_in.server.asked)
    snooze_config = {**job.SNOOZE, "shuffle": False}  # each pass in the dataset's order: easy prompts come back
    trainer = job.trainer(
        stand_in.model,
        stand_in.server.url,
        folder / "out",
        events,
        reward_log=folder / "r.jsonl",
        snooze_config=snooze_config,
    )
    trainer.run.on_batch = lambda b: (batches.append(b), states.__setitem__(b.step, _state(trainer.scheduler)))
    trainer.train()
    asked = [_prompt_ids()[tuple(p)] for p in stand_in.server.asked[asked_before:]]
    return SimpleNamespace(
        trainer=trainer,
        batches=batches,
        states=states,
        events=events.read(),
        asked=asked,
        folder=folder,
        snooze_config=snooze_config,
    )


def test_every_trained_row_is_of_a_signal_group_the_scheduler_put_in_a_batch(fresh: Any) -> None:
    trainer, batches = fresh.trainer, fresh.batches
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logged) == STEPS and all(h["batch/samples_per_step"] == 8 for h in logged)
    assert len(batches) >= STEPS  # (TRL's dataloader reads one step ahead)
    for b in batches:
        assert len(b) > 0 and (np.ptp(b.rewards, axis=1) > 0).all(), f"step {b.step}: a group without signal"
    collated = set(trainer._trained_groups)  # every group id TRL's collator packed into a micro-batch
    closed = {c.ticket for b in batches for c in b.candidates}
    assert {c.ticket for b in batches[:STEPS] for c in b.candidates} <= collated <= closed
    reported = [e for e in fresh.events if e["event"] == "reported"]
    dropped = {e["ticket"] for e in reported} - closed
    assert dropped, "some groups were reported without signal and never reached training"
    assert all("snooze/gen/rounds" in h and h["snooze/gen/rounds"] <= 3 for h in logged)  # max_gen_rounds=3
    lines = (fresh.folder / "r.jsonl").read_text().splitlines()
    assert len(lines) == len(reported)  # one reward-log line per reported group
    m = trainer.scheduler.metrics()  # every group came with its completion tokens, at most 4 a completion
    assert m["total/tokens_missing"] == 0 and 0 < m["total/gen_tokens"] <= 4 * m["total/rollouts"]


def test_snoozed_prompts_are_never_sent_to_the_server(fresh: Any) -> None:
    from integrations import _trl_async as job

    issued = [e for e in fresh.events if e["event"] == "issued"]
    reports = [e for e in fresh.events if e["event"] == "reported"]
    # every completion the server was asked for is one of an issued candidate's G: nothing else is generated
    assert len(fresh.asked) == job.G * len(issued)
    for rid in {r["id"] for r in job.RECORDS}:
        assert fresh.asked.count(rid) == job.G * sum(e["id"] == rid for e in issued), rid
    # an easy prompt, once reported too easy, is skipped before generation: never issued again in the run
    assert fresh.trainer.scheduler.metrics()["total/skipped"] > 0
    for rid in job.EASY:
        first_report = next(i for i, e in enumerate(fresh.events) if e["event"] == "reported" and e["id"] == rid)
        later = [e for e in fresh.events[first_report:] if e["event"] == "issued" and e["id"] == rid]
        assert not later, f"{rid} was sent again after it was found too easy: {later}"
    assert len(reports) <= len(issued)


def test_the_weights_reach_the_server_after_every_step(fresh: Any, stand_in: Any) -> None:
    trainer, server = fresh.trainer, stand_in.server
    assert server.weight_syncs >= STEPS + 1  # once before the first step, then after every step
    served = dict(server.model.named_parameters())
    for name, param in trainer.model.named_parameters():
        assert torch.equal(param.detach().cpu(), served[name].detach()), name


def test_a_checkpoint_holds_the_state_of_its_step_and_resumes_from_it_exactly(fresh: Any, stand_in: Any) -> None:
    from integrations import _trl_async as job

    ckpt = fresh.folder / "out" / "checkpoint-2"
    saved = load_state(ckpt / "snooze")
    assert _same_state(saved, fresh.states[1])  # the state at the close of step 1, read-ahead or not
    pending = [int(t) for t in saved["arrays"]["pending"][:, 0]] if saved["arrays"]["pending"].size else []

    folder = stand_in.folder / "resumed"
    folder.mkdir()
    (folder / "r.jsonl").write_text((fresh.folder / "r.jsonl").read_text())
    events, batches = job.Events(folder / "events.jsonl"), []
    trainer = job.trainer(
        stand_in.model,
        stand_in.server.url,
        fresh.folder / "out",
        events,
        reward_log=folder / "r.jsonl",
        snooze_config=fresh.snooze_config,
    )
    trainer.restore_scheduler(ckpt)
    assert _same_state(trainer.scheduler.state_dict(), saved)
    trainer.run.on_batch = batches.append
    trainer.train(resume_from_checkpoint=str(ckpt))
    assert batches[0].step == 2  # (TRL's log history holds steps 1 and 2 from the checkpoint, then 3 to 6)
    assert [h["step"] for h in trainer.state.log_history if "loss" in h] == [1, 2, 3, 4, 5, 6]
    first = batches[0].metrics
    assert first["total/gen_groups"] - first["gen/groups"] == fresh.batches[1].metrics["total/gen_groups"]
    issued = [e for e in events.read() if e["event"] == "issued"]
    assert [e["ticket"] for e in issued[: len(pending)]] == pending  # the checkpoint's candidates out, first
    reported = [e["ticket"] for e in events.read() if e["event"] == "reported"]
    assert all(reported.count(t) <= 1 for t in pending)  # (one still out when the run ends is not back)
    lines = [json.loads(x) for x in (folder / "r.jsonl").read_text().splitlines()]
    before = [json.loads(x) for x in (fresh.folder / "r.jsonl").read_text().splitlines()]
    assert [x for x in lines if x["step"] < 2] == [x for x in before if x["step"] < 2]
    # a checkpoint without the scheduler's state (a plain AsyncGRPOTrainer's) is refused, nothing changed
    plain = folder / "checkpoint-4"
    plain.mkdir()
    state_before = trainer.scheduler.state_dict()
    with pytest.raises(snooze.StateError, match="not written by SnoozeAsyncGRPOTrainer"):
        trainer.restore_scheduler(plain)
    assert _same_state(trainer.scheduler.state_dict(), state_before)


def test_training_stops_after_the_step_that_used_the_data_up(stand_in: Any, tmp_path: Path) -> None:
    """With one pass over the prompts (``epochs=1``) the run ends after the step that drew the last of them, though
    TRL's dataloader reads a step ahead and ``max_steps`` is far."""
    from integrations import _trl_async as job

    batches: list[Any] = []
    trainer = job.trainer(
        stand_in.model,
        stand_in.server.url,
        tmp_path / "out",
        snooze_config={"policy": "dynamic_sampling", "epochs": 1},
        on_batch=batches.append,
        max_steps=50,
        save_strategy="no",
    )
    trainer.train()
    last = trainer.run.exhausted_after
    assert last is not None and trainer.state.global_step == last + 1 < 50
    assert sum(b.metrics["gen/groups"] for b in batches) == len(job.RECORDS)  # every prompt once, none twice


def _launch(folder: Path, model: str, name: str, checkpoint: Path | None = None) -> subprocess.Popen[str]:
    cmd = [sys.executable, str(JOB), str(folder), model, name, *([str(checkpoint)] if checkpoint else [])]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "TRL_EXPERIMENTAL_SILENCE": "1"}
    # a session of its own: the kill below takes the run's worker processes too, as a machine dying would (a
    # SIGKILL of the parent alone left its spawned worker asleep after the test, holding 570 MB)
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def _complete(out: Path) -> list[int]:
    """Steps of the checkpoints written whole (TRL's trainer_state.json is their last file)."""
    return sorted(int(p.name.split("-")[1]) for p in out.glob("checkpoint-*") if (p / "trainer_state.json").exists())


def _kill_once_step_has_reports(tmp_path: Path, model: str, step: int) -> list[dict[str, Any]]:
    """Run the job in a process of its own; SIGKILL it once checkpoint-``step`` is whole and step ``step`` has
    reports. Returns its events."""
    from integrations import _trl_async as job

    proc = _launch(tmp_path, model, "killed")
    events = job.Events(tmp_path / "events.killed.jsonl")
    deadline = time.monotonic() + 300
    while not (step in _complete(tmp_path / "out") and any(e["step"] >= step for e in events.read()[-3:])):
        assert proc.poll() is None, f"the run ended before it was killed:\n{proc.stdout.read()[-3000:]}"  # type: ignore[union-attr]
        assert time.monotonic() < deadline, f"no checkpoint-{step} within 300 s"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    return events.read()


def test_a_run_killed_mid_step_loses_no_prompt(stand_in: Any, tmp_path: Path) -> None:
    """A real run in a process of its own, killed with SIGKILL once checkpoint-2 is written and step 2 has
    reports, then resumed (here) from its last whole checkpoint. Every candidate the checkpoint's state had issued
    was reported before it, or is issued again after the resume: counted."""
    from integrations import _trl_async as job

    before = _kill_once_step_has_reports(tmp_path, stand_in.model, 2)
    last = max(_complete(tmp_path / "out"))
    ckpt = tmp_path / "out" / f"checkpoint-{last}"
    state = load_state(ckpt / "snooze")
    issued_at_ckpt = int(state["meta"]["next_ticket"])
    pending = [int(t) for t in state["arrays"]["pending"][:, 0]] if state["arrays"]["pending"].size else []
    reported_before = {e["ticket"] for e in before if e["event"] == "reported" and e["step"] < last}
    killed_mid_step = [e for e in before if e["event"] == "reported" and e["step"] >= last]
    assert killed_mid_step, "the kill came between steps, not in one"

    after, asked_before = job.Events(tmp_path / "events.resumed.jsonl"), len(stand_in.server.asked)
    trainer = job.trainer(
        stand_in.model, stand_in.server.url, tmp_path / "out", after, max_steps=last + 2, save_steps=1
    )
    trainer.train(resume_from_checkpoint=str(ckpt))
    reissued = [e for e in after.read() if e["event"] == "issued"][: len(pending)]
    reported_after = [e["ticket"] for e in after.read() if e["event"] == "reported"]
    asked = [_prompt_ids()[tuple(q)] for q in stand_in.server.asked[asked_before:]]

    # the count: every ticket the checkpoint's state had issued was reported before it, or is issued again after
    # the resume: first, under its ticket, with its prompt, asked of the server, and reported once it is back
    assert len(reported_before) + len(pending) == issued_at_ckpt
    assert reported_before | set(pending) == set(range(issued_at_ckpt)) and not reported_before & set(pending)
    first_issue = {e["ticket"]: e["id"] for e in reversed(before) if e["event"] == "issued"}
    assert [(e["ticket"], e["id"]) for e in reissued] == [(t, first_issue[t]) for t in pending]
    assert all(e["id"] in asked for e in reissued), "a re-issued prompt never reached the server"
    assert all(reported_after.count(t) <= 1 for t in pending)  # (one still out when the run ends is not back)
    print(
        f"checkpoint-{last}: {issued_at_ckpt} issued = {len(reported_before)} reported before it + {len(pending)} out, "
        f"re-issued after the resume ({sum(reported_after.count(t) for t in pending)} back before the end); the "
        f"killed step had {len(killed_mid_step)} report(s)"
    )

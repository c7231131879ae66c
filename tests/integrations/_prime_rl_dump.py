"""A prime-rl run folder's episode files, written here in the form prime-rl's file monitor writes them.

prime-rl (``prime_rl/monitors/file.py``) appends ``orjson.dumps(episode.to_record())`` per episode to
``<run>/rollouts/step_<N>/train/all/traces.jsonl`` as episodes complete, and the trained ones to
``.../train/effective/traces.jsonl``; ``Episode.to_record()`` is verifiers' pydantic ``model_dump(mode="json",
exclude_none=True)`` of ``verifiers.v1.Episode`` (``verifiers/v1/episode.py``, ``trace.py``). prime-rl and
verifiers are not installed here (they need vLLM and a GPU stack), so :func:`episode` builds that record's
fields by hand, from those classes' fields, with the values a single-agent environment's episode has.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _trace(task: dict[str, Any], reward: float | None, ok: bool) -> dict[str, Any]:
    return {
        "version": 1,
        "id": uuid.uuid4().hex,
        "verifiers": {"version": "0.3.1"},
        "task": task,
        "agent": {"config": {"model": "policy"}, "name": "agent", "trainable": True},
        "tools": [],
        "nodes": [{"id": 0, "message": {"role": "assistant", "content": "42"}}],
        "calls": [],
        "request_rewrites": [],
        "response_rewrites": [],
        "rewards": {"correct": None if reward is None else {"score": reward, "weight": 1.0}},
        "metrics": {"correct": reward},
        "info": {},
        "extra_usage": [],
        "is_completed": ok,
        "ok": ok,
        "stop_condition": "completed" if ok else "error",
        "errors": [] if ok else [{"type": "Timeout", "message": "sandbox timed out"}],
        "timing": {"start": 0.0, "agent": {"start": 0.0, "end": 1.0, "model": {"duration": 0.5}}},
    }


def episode(env: str, key: str | int, group: str, step: int, reward: float | None) -> dict[str, Any]:
    """One episode's record: ``reward`` ``None`` is a failed episode (``ok`` false, its reward not run)."""
    data = {"question": f"prompt {key}", "answer": "42"}
    task = {
        "type": "Task",
        "data": data,
        "key": key,
        "hash": hashlib.sha256(json.dumps(data).encode()).hexdigest()[:16],
    }
    ok = reward is not None
    return {
        "id": uuid.uuid4().hex,
        "env": {"id": f"{env}-env", "name": env},
        "task": task,
        "group": {"id": group},
        "run": {"type": "train", "id": "run-1", "name": "run", "work": {"type": "train", "step": step}},
        "ok": ok,
        "errors": [],
        "traces": [_trace(task, reward, ok)],
    }


def write_run(
    run: Path, groups: Sequence[tuple[int, str, str | int, Sequence[float | None]]], effective: bool = True
) -> Path:
    """``groups``: ``(step, env, task key, rewards)``; each group's episodes go to its step's ``all`` file,
    interleaved with the step's other groups (episodes arrive as they complete), and the groups with spread
    to ``effective``. Returns ``run``."""
    by_step: dict[int, list[list[dict[str, Any]]]] = {}
    for step, env, key, rewards in groups:
        gid = str(uuid.uuid4())
        by_step.setdefault(step, []).append([episode(env, key, gid, step, r) for r in rewards])
    for step, eps in by_step.items():
        folder = run / "rollouts" / f"step_{step}" / "train"
        arrived = [e for i in range(max(map(len, eps))) for g in eps if i < len(g) for e in [g[i]]]
        _append(folder / "all" / "traces.jsonl", arrived)
        if effective:
            kept = [e for g in eps if len({x["traces"][0]["metrics"]["correct"] for x in g}) > 1 for e in g]
            _append(folder / "effective" / "traces.jsonl", kept)
    return run


def _append(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)

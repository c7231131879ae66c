"""prime-rl's episode files as a reward log.

prime-rl's file monitor (on by default, ``monitors.file``) writes every episode of a training run, as it
completes, to ``<run_dir>/rollouts/step_<N>/train/all/traces.jsonl``, one ``verifiers`` ``Episode.to_record()``
per line, and the episodes of each shipped batch to ``.../train/effective/traces.jsonl`` (prime-rl's
``docs``: "Episodes"; ``prime_rl/monitors/file.py``). The ``all`` subset holds every generated episode,
"including trace-less failures, curriculum-rejected work, and work that never enters a batch": what a
replay needs. ``effective`` holds only trained episodes; a run folder with ``effective`` files and no
``all`` ones is refused (the groups left out of the batches are missing).

One record (the fields read; the rest is the trace's messages, tokens, timings)::

    {"env": {"id": "gsm8k", "name": "gsm8k"}, "task": {"key": "<stable task id>", ...},
     "group": {"id": "<group uuid>"}, "ok": true,
     "traces": [{"agent": {"trainable": true, ...}, "rewards": {"<name>": {"score": 1.0, "weight": 1.0}}, ...}]}

An episode is one rollout; its reward is the sum of ``score * weight`` over the rewards of its trainable
trace (``Trace.reward``, what prime-rl's GRPO takes). The episodes sharing ``group.id`` are one group (a
task's ``rollouts_per_example``). The prompt is ``task.key`` (the task's stable identity: its content hash
unless the environment names it), the dataset the environment (``env.name``, else ``env.id``), the step the
``N`` of the file that holds the group's last episode. An episode that failed (``ok`` false, or a reward
that did not run) leaves its group incomplete, and so does a group prime-rl cancelled as too stale.

Each step's batch is filled in rollouts, not groups, and groups arrive across steps, so the header leaves
``batch_size`` null (``max_gen_rounds`` 1); prime-rl trains on the groups as they come (no regeneration for
groups without signal), so the run is taken as ``policy: grpo``, ``dynamic_sampling: false``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from snooze.core.errors import DataError
from snooze.logs._header import RewardLogHeader
from snooze.logs._line_checks import dataset_problem, id_problem, step_problem
from snooze.logs.importers._common import (
    DAPO_GUESS,
    Group,
    ImportOptions,
    ImportReport,
    Rollout,
    build_groups,
    check_filtered,
    reward_range,
)
from snooze.logs.importers._fields import checked, flag_problem, name_number, pattern, reward_value
from snooze.logs.importers._jsonl import objects, where

__all__ = ["read_prime_rl", "ALL_FILE"]

ALL_FILE = ("train", "all", "traces.jsonl")
"""Under ``rollouts/step_<N>/``: the file of every training episode of the step."""

_STEP = pattern(r"step_([0-9]+)")  # matched whole (fullmatch), ASCII digits only
_READ = ("env", "task", "group", "ok", "traces")


def _root(path: Path) -> Path:
    if not path.is_dir():
        raise DataError(f"{path}: no such folder; pass prime-rl's run folder (it holds rollouts/step_<N>/)")
    return path / "rollouts" if (path / "rollouts").is_dir() else path


def _files(path: Path, report: ImportReport) -> list[tuple[int, Path]]:
    root = _root(path)
    found, effective = [], 0
    for sub in sorted(root.iterdir()):
        m = _STEP.fullmatch(sub.name)
        if not m or not sub.is_dir():
            report.files_ignored.append(sub.name)
            continue
        file = sub.joinpath(*ALL_FILE)
        if file.is_file():
            step = name_number(m.group(1), str(sub), "the folder's step")
            if step_problem(step) is not None:
                raise DataError(f"{sub}: the folder's step, {step_problem(step)}; prime-rl names it step_<N>")
            found.append((step, file))
        effective += sub.joinpath("train", "effective", "traces.jsonl").is_file()
    if not found and effective:
        raise DataError(
            f"{root}: only train/effective/traces.jsonl files (the episodes of the trained batches): the groups "
            "that never entered a batch are missing, so this is usable only for runs without any filter. Import "
            "the train/all files (prime-rl writes them with monitors.file on, its default)"
        )
    if not found:
        raise DataError(
            f"{root}: no prime-rl episode files (an empty folder, or no rollouts/step_<N>/train/all/traces.jsonl)"
        )
    return sorted(found)


def _field(obj: Any, path: str, at: str) -> Any:
    """``obj``'s value at a dotted ``path``, or a DataError naming it."""
    for name in path.split("."):
        if not isinstance(obj, dict) or name not in obj:
            raise DataError(f"{at}, field {path!r}: missing; prime-rl's episode record has it")
        obj = obj[name]
    return obj


def _trainable(trace: dict[str, Any], at: str, t: int) -> bool:
    """Whether a trace is trained on: its ``agent.trainable``, a real bool (absent: true)."""
    value = (trace.get("agent") or {}).get("trainable", True)
    return bool(checked(value, flag_problem, at, f"traces[{t}].agent.trainable"))


def _reward(episode: dict[str, Any], at: str, reward_field: str | None) -> float | None:
    """The episode's reward (its trainable trace's ``Trace.reward``, or the score of its reward named
    ``reward_field``); ``None`` when it failed or was not scored."""
    traces = _field(episode, "traces", at)
    if not isinstance(traces, list):
        raise DataError(f"{at}, field 'traces': {type(traces).__name__}, not a list of traces")
    ok = checked(episode["ok"], flag_problem, at, "ok") if "ok" in episode else True
    if not ok or not traces:
        return None
    bad = next((i for i, t in enumerate(traces) if _trace_problem(t)), None)
    if bad is not None:
        raise DataError(
            f"{at}, field 'traces[{bad}]': {_trace_problem(traces[bad])}: a trace is an object whose 'agent' is an "
            "object (verifiers' Trace); is this a prime-rl episode file?"
        )
    trainable = [t for i, t in enumerate(traces) if _trainable(t, at, i)]
    if len(trainable) != 1:
        raise DataError(
            f"{at}, field 'traces': {len(trainable)} trainable traces in one episode; a reward log has one reward "
            "per rollout (multi-agent episodes are not imported: mark the other agents' traces trainable: false, "
            "or write one episode per trained agent)"
        )
    rewards = _field(trainable[0], "rewards", at + ", traces[0]")
    if not isinstance(rewards, dict):
        raise DataError(f"{at}, field 'traces[0].rewards': {type(rewards).__name__}, not a mapping of named rewards")
    if reward_field is not None:
        if reward_field not in rewards:
            raise DataError(
                f"{at}, field 'traces[0].rewards': no reward named {reward_field!r} (--reward-field); it has "
                f"{sorted(map(str, rewards))}"
            )
        rewards = {reward_field: rewards[reward_field]}
    total = 0.0
    for name, r in rewards.items():
        if r is None:
            return None  # scoring did not run (verifiers: None)
        if not isinstance(r, dict) or "score" not in r:
            raise DataError(
                f"{at}, field 'traces[0].rewards.{name}': {r!r} is not {{'score': number, 'weight': number}}"
            )
        score = reward_value(r["score"], at, f"traces[0].rewards.{name}.score")
        weight = 1.0 if reward_field is not None else reward_value(r.get("weight", 1.0), at, f"rewards.{name}.weight")
        total += score * weight  # verifiers' Reward.value
    return total


def _trace_problem(trace: Any) -> str | None:
    """What makes ``trace`` no trace record, or ``None``."""
    if not isinstance(trace, dict):
        return f"a {type(trace).__name__}"
    agent = trace.get("agent")
    if agent is not None and not isinstance(agent, dict):
        return f"its 'agent' is a {type(agent).__name__}"
    return None


def _rows(
    files: list[tuple[int, Path]], report: ImportReport, sizes: dict[str, Counter[Any]], reward_field: str | None
) -> Iterator[Rollout]:
    seen: set[str] = set()
    last: dict[Any, tuple[int, str]] = {}  # group id -> (step, where) of its last episode
    first: dict[Any, tuple[Any, ...]] = {}  # group id -> (step, environment, task, run) of its first episode
    rows: list[tuple[Any, str, str | int, float | None, str]] = []
    for step, path in files:
        report.files_read.append(str(path.relative_to(path.parents[3])))
        for number, obj in objects(path):
            at = where(path, number)
            seen.update(obj)
            env = _field(obj, "env", at)
            name = (env.get("name") or env.get("id")) if isinstance(env, dict) else None
            if name is None:
                raise DataError(f"{at}, field 'env.name': missing; an episode names its environment")
            checked(name, dataset_problem, at, "env.name")
            key = checked(_field(obj, "task.key", at), id_problem, at, "task.key")
            gid = checked(_field(obj, "group.id", at), id_problem, at, "group.id")
            this = (step, name, key, _run_id(obj))
            _check_reused(gid, first.setdefault(gid, this), this, at)
            rows.append((gid, name, key, _reward(obj, at, reward_field), at))
            last[gid] = (step, at)
    report.fields_not_read = sorted(seen - set(_READ))
    for gid, name, key, reward, at in rows:
        sizes[name][gid] += 1
        yield Rollout(last[gid][0], name, key, gid, reward, at)


SPAN = 2
"""Most step folders a group's episodes may lie apart (a group that finishes after the step it began in,
under prime-rl's asynchrony); the same id further apart is an id used again."""


def _run_id(obj: dict[str, Any]) -> Any:
    """The episode's run (``run.id``, prime-rl's provenance), or ``None`` when the record has none."""
    run = obj.get("run")
    return run.get("id") if isinstance(run, dict) else None


def _check_reused(gid: Any, first: tuple[Any, ...], this: tuple[Any, ...], at: str) -> None:
    """A group id names one group: episodes of one run, environment and task, in step folders at most
    :data:`SPAN` apart. The same id in another run (``run.id``), for another task or environment, or steps
    later, is an id used twice: two runs' folders merged by hand would silently make groups of twice the size."""
    step, env, key, run = first
    if this[1:] == first[1:] and this[0] - step <= SPAN:
        return
    was = f"task {key!r} ({env}) at step {step}" + (f" of run {run!r}" if run is not None else "")
    now = f"task {this[2]!r} ({this[1]}) at step {this[0]}" + (f" of run {this[3]!r}" if this[3] is not None else "")
    raise DataError(
        f"{at}, field 'group.id': {gid!r} was the group of {was}, and names {now} here: one id for two groups "
        "(two runs' folders merged?). Import each run on its own"
    )


def read_prime_rl(
    path: str | Path, opts: ImportOptions | None = None
) -> tuple[list[Group], RewardLogHeader, ImportReport]:
    """The groups of a prime-rl run's training episodes (module docstring), the header of their reward log, and
    the report. Every problem is a :class:`~snooze.DataError` naming the file, the line and the field."""
    opts = opts or ImportOptions()
    path = Path(path)
    report = ImportReport(source=f"prime-rl episodes {path}", keyed_by="task.key")
    sizes: dict[str, Counter[Any]] = defaultdict(Counter)
    files = _files(path, report)
    rollouts = list(_rows(files, report, sizes, opts.reward_field))
    size_of = {env: max(c.values()) for env, c in sizes.items()}
    steps = [step for step, _ in files]
    groups = build_groups(rollouts, opts, report, size_of if opts.group_size is None else None, steps)
    rr = reward_range(groups, opts.reward_range, report.source)
    caveats = (*check_filtered(groups, rr, opts, report), DAPO_GUESS)
    report.notes.append(f"note: {DAPO_GUESS}")
    report.datasets = dict(Counter(g.dataset for g in groups))
    report.prompts = len({(g.dataset, g.id) for g in groups})
    header = RewardLogHeader(
        group_size=report.group_size,
        max_gen_rounds=1,
        policy="grpo",
        dynamic_sampling=False,
        reward_range=rr,
        source="snooze import prime-rl",
        reward_field=opts.reward_field,
        caveats=caveats,
    )
    report.header = header
    return groups, header, report

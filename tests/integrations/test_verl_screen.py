"""Partial groups (``screen_size``) in verl 0.9.1's own ``fit()`` on CPU: the snooze trainer (verl's sync mode) at
the recommended setting (snoozing at factor 1, the surplus carried) with a screen of K=2 of G=4 rollouts, and
rounds of 4 prompts (``data.gen_batch_size``: a round of fresh screens holds a batch's 2 x 4 rollouts).

Each prompt is submitted with verl's per-prompt ``rollout.n`` (``__rollout_n__``): a screen asks for K, the rest
of a screen that passed asks for G - K under a uid of its own, and the replay buffer gives the rest's trajectories
its screen's uid, so verl's GRPO (grouped by ``uid``) sees one group of G. The probe of ``_verl_screen`` records
what verl trained on after its own ``_compute_advantage``. A second run resumes the first from a checkpoint and
must end in the same scheduler state.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("verl", reason="needs the [verl] extra")
pytest.importorskip("transfer_queue", reason="needs the [verl] extra")
pytest.importorskip("ray", reason="needs the [verl] extra")

from integrations._verl_env import B, G  # noqa: E402
from integrations._verl_fit import STEPS  # noqa: E402
from integrations._verl_screen import ROWS, TRAINED, K  # noqa: E402
from integrations.test_verl_fit import (  # noqa: E402
    _groups,
    _resume_folder,
    _rewards,
    _spawn,
    _state,
    _stop,
    _train_lines,
    _wait,
    logged,
    summary,
)

pytestmark = [pytest.mark.verl, pytest.mark.slow, pytest.mark.timeout(900)]

EASY = {(ds, i) for ds, i, truth in ROWS if truth == "easy"}  # every rollout scores 1: their screens stop


def _run(folder: Path) -> None:
    proc = _spawn(["integrations._verl_screen", str(folder)], folder)
    try:
        _wait(proc, folder)
    finally:
        _stop(proc)


def _resume_at(done: Path) -> int:
    """The last checkpoint before the end that carried no group into the next step: verl's checkpoint does not
    hold TransferQueue, so a carried group is given up on a resume (docs/integrations/verl.md) and the runs would
    differ for that reason alone."""
    lines = _train_lines(logged(done))
    steps = [s for s in range(1, STEPS) if lines[s - 1]["snooze/surplus/carried_out"] == 0]
    assert steps, "every step of the first run carried a group into the next: no checkpoint resumes exactly"
    return steps[-1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("screen")
    done, resumed = root / "screened", root / "resumed"
    done.mkdir()
    _run(done)
    step = _resume_at(done)
    resumed.mkdir()
    _resume_folder(done, resumed, step)
    _run(resumed)
    return {"done": done, "resumed": resumed, "step": step}


def _trained(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / TRAINED).read_text().splitlines()]


def test_every_trained_group_is_a_screen_and_its_rest_under_one_uid(runs: dict[str, Any]) -> None:
    folder = runs["done"]
    got = summary(folder)
    assert got["global_steps"] == STEPS + 1 and got["actor_updates"] == STEPS  # verl's fit() trained every step
    assert got["weights_end"] != got["weights_start"]
    trained = _trained(folder)
    assert [t["step"] for t in trained] == list(range(1, STEPS + 1))
    for t in trained:
        assert len(t["rows"]) == B * G  # a batch of B whole groups, no padding
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in t["rows"]:
            groups[row["uid"]].append(row)
        assert len(groups) == B
        for uid, rows in groups.items():
            assert len(rows) == G and len({tuple(r["prompt"]) for r in rows}) == 1  # G rows of one prompt
            sessions: dict[str, set[int]] = defaultdict(set)  # TransferQueue key: {submitted uid}_{session}_{output}
            for r in rows:
                submitted, session, _ = r["key"].rsplit("_", 2)
                sessions[submitted].add(int(session))
            rest = [s for s in sessions if s != uid]
            assert sorted(sessions) == sorted([uid, *rest]) and len(rest) == 1  # the screen (the group's uid), a rest
            assert sessions[uid] == set(range(K)) and sessions[rest[0]] == set(range(G - K))
            # verl's GRPO advantage saw the G rows as one group: (score - mean) / (std + eps), over all G
            scores = np.array([r["score"] for r in rows])
            assert scores.std() > 0  # only groups with signal are trained
            want = (scores - scores.mean()) / (scores.std(ddof=1) + 1e-6)
            np.testing.assert_allclose([r["advantage"] for r in rows], want, rtol=1e-4, atol=1e-5)


def test_screens_are_stopped_and_continued_and_counted(runs: dict[str, Any]) -> None:
    folder = runs["done"]
    steps = _train_lines(logged(folder))
    last = steps[-1]
    names = ("screened", "screen_stopped", "screen_continued")
    screened, stopped, continued = (last[f"snooze/total/{k}"] for k in names)
    assert stopped >= 1 and continued >= 1 and screened == stopped + continued
    assert screened == sum(d["snooze/gen/screened"] for d in steps)
    assert last["snooze/total/train_groups"] == B * STEPS
    for d in steps:  # every screen finishes in its step: k rollouts each, G - k more for each that continued
        assert d["snooze/gen/rollouts"] == K * d["snooze/gen/screened"] + (G - K) * d["snooze/gen/screen_continued"]
        assert d["snooze/gen/groups"] == d["snooze/gen/screened"]  # a screened prompt is one group
    assert last["snooze/total/rollouts"] == K * screened + (G - K) * continued
    assert last["snooze/total/rollouts"] < G * screened  # the stopped screens saved their rest
    assert max(d["snooze/asleep"] for d in steps) >= 1  # a stopped screen's outcome (too easy on K) snoozed its prompt
    # the reward log holds the whole groups (each screen that continued, with its rest), never a stopped screen
    logged_groups = _rewards(folder)
    assert len(logged_groups) == continued
    assert all(len(g["rewards"]) == G and g["tokens"] > 0 for g in logged_groups)
    assert not {(g["dataset"], g["id"]) for g in logged_groups} & EASY  # easy prompts' screens (1, 1) all stopped


def test_a_resumed_screening_run_continues_exactly(runs: dict[str, Any]) -> None:
    done, resumed, step = runs["done"], runs["resumed"], runs["step"]
    assert summary(resumed)["resumed_at"] == step
    a, b = _state(done, STEPS), _state(resumed, STEPS)
    assert a["meta"] == b["meta"]
    assert a["arrays"].keys() == b["arrays"].keys()
    for name in a["arrays"]:
        x, y = a["arrays"][name], b["arrays"][name]
        if name == "step.rewards":  # a group carried into the next step, its rewards in session order: a prompt's
            x, y = np.sort(x, axis=1), np.sort(y, axis=1)  # sessions ask the server together, in either order
        np.testing.assert_array_equal(x, y, err_msg=name)
    ours = {k: v for k, v in _train_lines(logged(resumed))[-1].items() if k.startswith("snooze/")}
    theirs = {k: v for k, v in _train_lines(logged(done))[-1].items() if k.startswith("snooze/")}
    assert ours == theirs
    assert sum(d["snooze/gen/screened"] for d in _train_lines(logged(resumed))) > 0  # it screened after the resume
    assert _groups(resumed) == _groups(done)  # the reward log cut back to the checkpoint, the same groups appended

"""``SnoozeReplayBuffer``: verl's v1 replay buffer with the scheduler's step loop in place of its DAPO refill.

verl's sync trainer builds each batch in ``ReplayBuffer.sample``: it polls TransferQueue, where the
rollout workers put every finished trajectory (with its ``rm_scores`` and the prompt's dataset
fields), and with ``algorithm.filter_groups`` on it evicts zero-spread groups and refills. Here the
training partition runs the step loop (docs/concepts.md, "The step loop") instead::

    round 1 was submitted by the trainer's prepare_step (none when carried-in groups fill the batch)
    loop: once the round is finished, report its groups to the scheduler in issue order (before any filtering)
          wait while the round is in flight
          if the batch lacks signal groups and rounds < max_gen_rounds: submit the next round
    close the scheduler's step: train on the groups it chose, drop every other group

so every group is reported once, generation is bounded, and what verl trains on is exactly the
scheduler's batch. With partial groups (``screen_size``) each prompt was submitted with verl's per-prompt
``rollout.n`` (``__rollout_n__``: k for a screen, G - k for a rest); a stopped screen is cleared at once, a screen
that passed waits in TransferQueue for its rest, which verl rolls out under a uid of its own (its keys must not
overwrite the screen's sessions) and whose trajectories are then given the screen's ``uid`` field, so verl's GRPO
advantage (grouped by ``uid``) sees one group of G. Under ``carry_surplus`` the step's surplus is neither trained
nor dropped: its trajectories stay in the ``train`` partition for the next step's batch. Validation
(``partition_id="val"``) is verl's own sampling, unchanged.
"""

from __future__ import annotations

import numbers
import time
from collections import defaultdict
from typing import Any

import numpy as np
import transfer_queue as tq
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.replay_buffer import FILTER_GROUPS_REWARD_METRIC, ReplayBuffer
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

from snooze import IntegrationError
from snooze._kit.checks import shown

__all__ = ["SnoozeReplayBuffer"]

TRAIN = "train"


def _trajectory_rewards(data: Any, metric: str, n: int) -> np.ndarray:
    """One reward per trajectory, as verl's DAPO filter reads it (``_dapo_filtered_keys``)."""
    if metric == FILTER_GROUPS_REWARD_METRIC:
        return np.array([float(t.sum()) for t in data["rm_scores"]], dtype=np.float64)  # [T]
    out = np.empty(n, dtype=np.float64)
    for i, value in enumerate(data["extra_fields"]):
        extra = getattr(value, "data", value)
        info = extra.get("reward_extra_info", {}) if isinstance(extra, dict) else {}
        if metric not in info:
            raise IntegrationError(
                f"a finished trajectory has no reward_extra_info[{metric!r}]; set trainer.v1.snooze.reward_metric "
                "to 'reward' (rm_scores) or to a key the reward function returns"
            )
        out[i] = _reward(info[metric], metric)
    return out


def _reward(value: Any, metric: str) -> float:
    """A reward function's ``reward_extra_info`` value as a float: a real number (a bool, such as an ``acc``, is
    0 or 1; NaN and infinities go on to the scheduler's ``RewardError``), or an ``IntegrationError`` naming it."""
    item = getattr(value, "item", None)  # a numpy or torch scalar
    if callable(item):
        try:
            value = item()
        except (ValueError, RuntimeError):  # more than one element
            pass
    try:
        if isinstance(value, numbers.Real):
            return float(value)
    except OverflowError:  # an integer no float holds
        pass
    raise IntegrationError(
        f"a finished trajectory's reward_extra_info[{metric!r}] is {shown(value)}, not a number a float holds (it "
        "was a builtin ValueError or TypeError); the reward function must return a number there"
    )


class SnoozeReplayBuffer(ReplayBuffer):  # type: ignore[misc]
    """A v1 ``ReplayBuffer`` whose training batches are built by the snooze scheduler.

    Built by :class:`~snooze.integrations.verl.SnoozeTrainer` (it needs the trainer's run, attached
    once the data is read). ``refill_fn`` is verl's ``_add_prompts_to_generate``: each call submits
    one scheduler round through verl's own dataloader path.
    """

    def __init__(self, *args: Any, reward_metric: str = FILTER_GROUPS_REWARD_METRIC, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reward_metric = reward_metric
        self.run: Any = None

    def attach(self, run: Any) -> None:
        self.run = run

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict]:
        if partition_id != TRAIN:
            return super().sample(global_steps, partition_id, batch_size)
        run = self.run
        if run is None:
            raise IntegrationError("SnoozeReplayBuffer has no scheduler attached; it is built by the snooze trainer")
        if batch_size != run.config.batch_size:
            raise IntegrationError(
                f"verl asked for {batch_size} groups (data.train_batch_size / parameter_sync_step) but the scheduler "
                f"builds batches of {run.config.batch_size}; the snooze trainer samples once per step"
            )
        last_debug = time.time()
        while True:
            self._sync_metadata_from_transfer_queue()
            self._take_terminal_groups()
            if run.open:  # the round is still being generated
                last_debug = self._wait_for_next_poll(TRAIN, last_debug)
                continue
            if not run.wants_round():
                break
            self.refill_fn(run.config.gen_size)
        train, drop, metrics = run.finish_step()
        self._sync_metadata_from_transfer_queue()
        snapshot = dict(self.partitions[TRAIN])
        self._clear_groups(TRAIN, set(drop))
        return self._materialize_batch(TRAIN, train, snapshot), metrics

    def _take_terminal_groups(self) -> None:
        """Once every group of the round is finished or failed: report the finished ones, withdraw the failed ones,
        clear the groups that cannot train. The whole round at once, in the order it was issued, so the scheduler
        sees the same reports in the same order whichever group's rollouts finished first (the next round waits
        for the whole round anyway): a run, and a resumed one, does not depend on the rollout servers' timing."""
        run = self.run
        finished = [u for u in run.open if u in self.finished_keys[TRAIN]]
        failed = [u for u in run.open if u in self.failure_keys[TRAIN]]
        if len(finished) + len(failed) < len(run.open):
            return
        if finished:
            keys, rewards = self._read_groups(finished)
            never, joined = run.report(finished, keys, rewards, self._group_tokens(finished))
            self._clear_groups(TRAIN, set(never))
            self._join_rests({rest: screen for rest, screen in joined.items() if rest not in never})
        if failed:
            run.cancel(failed)
            self._clear_groups(TRAIN, set(failed))

    def _join_rests(self, joined: dict[str, str]) -> None:
        """Give each rest's trajectories its screen's ``uid`` (``joined``: rest uid -> screen uid), so that verl's
        GRPO advantage (``_compute_advantage``: grouped by the trajectories' ``uid`` field) sees the screen's k and
        the rest's G - k rows as one group of G. The rest was submitted under a uid of its own so that its keys
        (``{uid}_{session}_{output}``, sessions from 0) do not overwrite the screen's; its keys keep that uid."""
        keys = [key for key in self.partitions[TRAIN] if key.partition("_")[0] in joined]
        if not keys:
            return
        uids = [{"uid": joined[key.partition("_")[0]]} for key in keys]
        tq.kv_batch_put(keys=keys, partition_id=TRAIN, fields=list_of_dict_to_tensordict(uids))

    def _group_tokens(self, uids: list[str]) -> np.ndarray | None:
        """``[N]`` each group's generated tokens: the ``response_len`` TransferQueue's tags hold for every trajectory
        of the group (every output of every session; a multi-turn agent's tool responses inside a response count
        too), summed; ``None`` when a trajectory has no such tag (a custom agent loop): the scheduler then counts
        the groups in ``gen/tokens_missing``."""
        wanted, out = {u: i for i, u in enumerate(uids)}, np.zeros(len(uids), dtype=np.int64)
        for key, tag in self.partitions[TRAIN].items():  # trajectory keys: {uid}_{session}_{output}
            i = wanted.get(key.partition("_")[0])
            if i is None:
                continue
            length = tag.get("response_len")
            if not isinstance(length, (int, np.integer)) or isinstance(length, bool) or length < 0:
                return None
            out[i] += int(length)
        return out

    def _read_groups(self, uids: list[str]) -> tuple[list[tuple[str, Any]], list[np.ndarray]]:
        """Each prompt's key and rewards, one row per uid of the rollouts it asked for (``group_size``; with
        screening its candidate's ``n``: ``rollout.n`` per prompt is verl's ``__rollout_n__``), sessions in order
        (the last output of a multi-output session carries its reward, as verl's agent loop writes it). Raises
        before anything is reported when a prompt does not have that many sessions."""
        run = self.run
        width = {uid: run.width(uid) for uid in uids}
        wanted = set(uids)
        by_uid: dict[str, list[tuple[int, int, str]]] = defaultdict(list)  # uid -> (session, output, key)
        for key in self.partitions[TRAIN]:  # trajectory keys: {uid}_{session}_{output}
            uid, _, rest = key.partition("_")
            if uid in wanted:
                session, _, output = rest.partition("_")
                by_uid[uid].append((int(session), int(output or 0), key))
        for uid in uids:
            sessions = {s for s, _, _ in by_uid[uid]}
            if len(sessions) != width[uid]:
                asked = (
                    f"the scheduler asked for {width[uid]} (its candidate's n: screen_size)"
                    if run.screening
                    else f"the scheduler's group_size is {width[uid]} (actor_rollout_ref.rollout.n)"
                )
                raise IntegrationError(
                    f"group uid {uid} finished with {len(sessions)} rollouts but {asked}; every prompt needs the "
                    "rollouts the scheduler asked for (an agent loop that sets __rollout_n__ per prompt cannot be "
                    "used with snooze)"
                )
        last = {(u, s): k for u in uids for s, _, k in sorted(by_uid[u])}  # the highest output index wins
        order = [last[(u, s)] for u in uids for s in sorted({s for s, _, _ in by_uid[u]})]  # [N*G]
        field = "rm_scores" if self.reward_metric == FILTER_GROUPS_REWARD_METRIC else "extra_fields"
        data = tq.kv_batch_get(keys=order, partition_id=TRAIN, select_fields=[field, "data_source", "extra_info"])
        flat = _trajectory_rewards(data, self.reward_metric, len(order))
        starts = np.concatenate([[0], np.cumsum([width[u] for u in uids])]).tolist()
        rewards = [flat[a:b] for a, b in zip(starts[:-1], starts[1:])]
        sources, extras = list(data["data_source"]), list(data["extra_info"])
        keys = [(str(sources[a]), _index(extras[a], uid)) for a, uid in zip(starts[:-1], uids)]
        return keys, rewards


def _index(extra: Any, uid: str) -> Any:
    extra = getattr(extra, "data", extra)
    if not isinstance(extra, dict) or extra.get("index") is None:
        raise IntegrationError(f"group uid {uid}: its trajectories carry no extra_info.index (the prompt's stable id)")
    value = extra["index"]
    return value.item() if isinstance(value, np.generic) else value

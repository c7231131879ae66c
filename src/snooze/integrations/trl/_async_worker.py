"""The rollout worker's side of :class:`~snooze.integrations.trl.SnoozeAsyncGRPOTrainer` (runs in TRL's spawned child).

TRL's ``_AsyncRolloutLoop`` walks ``train_dataset`` endlessly and pushes scored rows to the trainer. Here it walks
the prompts the scheduler issued instead, and pushes each scored group whole, with its rewards:

- ``_repeat_iterator`` yields each issued prompt ``num_generations`` times under its ticket (TRL's ``group_id``),
  in issue order. The prompts arrive on a queue of their own (:class:`Inherited`), read by a thread that hands
  them to the event loop. When none is waiting it yields a *wait* placeholder: its "generation" awaits the
  next prompt (or a second) and makes no request, so the loop never blocks while requests are in flight, and a
  new prompt is picked up as soon as it arrives. Placeholders come in groups, under negative ids (tickets are
  ``>= 0``).
- ``_score_group`` scores with TRL's own code, then returns one :class:`ScoredGroup`: the ticket, each
  conversation's reward (TRL's sum over reward functions; ``nan`` when every function returned ``None``, or when a
  conversation left no training row), the rows, and the policy version the group was generated under. Wait
  placeholders score to nothing, and their metrics push is dropped.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from trl.experimental.async_grpo.async_rollout_worker import _AsyncRolloutLoop

__all__ = ["Inherited", "ScoredGroup", "SnoozeRolloutLoop"]

WAIT_S = 1.0  # a wait placeholder ends when a prompt arrives, or after this long
WAIT_ROW: dict[str, Any] = {"prompt": [{"role": "user", "content": ""}]}


class Inherited:
    """A ``multiprocessing`` queue handed to TRL's spawned child through the worker's keyword arguments.

    TRL checks that those arguments pickle before it spawns the child; a queue pickles only while a process is
    being spawned (it is inherited, not copied). So outside a spawn this pickles as an empty shell, and during
    the spawn as the queue itself.
    """

    def __init__(self, queue: Any) -> None:
        self.queue = queue

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        from multiprocessing.context import get_spawning_popen

        return (Inherited, (self.queue if get_spawning_popen() is not None else None,))


@dataclass
class ScoredGroup:
    """One scored group, as the child pushes it to the trainer (one item of TRL's rollout queue)."""

    ticket: int
    rewards: list[float]  # one per conversation, in generation order
    samples: list[Any]  # TRL's RolloutSample rows of the group, conversation by conversation
    model_version: int
    enqueued_at: float | None = field(default=None)  # set by TRL's score loop
    tokens: int | None = None  # the group's completion tokens, summed (gen/tokens); None: TRL kept no ids


class SnoozeRolloutLoop(_AsyncRolloutLoop):  # type: ignore[misc]
    """TRL's rollout loop generating the scheduler's prompts (module doc). Built by TRL in the child, with the
    extra keyword ``prompt_queue`` (an :class:`Inherited` queue of ``(ticket, record)``)."""

    def __init__(self, *, prompt_queue: Inherited, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._prompt_queue = prompt_queue.queue
        self._arrived: deque[tuple[int, dict[str, Any]]] = deque()
        self._prompts_waiting: asyncio.Event | None = None
        self._printing, self.log_completions = self.log_completions, False  # printed here, by scored group
        self._drop_push = False

    # -- prompts --------------------------------------------------------------------------------------------------
    def _start_reader(self) -> None:
        loop = asyncio.get_running_loop()
        self._prompts_waiting = asyncio.Event()

        def arrive(item: tuple[int, dict[str, Any]]) -> None:  # on the event loop's thread
            self._arrived.append(item)
            assert self._prompts_waiting is not None
            self._prompts_waiting.set()

        def read() -> None:
            while True:
                try:
                    item = self._prompt_queue.get()
                except (EOFError, OSError):  # the trainer went away
                    return
                try:
                    loop.call_soon_threadsafe(arrive, item)
                except RuntimeError:  # the loop is closed: the worker is stopping
                    return

        threading.Thread(target=read, daemon=True, name="snooze-prompts").start()

    def _repeat_iterator(self) -> Any:
        self._start_reader()
        waits = 0
        while True:
            if not self._arrived:  # a whole group of placeholders, each under its own id: TRL forgets a group
                assert self._prompts_waiting is not None  # once num_generations completions of it are back
                self._prompts_waiting.clear()
                waits += 1
                for _ in range(self.num_generations):
                    yield -waits, WAIT_ROW
                continue
            ticket, row = self._arrived.popleft()
            for _ in range(self.num_generations):
                yield ticket, row

    async def _generate_one(self, prompt: Any, tool_dict: Any, tools: Any, group_id: int = 0) -> Any:
        if group_id >= 0:
            return await super()._generate_one(prompt, tool_dict=tool_dict, tools=tools, group_id=group_id)
        assert self._prompts_waiting is not None
        try:
            await asyncio.wait_for(self._prompts_waiting.wait(), timeout=WAIT_S)
        except (TimeoutError, asyncio.TimeoutError):
            pass
        return [], [], [], 0, 0, None

    # -- scoring --------------------------------------------------------------------------------------------------
    async def _score_group(self, group: Any) -> list[Any]:
        if group.group_id < 0:
            self._drop_push = True  # the score loop's next push describes this placeholder: drop it
            return []
        samples = await super()._score_group(group)
        rewards, at = [], 0
        for sequences in group.completions_sequences:
            rewards.append(float(samples[at].metrics["reward"]) if sequences else math.nan)
            at += len(sequences)
        if self._printing and samples:
            from trl.trainer.utils import print_prompt_completions_sample

            print_prompt_completions_sample(
                prompts=[s.prompt for s in samples],
                completions=[s.completion for s in samples],
                rewards={"reward": [s.metrics["reward"] for s in samples]},
                advantages=[s.advantage for s in samples],
                step=self._total_groups_scored,
                num_samples=self.num_completions_to_print,
            )
        ids = getattr(group, "completions_ids", None)  # each conversation's completion token ids
        tokens = None if ids is None else sum(len(x) for x in ids)
        return [ScoredGroup(int(group.group_id), rewards, samples, int(group.model_version), tokens=tokens)]

    def _push_metrics(self, values: dict[str, Any]) -> None:
        if self._drop_push:
            self._drop_push = False  # (counters and rates stay for the next push)
            return
        super()._push_metrics(values)

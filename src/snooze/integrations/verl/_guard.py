"""What the snooze trainer relies on in verl's private trainer API, checked when the integration is imported.

The trainer and its replay buffer override or call these methods of verl 0.9's ``PPOTrainerSync`` and
``ReplayBuffer`` with these parameters (names and order, from ``inspect.signature``); a verl whose
methods take other parameters is refused at import, not met as a ``TypeError`` in the middle of a run.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

__all__ = ["TRAINER_API", "BUFFER_API", "ASYNC_TRAINER_API", "ASYNC_BUFFER_API", "api_mismatches"]

TRAINER_API: dict[str, tuple[str, ...]] = {  # PPOTrainerSync
    "__init__": ("self", "config"),
    "_build_replay_buffer": ("self",),
    "_init_dataloader": ("self",),
    "_fetch_one_gen_batch": ("self",),
    "_add_prompts_to_generate": ("self", "num_prompts"),
    "prepare_step": ("self",),
    "_save_checkpoint": ("self",),
    "_load_checkpoint": ("self",),
}
BUFFER_API: dict[str, tuple[str, ...]] = {  # ReplayBuffer
    "__init__": (
        "self",
        "trainer_mode",
        "trainer_config",
        "max_off_policy_threshold",
        "max_off_policy_strategy",
        "sampler_kwargs",
        "poll_interval",
        "refill_fn",
    ),  # the leading ones: the snooze buffer passes these
    "sample": ("self", "global_steps", "partition_id", "batch_size"),
    "_sync_metadata_from_transfer_queue": ("self",),
    "_clear_groups": ("self", "partition_id", "uids"),
    "_materialize_batch": ("self", "partition_id", "selected_prompt_uids", "partition_snapshot"),
    "_wait_for_next_poll": ("self", "partition_id", "last_debug_time"),
}
ASYNC_TRAINER_API: dict[str, tuple[str, ...]] = {  # PPOTrainerColocateAsync
    "_next_train_batch": ("self", "num_prompts"),
    "_reissue_inflight_prompts": ("self", "partition_id"),
    "on_train_begin": ("self",),
}
ASYNC_BUFFER_API: dict[str, tuple[str, ...]] = {  # ReplayBufferAsync
    "_stale_terminal_keys": ("self", "global_steps", "partition_id"),
    "_has_enough_samples": ("self", "global_steps", "partition_id", "batch_size", "sampleable_keys"),
}
_PREFIX_ONLY = {"__init__"}  # later parameters with defaults are verl's own business


def api_mismatches(api: Mapping[Any, Mapping[str, tuple[str, ...]]]) -> list[str]:
    """Each ``Class.method`` that is missing or whose parameters differ from what is relied on."""
    out = []
    for cls, methods in api.items():
        for name, want in methods.items():
            method = getattr(cls, name, None)
            if not callable(method):
                out.append(f"{cls.__name__}.{name} is missing")
                continue
            try:
                params = inspect.signature(method).parameters
            except (TypeError, ValueError):
                out.append(f"{cls.__name__}.{name} has no signature to check")
                continue
            got = tuple(params)
            if name in _PREFIX_ONLY:
                rest = [
                    p
                    for p in list(params.values())[len(want) :]
                    if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                ]
                ok = got[: len(want)] == want and not rest
            else:
                ok = got == want
            if not ok:
                out.append(
                    f"{cls.__name__}.{name}{inspect.signature(method)} "
                    f"(the snooze trainer calls it as ({', '.join(want)}))"
                )
    return out

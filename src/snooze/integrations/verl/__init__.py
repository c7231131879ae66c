"""verl integration: the snooze scheduler inside verl 0.9's v1 trainer (``trainer.v1.trainer_mode=snooze``).

Importing this module registers three names in verl's trainer registry: ``snooze`` (verl's sync
trainer with prompts drawn from the scheduler and the scheduler's step loop in the replay buffer),
``snooze_colocate_async`` (verl's colocated async trainer, generation a batch ahead, with the scheduler
drawing each prompt and choosing each batch) and ``snooze_separate_async`` (verl's separate async trainer:
standalone rollout, weights synced by its checkpoint engine; ``parameter_sync_step=1``). verl imports it by
itself in every process: ``snooze-rl`` declares it in verl's ``verl.plugins`` entry-point group, and
``VERL_USE_EXTERNAL_MODULES=snooze.integrations.verl`` does the same where entry points are turned off.
Options live under ``trainer.v1.snooze`` (see ``docs/integrations/verl.md``)::

    python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo trainer.v1.trainer_mode=snooze \\
        +trainer.v1.snooze.policy=snooze +trainer.v1.snooze.options.factor=1 ...

Tested with verl 0.9.1 (``pip install --no-deps verl==0.9.1 transferqueue==0.1.11``). Check a command line
without a cluster: ``snooze check-verl OVERRIDES...`` (:func:`check_overrides`).
"""

from __future__ import annotations

from snooze import IntegrationError

SUPPORTED = "0.9"  # verl minor version whose private trainer methods this integration overrides
TESTED = "0.9.1"

try:
    import verl
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync
    from verl.trainer.ppo.v1.trainer_colocate_async import PPOTrainerColocateAsync
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise IntegrationError(
        f"snooze.integrations.verl needs verl {TESTED} and its v1 trainer ({exc}); see docs/integrations/verl.md "
        "for the install line"
    ) from exc

if not str(verl.__version__).startswith(SUPPORTED + "."):  # pragma: no cover - depends on the installed verl
    raise IntegrationError(
        f"snooze.integrations.verl supports verl {SUPPORTED}.x (tested with {TESTED}); verl {verl.__version__} is "
        f"installed. Install verl=={TESTED} (see docs/integrations/verl.md)."
    )

from snooze.integrations.verl._guard import (  # noqa: E402
    ASYNC_BUFFER_API,
    ASYNC_TRAINER_API,
    BUFFER_API,
    TRAINER_API,
    api_mismatches,
)

_mismatches = api_mismatches(  # signatures, not just names
    {
        PPOTrainerSync: TRAINER_API,
        ReplayBuffer: BUFFER_API,
        PPOTrainerColocateAsync: ASYNC_TRAINER_API,
        ReplayBufferAsync: ASYNC_BUFFER_API,
    }
)
if _mismatches:  # pragma: no cover - depends on the installed verl
    raise IntegrationError(
        f"verl {verl.__version__} differs from the API the snooze trainer overrides (tested with verl {TESTED}): "
        + "; ".join(_mismatches)
    )

from snooze.integrations.verl._async_buffer import SnoozeAsyncReplayBuffer  # noqa: E402
from snooze.integrations.verl._async_trainer import COLOCATE_MODE, SnoozeColocateAsyncTrainer  # noqa: E402
from snooze.integrations.verl._buffer import SnoozeReplayBuffer  # noqa: E402
from snooze.integrations.verl._check import Finding, check_overrides  # noqa: E402
from snooze.integrations.verl._options import OPTIONS_KEY, VerlOptions, read_options  # noqa: E402
from snooze.integrations.verl._prompts import LOADER_FORMAT, SnoozePromptLoader, prompt_keys  # noqa: E402
from snooze.integrations.verl._run import METRIC_PREFIX, SnoozeRun  # noqa: E402
from snooze.integrations.verl._trainer import STATE_DIR, TRAINER_MODE, SnoozeTrainer  # noqa: E402

__all__ = [
    "SnoozeTrainer",
    "SnoozeColocateAsyncTrainer",
    "SnoozeReplayBuffer",
    "SnoozeAsyncReplayBuffer",
    "SnoozePromptLoader",
    "SnoozeRun",
    "VerlOptions",
    "read_options",
    "check_overrides",
    "Finding",
    "prompt_keys",
    "TRAINER_MODE",
    "COLOCATE_MODE",
    "OPTIONS_KEY",
    "STATE_DIR",
    "METRIC_PREFIX",
    "LOADER_FORMAT",
]

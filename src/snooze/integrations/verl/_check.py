"""A verl command line checked for the snooze trainer on this machine, before any cluster: ``snooze check-verl``.

verl's ``main_ppo`` composes its config with Hydra (``@hydra.main(config_path="config",
config_name="ppo_trainer")``: ``verl/trainer/config/ppo_trainer.yaml`` and the overrides), runs
``validate_config`` on it, starts Ray, and only then, in its ``TaskRunnerV1`` actor, resolves the config
and builds the trainer, which is where the snooze trainer reads and checks ``trainer.v1.snooze``. An
error there costs a cluster start. :func:`check_overrides` takes the same steps here, with nothing
started, and collects what each finds instead of stopping at the first:

1. compose verl's config with the overrides (Hydra's compose API, as ``main_ppo``);
2. the trainer mode: ``trainer.v1.trainer_mode`` names a snooze trainer (snooze options under another mode
   are ignored by verl, silently);
3. the plug-in: verl's processes in this environment import ``snooze.integrations.verl`` by themselves
   (the ``verl.plugins`` entry point, or ``VERL_USE_EXTERNAL_MODULES``);
4. verl's own ``validate_config``;
5. the snooze options: every refused verl setting, every option the async modes refuse, every verl size
   the scheduler reads (``data.train_batch_size``, ``rollout.n``...) that it refuses, and each option's own
   error (of the scheduler's config, its first: a bad ``rollout.n`` hides no bad ``policy``);
6. the resume: the checkpoint ``trainer.resume_mode`` would load holds the scheduler's state;
7. the data, when ``data.train_files`` and the model's tokenizer are on this machine: verl's dataset built
   as verl builds it, and the scheduler built from its rows (every row's ``extra_info.index``, the weights).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snooze import SnoozeError
from snooze.integrations.verl._async_trainer import COLOCATE_MODE, SEPARATE_MODE
from snooze.integrations.verl._options import (
    ASYNC_REFUSED,
    OPTIONS_KEY,
    async_refusals,
    conflicts,
    options_from,
    snooze_options,
)
from snooze.integrations.verl._resume import check_state_folder, resumed_folder
from snooze.integrations.verl._trainer import STATE_DIR, TRAINER_MODE

__all__ = ["Finding", "check_overrides", "SNOOZE_MODES", "PLUGIN"]

SNOOZE_MODES = {TRAINER_MODE: "sync", COLOCATE_MODE: "colocate_async", SEPARATE_MODE: "separate_async"}
"""``trainer.v1.trainer_mode`` of each snooze trainer -> the verl mode it runs."""

PLUGIN = "snooze.integrations.verl"


@dataclass(frozen=True)
class Finding:
    """What one step of the check found."""

    status: str
    """``ok``, ``error`` (verl or the snooze trainer would refuse the run) or ``skipped`` (not checkable here)."""

    step: str
    """The step: ``compose``, ``trainer mode``, ``plug-in``, ``validate_config``, ``options``, ``resume``, ``data``."""

    detail: str
    """What was found, or what is wrong and what to do."""


def _error(step: str, exc: BaseException) -> Finding:
    text = " ".join(str(exc).split()) or type(exc).__name__
    own = isinstance(exc, SnoozeError)
    return Finding("error", step, text if own else f"{type(exc).__name__}: {text}")


def _compose(overrides: Sequence[str], config_name: str, config_dir: str | None) -> Any:
    import verl.trainer.config as verl_config
    from hydra import compose, initialize_config_dir

    directory = Path(config_dir or os.path.dirname(verl_config.__file__)).resolve()
    with initialize_config_dir(config_dir=str(directory), version_base=None):
        return compose(config_name, overrides=list(overrides))


def _mode(config: Any) -> tuple[Finding, str | None]:
    from omegaconf import OmegaConf

    mode = OmegaConf.select(config, "trainer.v1.trainer_mode")
    if not OmegaConf.select(config, "trainer.use_v1", default=True):
        legacy = "trainer.use_v1=False runs verl's legacy trainer, which has no snooze mode: set trainer.use_v1=True"
        return Finding("error", "trainer mode", legacy), None
    if mode in SNOOZE_MODES:
        return Finding("ok", "trainer mode", f"trainer.v1.trainer_mode={mode} (verl's {SNOOZE_MODES[mode]} mode)"), mode
    ignored = f"; verl ignores the {OPTIONS_KEY}.* options given" if snooze_options(config) else ""
    return Finding(
        "error",
        "trainer mode",
        f"trainer.v1.trainer_mode={mode}: verl runs its own trainer, not a snooze one{ignored}. Set "
        f"trainer.v1.trainer_mode={TRAINER_MODE} (or {COLOCATE_MODE}, {SEPARATE_MODE})",
    ), None


def _plugin() -> Finding:
    """Whether ``import verl`` in a process of this environment imports the plug-in (verl/__init__.py's rules)."""
    from importlib.metadata import entry_points

    modules = [m.strip() for m in os.environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",")]
    if PLUGIN in modules:
        return Finding("ok", "plug-in", f"VERL_USE_EXTERNAL_MODULES names {PLUGIN}")
    policy = os.environ.get("VERL_USE_EXTERNAL_PLUGINS", "auto").strip().lower()
    ours = [ep for ep in entry_points(group="verl.plugins") if ep.value == PLUGIN]
    allowed = policy == "auto" or any(ep.name in {p.strip() for p in policy.split(",")} for ep in ours)
    if ours and policy != "none" and allowed:
        return Finding("ok", "plug-in", f"verl loads {PLUGIN} through the verl.plugins entry point '{ours[0].name}'")
    why = (
        "no verl.plugins entry point names it (snooze-rl is not installed in this environment: pip install it)"
        if not ours
        else f"VERL_USE_EXTERNAL_PLUGINS={policy} leaves it out"
    )
    return Finding(
        "error",
        "plug-in",
        f'verl\'s processes here would not load {PLUGIN}: {why}; verl would then stop with "Unknown trainer". '
        f"Or set VERL_USE_EXTERNAL_MODULES={PLUGIN} in every verl process",
    )


def _validate(config: Any) -> Finding:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    return Finding("ok", "validate_config", "verl's validate_config passes (as main_ppo runs it)")


def _options(config: Any, verl_mode: str) -> list[Finding]:
    opts = snooze_options(config)
    found: list[SnoozeError] = [*conflicts(config, verl_mode)]
    if verl_mode != "sync":
        found += async_refusals(opts)
        opts = {k: v for k, v in opts.items() if k not in ASYNC_REFUSED}  # refused above: not read again
    options = options_from(opts, config, verl_mode, found)  # every option's own error, beside the refusals
    if found or options is None:
        return [_error("options", e) for e in found]
    c = options.scheduler
    given = {f.name: getattr(c.options, f.name) for f in dataclasses.fields(c.options)}
    defaults = {f.name: getattr(type(c.options)(), f.name) for f in dataclasses.fields(c.options)}
    changed = ", ".join(f"{k}={v!r}" for k, v in given.items() if v != defaults[k]) or "defaults"
    return [
        Finding(
            "ok",
            "options",
            f"policy={c.policy} ({changed}), batch_size={c.batch_size}, gen_batch_size={c.gen_size}, "
            f"group_size={c.group_size}, max_gen_rounds={c.max_gen_rounds}, seed={options.seed}, "
            f"reward_log={options.reward_log}",
        )
    ]


def _resume(config: Any) -> Finding:
    folder = resumed_folder(config)
    if folder is None:
        return Finding("ok", "resume", "a fresh start (no checkpoint to resume)")
    check_state_folder(folder / STATE_DIR)
    return Finding("ok", "resume", f"resumes {folder}, which holds the scheduler's state")


def _local(value: Any) -> list[Path]:
    paths = [value] if isinstance(value, str) else list(value or [])
    return [Path(str(p)) for p in paths]


def _data(config: Any, mode: str) -> Finding:
    from omegaconf import OmegaConf
    from verl.trainer.ppo.v1 import get_trainer_cls

    files = _local(OmegaConf.select(config, "data.train_files"))
    model = Path(str(OmegaConf.select(config, "actor_rollout_ref.model.path")))
    missing = [str(p) for p in [*files, model] if not p.exists()]
    if missing or not files:
        where = ", ".join(missing) or "data.train_files is empty"
        return Finding("skipped", "data", f"not on this machine ({where}): the prompt ids were not checked")
    OmegaConf.resolve(config)  # as verl's TaskRunnerV1 does before it builds the trainer
    trainer = get_trainer_cls(mode)(config=config)
    trainer._init_tokenizer()
    trainer._init_dataloader()
    sources = trainer.snooze.index.sources
    counts = ", ".join(f"{name}: {len(src)}" for name, src in sources.items())
    return Finding("ok", "data", f"the scheduler holds the training rows' prompts ({counts})")


def _step(step: str, run: Callable[[], Finding | list[Finding]]) -> list[Finding]:
    """One step's findings; any error it raises (the project's, or verl's and Hydra's) is its finding."""
    try:
        found = run()
    except Exception as exc:  # verl asserts and raises what it likes: translated here, at the boundary
        return [_error(step, exc)]
    return found if isinstance(found, list) else [found]


def check_overrides(
    overrides: Sequence[str], config_name: str = "ppo_trainer", config_dir: str | None = None
) -> list[Finding]:
    """What verl and the snooze trainer would refuse in ``main_ppo OVERRIDES...`` (module doc); nothing is started.

    ``config_name``/``config_dir``: Hydra's ``--config-name``/``--config-path`` (default verl's
    ``ppo_trainer`` in ``verl/trainer/config``). An error is a finding, never raised."""
    try:
        config = _compose(overrides, config_name, config_dir)
    except Exception as exc:  # Hydra's and OmegaConf's errors: a bad override, a key that is not verl's
        return [_error("compose", exc)]
    found = [Finding("ok", "compose", f"{config_name} with {len(overrides)} override(s)")]
    mode_found, mode = _mode(config)
    found += [mode_found, *_step("plug-in", _plugin), *_step("validate_config", lambda: _validate(config))]
    if mode is None:  # no snooze trainer: nothing of it to check, and each step left out says so
        why = "not checked: trainer.v1.trainer_mode names no snooze trainer (see the trainer mode line)"
        return [*found, *(Finding("skipped", step, why) for step in ("options", "resume", "data"))]
    found += _step("options", lambda: _options(config, SNOOZE_MODES[mode]))
    found += _step("resume", lambda: _resume(config))
    failed = list(dict.fromkeys(f.step for f in found if f.status == "error"))
    if failed:  # the trainer is built only from a config the steps above pass: say so, never drop the line
        why = f"not checked: the trainer is built only from a config the steps above pass ({', '.join(failed)} failed)"
        return [*found, Finding("skipped", "data", why)]
    return found + _step("data", lambda: _data(config, mode))

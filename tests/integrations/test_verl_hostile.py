"""What the verl integration reads, made hostile: the async modes' ``inflight.json``, the prompt state verl
saves in ``data.pt``, and every numeric option of ``trainer.v1.snooze`` and of the verl keys it reads.

Each is valid JSON (or a valid Hydra value) whose content is wrong: a ticket that is a string, ``null``,
``0.9`` or ``true`` (``int()`` read ``0.9`` as 0 and ``true`` as 1), two uids naming one ticket (one was
kept silently), a step of the wrong type, numbers no float holds (``10**400``: a builtin ``OverflowError``
from the options reader), nesting past the JSON reader's limit. The only error is the project's, naming
the file or the option; a refused resume leaves the run as it was. No Ray here: the run object, the
loader's check and the options reader are called as the trainer calls them.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import snooze

pytest.importorskip("verl", reason="needs the [verl] extra")

from integrations._verl_env import compose  # noqa: E402
from snooze._kit.checks import INT64_MAX, finite_float, is_int  # noqa: E402
from snooze.integrations.verl import _options  # noqa: E402
from snooze.integrations.verl._options import VerlOptions, read_options  # noqa: E402
from snooze.integrations.verl._prompts import LOADER_FORMAT, PromptIndex  # noqa: E402
from snooze.integrations.verl._run import SnoozeRun  # noqa: E402

pytestmark = [pytest.mark.verl, pytest.mark.timeout(300)]
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

KEYS = [("gsm", i) for i in range(6)]
DEEP = "[" * 70 + "1" + "]" * 70  # past the JSON reader's 64 levels
# values of the wrong kind for an integer field (a ticket, a step): each must be refused, none read as a number
NOT_AN_INT: list[Any] = [True, False, None, 0.9, 1.0, 2.5, "1", "u", [], [1], {"t": 1}, -1, 2**63, 10**400, math.nan]


def _run() -> SnoozeRun:
    options = VerlOptions(scheduler=snooze.SchedulerConfig(batch_size=2, group_size=4), reward_log=None)
    return SnoozeRun(PromptIndex(KEYS), options)


def _saved(folder: Path) -> dict[str, Any]:
    """A run that closed step 0 with three candidates in flight (tickets 1, 2, 3), saved as the async trainer
    saves; returns its inflight.json."""
    run = _run()
    run.draw(4)
    cands = [run.next_queued() for _ in range(4)]
    uids = ["u0", "u1", "u2", "u3"]
    run.bind(uids, [c.key for c in cands])
    run.report(uids[:1], [cands[0].key], np.array([[1.0, 0.0, 1.0, 0.0]]))
    run.finish_step(in_flight=True)
    run.save(folder, in_flight=True)
    return json.loads((folder / "inflight.json").read_text())


RECORD = {"step": 1, "uids": {"u1": 1, "u2": 2, "u3": 3}}  # what _saved writes


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("global_step_1") / "snooze"
    assert _saved(folder) == RECORD
    return folder


def test_the_saved_record_is_read_back(folder: Path) -> None:
    run = _run()
    run.restore(folder, 1)
    assert {u: c.ticket for u, c in run.open.items()} == RECORD["uids"]


def _hostile(record: dict[str, Any]) -> st.SearchStrategy[str]:
    """JSON text of ``record`` with one thing wrong in it."""
    uids = st.sampled_from(sorted(record["uids"]))
    tickets = record["uids"]

    def with_ticket(uid: str, value: Any) -> dict[str, Any]:
        return {**record, "uids": {**tickets, uid: value}}

    def without(uid: str) -> dict[str, Any]:
        return {u: t for u, t in tickets.items() if u != uid}

    mutated = st.one_of(
        st.builds(with_ticket, uids, st.sampled_from(NOT_AN_INT)),  # a ticket of the wrong kind
        st.builds(with_ticket, uids, st.sampled_from([0, 4, 99])),  # a ticket not in flight
        st.builds(lambda u: {**record, "uids": {**tickets, "dup": tickets[u]}}, uids),  # one ticket, two uids
        st.builds(lambda u: {**record, "uids": without(u)}, uids),  # a ticket in flight not named
        st.builds(lambda u: {**record, "uids": {**without(u), "": tickets[u]}}, uids),  # an empty uid
        st.builds(lambda v: {**record, "step": v}, st.sampled_from([*NOT_AN_INT, 0, 2])),  # true == 1 was taken
        st.builds(lambda v: {**record, "uids": v}, st.sampled_from([None, [], "u1", 1, [["u1", 1]]])),
        st.builds(lambda k: {k: record[k]}, st.sampled_from(["step", "uids"])),  # a key missing
        st.sampled_from([None, [], "inflight", 1, [record]]),  # not an object
    )
    deep = json.dumps(record).replace('"step": 1', '"step": ' + DEEP)
    return st.one_of(mutated.map(lambda r: json.dumps(r, allow_nan=True)), st.just(deep))


def _refused(folder: Path, text: str) -> None:
    (folder / "inflight.json").write_text(text)
    run = _run()
    try:
        with pytest.raises(snooze.StateError) as err:
            run.restore(folder, 1)
        assert str(folder / "inflight.json") in str(err.value), text
        assert run.scheduler.step_index == 0 and not run.open  # the resume was refused before any change
    finally:
        (folder / "inflight.json").write_text(json.dumps(RECORD))


@pytest.mark.parametrize(
    "text",
    [
        '{"step": 1, "uids": {"u1": "1", "u2": 2, "u3": 3}}',  # a string ticket: was a ValueError
        '{"step": 1, "uids": {"u1": null, "u2": 2, "u3": 3}}',  # null: was a TypeError
        '{"step": 1, "uids": {"u1": 1.0, "u2": 2, "u3": 3}}',  # a float: was int() of it (0.9 read as 0)
        '{"step": 1, "uids": {"u1": true, "u2": 2, "u3": 3}}',  # true: was ticket 1
        '{"step": true, "uids": {"u1": 1, "u2": 2, "u3": 3}}',  # true: was step 1
        '{"step": 1, "uids": {"u1": 1, "u2": 2, "u3": 3, "u4": 3}}',  # one ticket twice: one uid was kept
    ],
)
def test_the_issues_hostile_inflight_json_is_refused(folder: Path, text: str) -> None:
    _refused(folder, text)


@FUZZ
@given(text=_hostile(RECORD))
def test_a_hostile_inflight_json_is_refused_naming_the_file_and_changes_nothing(folder: Path, text: str) -> None:
    _refused(folder, text)


# -- data.pt: what verl's checkpoint holds of the snooze loader ------------------------------------------------
GOOD = {"format": LOADER_FORMAT, "version": 1, "step": 2, "state_dir": "snooze"}


@FUZZ
@given(
    field=st.sampled_from(["version", "step", "state_dir"]),
    value=st.sampled_from([*NOT_AN_INT, 0, 3, "other", ""]),
    drop=st.booleans(),
)
def test_a_hostile_loader_state_in_data_pt_is_refused_naming_the_file(field: str, value: Any, drop: bool) -> None:
    from snooze.integrations.verl._prompts import check_loader_state

    state = {k: v for k, v in GOOD.items() if not (drop and k == field)}
    if not drop:
        state[field] = value
    check_loader_state(GOOD, Path("/ck/global_step_2/data.pt"), 2, "snooze")  # the good one passes
    with pytest.raises(snooze.StateError, match="/ck/global_step_2/data.pt, field"):
        check_loader_state(state, Path("/ck/global_step_2/data.pt"), 2, "snooze")


# -- the options reader ---------------------------------------------------------------------------------------
HOSTILE_NUMBERS: list[Any] = [
    *NOT_AN_INT,
    0,
    3,
    0.5,
    2**64,
    1e30,
    1e308,
    math.inf,
    -math.inf,
]
AT_THE_LIMIT = st.sampled_from([0.0, 0.5]).map(lambda d: _options.MAX_POLL_INTERVAL + d)  # the longest, and past it
OWN = {  # the reader's own options: exactly which values are valid
    "trainer.v1.snooze.poll_interval": lambda v: 0 < (finite_float(v) or 0) <= _options.MAX_POLL_INTERVAL,
    "trainer.v1.snooze.seed": lambda v: v is None or (is_int(v) and v >= 0),
    "data.train_batch_size": lambda v: is_int(v) and 1 <= v <= INT64_MAX,
    "data.gen_batch_size": lambda v: v is None or (is_int(v) and 1 <= v <= INT64_MAX),
    "actor_rollout_ref.rollout.n": lambda v: is_int(v) and 2 <= v <= INT64_MAX,
}
CORE_INTS = ["max_gen_rounds", "max_staleness", "epochs"]  # SchedulerConfig's to bound: an integer, never coerced
CORE_REALS = ["audit", "easy_threshold", "signal_tol"]  # a finite number, never a bool


@pytest.fixture(scope="module")
def verl_config(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return compose(tmp_path_factory.mktemp("cfg"))


def _read(config: Any, key: str, value: Any) -> Any:
    from omegaconf import OmegaConf

    config = OmegaConf.create(OmegaConf.to_container(config))
    OmegaConf.update(config, key, value, force_add=True)
    return read_options(config)


@FUZZ
@given(key=st.sampled_from(sorted(OWN)), value=st.one_of(st.sampled_from(HOSTILE_NUMBERS), AT_THE_LIMIT))
@example(key="trainer.v1.snooze.poll_interval", value=10**400)  # was a builtin OverflowError
def test_the_readers_own_numeric_options_take_only_their_valid_values(verl_config: Any, key: str, value: Any) -> None:
    if OWN[key](value):
        got = _read(verl_config, key, value)
        held = {
            "trainer.v1.snooze.poll_interval": got.poll_interval,
            "trainer.v1.snooze.seed": got.seed,
            "data.train_batch_size": got.scheduler.batch_size,
            "data.gen_batch_size": got.scheduler.gen_batch_size,
            "actor_rollout_ref.rollout.n": got.scheduler.group_size,
        }[key]
        assert held == value or (value is None and held in (0, None)), (key, value, held)  # taken as given
        return
    with pytest.raises(snooze.SnoozeError, match=re.escape(key)) as err:
        _read(verl_config, key, value)
    assert "\n" not in str(err.value)


@FUZZ
@given(name=st.sampled_from(CORE_INTS + CORE_REALS), value=st.sampled_from(HOSTILE_NUMBERS))
def test_scheduler_fields_are_taken_as_given_or_refused_by_name(verl_config: Any, name: str, value: Any) -> None:
    try:
        got = getattr(_read(verl_config, f"trainer.v1.snooze.{name}", value).scheduler, name)
    except snooze.SnoozeError as exc:
        assert name in str(exc)
        return
    if value is None:
        assert got is None and name in ("max_staleness", "epochs")  # their default: unbounded
    elif name in CORE_INTS:
        assert is_int(value) and got == value  # never True as 1, 2.5 as 2
    else:
        assert finite_float(value) is not None and got == float(value)


def test_an_unresolvable_interpolation_is_the_integrations_error(verl_config: Any) -> None:
    with pytest.raises(snooze.IntegrationError, match="trainer.v1.snooze: cannot be read"):
        _read(verl_config, "trainer.v1.snooze.seed", "${nope}")  # was omegaconf's InterpolationKeyError


# -- weights naming some data sources --------------------------------------------------------------------------
def test_weights_that_leave_a_data_source_out_are_refused_naming_it(tmp_path: Path) -> None:
    """The core gives a dataset missing from ``weights`` weight 0; in verl that silently never trained on a
    data_source of the parquet. Refused, naming it; an explicit 0 leaves one out on purpose."""
    from verl.trainer.ppo.v1 import get_trainer_cls

    def built(weights: str) -> Any:
        trainer = get_trainer_cls("snooze")(config=compose(tmp_path, f"+trainer.v1.snooze.weights={weights}"))
        trainer._init_tokenizer()
        trainer._init_dataloader()
        return trainer

    with pytest.raises(snooze.IntegrationError, match=r"not the data_source\(s\) \['math'\]"):
        built("{gsm:2}")
    assert built("{gsm:2,math:0}").snooze.config.weights == {"gsm": 2.0, "math": 0.0}


def test_the_options_reader_keeps_the_cores_defaults() -> None:
    """Unset fields are ``SchedulerConfig``'s defaults: ``from_dict`` gave them a saved config's (``audit=0``
    for a config saved before the audit existed), so a verl run silently had no audit."""
    from omegaconf import OmegaConf

    config = OmegaConf.create({"data": {"train_batch_size": 2}, "actor_rollout_ref": {"rollout": {"n": 4}}})
    got = read_options(config).scheduler
    assert got == snooze.SchedulerConfig(batch_size=2, group_size=4)
    assert got.audit == snooze.SchedulerConfig(batch_size=2, group_size=4).audit > 0


@pytest.mark.parametrize("value", ["x", None, [1], {"a": 1}, 10**400])
def test_a_reward_extra_info_value_that_is_not_a_number_is_the_integrations_error(value: Any) -> None:
    """``reward_metric=acc`` reads the reward function's ``reward_extra_info``: ``float()`` of what is there was a
    builtin ``ValueError``/``TypeError``/``OverflowError``. Numbers, numpy and torch scalars and bools are read."""
    import torch

    from snooze.integrations.verl._buffer import _trajectory_rewards

    good = [{"reward_extra_info": {"acc": v}} for v in (1, True, np.float32(0.5), torch.tensor(0.25))]
    assert _trajectory_rewards({"extra_fields": good}, "acc", 4).tolist() == [1.0, 1.0, 0.5, 0.25]
    with pytest.raises(snooze.IntegrationError, match=r"reward_extra_info\['acc'\] is .*not a number"):
        _trajectory_rewards({"extra_fields": [*good[:1], {"reward_extra_info": {"acc": value}}]}, "acc", 2)

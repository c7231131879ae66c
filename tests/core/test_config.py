import dataclasses

import pytest

import snooze


@pytest.mark.parametrize(
    "field, value",
    [
        ("batch_size", 0),
        ("group_size", 1),
        ("policy", "dapo2"),
        ("easy_threshold", 1.5),
        ("max_gen_rounds", 0),
        ("on_short", "crash"),
        ("mix", "random"),
        ("reward_range", (1.0, 0.0)),
        ("weights", {"a": -1.0}),
        ("epochs", 0),
    ],
)
def test_bad_field_names_field_and_value(field, value):
    with pytest.raises(snooze.ConfigError) as err:
        snooze.SchedulerConfig(**{field: value})
    assert field in str(err.value)


@pytest.mark.parametrize(
    "field, value, why",
    [("factor", -1, "must be an integer >= 0"), ("backoff", 0.5, r"must be a finite number >= 1\.0")],
)
def test_bad_option_names_option_and_value(field, value, why):
    with pytest.raises(snooze.ConfigError, match=f"^{field}={value}: {why}"):
        snooze.SchedulerConfig(policy="snooze", options={field: value})


def test_thresholds_must_be_ordered():
    with pytest.raises(snooze.ConfigError, match="hard_threshold"):
        snooze.SchedulerConfig(easy_threshold=0.2, hard_threshold=0.5)


def test_round_trip_and_unknown_keys():
    cfg = snooze.SchedulerConfig(policy="filter", weights={"a": 2.0, "b": 1.0}, reward_range=(-1, 1))
    assert snooze.SchedulerConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(snooze.ConfigError, match="unknown SchedulerConfig field"):
        snooze.SchedulerConfig.from_dict({"batch": 3})


def test_gen_size_defaults_to_batch_size():
    assert snooze.SchedulerConfig(batch_size=7).gen_size == 7
    assert snooze.SchedulerConfig(batch_size=7, gen_batch_size=20).gen_size == 20


def test_cancel_withdraws_pending_candidates():
    recs = [{"id": i} for i in range(6)]
    sched = snooze.Scheduler({"d": recs}, snooze.SchedulerConfig(batch_size=3, group_size=2), seed=0)
    cands = sched.propose()
    assert sched.cancel(cands[:2]) == 2
    assert len(sched.pending_candidates()) == 1
    with pytest.raises(snooze.ReportError, match="already reported"):
        sched.report(cands[:1], [[0.0, 1.0]])
    sched.report(cands[2:], [[0.0, 1.0]])
    assert sched.finish_step().metrics["gen/cancelled"] == 2


def test_the_constructor_reports_a_misspelt_field_as_from_dict_does():
    with pytest.raises(
        snooze.ConfigError, match=r"unknown SchedulerConfig field\(s\) 'batch_sise'; did you mean 'batch_size'\?"
    ):
        snooze.SchedulerConfig(batch_sise=2)
    with pytest.raises(snooze.ConfigError, match="'bogus'; known fields: \\['advantage'"):  # nothing close: no guess
        snooze.SchedulerConfig(bogus=1)
    n = len(dataclasses.fields(snooze.SchedulerConfig))
    with pytest.raises(snooze.ConfigError, match=f"at most {n} positional arguments, got {n + 1}; pass fields by name"):
        snooze.SchedulerConfig(*[None] * (n + 1))
    with pytest.raises(snooze.ConfigError, match=r"\['batch_size'\] given both by position and by name"):
        snooze.SchedulerConfig(4, batch_size=3)
    assert snooze.SchedulerConfig(4) == snooze.SchedulerConfig(batch_size=4)  # positional fields still work


def test_dapo_is_another_name_for_dynamic_sampling() -> None:
    """The paper's name is accepted as a value of ``policy`` and stored as the policy's registered name."""
    cfg = snooze.SchedulerConfig(policy="dapo")
    assert cfg.policy == "dynamic_sampling" and cfg == snooze.SchedulerConfig(policy="dynamic_sampling")
    assert snooze.SchedulerConfig.from_dict(cfg.to_dict()) == cfg


def test_every_config_hashes_and_equal_configs_hash_equal() -> None:
    """weights (a dict) made the frozen dataclass's own hash raise TypeError: unhashable type: 'dict'."""
    a = snooze.SchedulerConfig(weights={"a": 1.0, "b": 2})
    b = snooze.SchedulerConfig(weights={"b": 2.0, "a": 1})  # the same weights, in another order and type
    assert a == b and hash(a) == hash(b)
    assert len({a, b, snooze.SchedulerConfig(), snooze.SchedulerConfig(weights={"a": 1.0})}) == 3
    snoozing = snooze.SchedulerConfig(policy="snooze", options={"factor": 5}, weights={"a": 1.0})
    assert hash(snoozing) == hash(snooze.SchedulerConfig.from_dict(snoozing.to_dict()))
    assert hash(snoozing) != hash(snoozing.replace(options={"factor": 2}))
    assert a.to_dict()["weights"] == {"a": 1.0, "b": 2.0}  # the public form is unchanged

"""One recommended setting: ``snooze.RECOMMENDED`` (snoozing at factor 1, the surplus carried) is what the
options' defaults, every example and every doc that turns skipping on use, or the place says why not.

Two rules, read from the text of README.md, docs/ (but docs/results.md, which reports every arm measured)
and examples/:

- a snoozing factor written as a setting (``factor=N``, ``"factor": N``, ``options.factor=N``) is 1;
- a passage (a paragraph, or a fenced block) that turns snoozing on (``policy="snooze"``,
  ``"policy": "snooze"``, ``snooze.policy=snooze``) also carries the surplus (``carry_surplus``) or uses
  ``RECOMMENDED``.

A place that must differ is listed in ``EXCEPTIONS`` with its reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import snooze

ROOT = Path(__file__).resolve().parents[1]
FACTOR = re.compile(r"""\bfactor["']?\s*[:=]\s*(\d+)""")
TURNS_ON = re.compile(r"""policy["']?\s*[:=]\s*["']snooze["']|snooze\.policy=snooze""")

EXCEPTIONS = {  # (file, text the passage holds): why it differs
    ("docs/concepts.md", "`factor=0` is DAPO"): "explains what factor 0 means",
    ("docs/concepts.md", "Its experiments use a snoozing factor of 5"): "describes the design note",
    ("docs/concepts.md", "**One spelling.**"): "shows how an option is spelt, not a setting to use",
    ("docs/concepts.md", "Each policy declares its knobs"): "shows how options are passed",
    ("docs/offline-analysis.md", 'options={"factor": 5}), ..., curriculum='): "a run measured at factor 5",
    ("docs/integrations/trl.md", '"max_gen_rounds": 1}'): "the one-round mode: one round, no surplus",
    ("docs/sizing.md", 'Skipping (`policy="snooze"`'): "names the skipping policies, sets nothing",
    ("docs/integrations/trl.md", 'so snoozed (`policy="snooze"`)'): "names a policy, sets nothing",
    ("README.md", "Policies take their knobs as options"): "shows how options are passed",
}


def _files() -> list[Path]:
    docs = [p for p in (ROOT / "docs").rglob("*.md") if p.name != "results.md"]
    examples = [p for p in (ROOT / "examples").rglob("*") if p.is_file()]
    return [ROOT / "README.md", *docs, *examples]


def _passages(text: str) -> list[str]:
    """Fenced blocks whole, and the paragraphs between them."""
    out: list[str] = []
    for i, part in enumerate(re.split(r"(```.*?```)", text, flags=re.S)):
        out += [part] if i % 2 else [p for p in re.split(r"\n\s*\n", part) if p.strip()]
    return out


def _excused(rel: str, passage: str) -> bool:
    return any(f == rel and marker in passage for f, marker in EXCEPTIONS)


def _offences() -> list[str]:
    found = []
    for path in _files():
        rel = path.relative_to(ROOT).as_posix()
        for passage in _passages(path.read_text()):
            if _excused(rel, passage):
                continue
            found += [
                f"{rel}: factor {m.group(1)} in {passage[:80]!r}" for m in FACTOR.finditer(passage) if m[1] != "1"
            ]
            if TURNS_ON.search(passage) and "carry_surplus" not in passage and "RECOMMENDED" not in passage:
                found.append(f"{rel}: snoozing without carry_surplus in {passage[:80]!r}")
    return found


def test_the_recommended_setting_is_the_options_default_and_a_valid_config() -> None:
    assert snooze.SnoozeOptions().factor == snooze.RECOMMENDED["options"]["factor"] == 1
    cfg = snooze.SchedulerConfig(batch_size=4, group_size=4, **snooze.RECOMMENDED)
    assert (cfg.policy, cfg.options, cfg.carry_surplus) == ("snooze", snooze.SnoozeOptions(), True)
    assert cfg.audit == snooze.SchedulerConfig().audit > 0  # the audit stays at its default
    with pytest.raises(TypeError):
        snooze.RECOMMENDED["policy"] = "filter"  # type: ignore[index]  # read-only: one source for every doc


def test_every_doc_and_example_uses_the_recommended_setting_or_says_why_not() -> None:
    assert _offences() == []


def test_the_check_finds_what_it_looks_for() -> None:
    """The rules catch a factor other than 1 and snoozing without the surplus carried, in each spelling."""
    bad = [
        'SchedulerConfig(policy="snooze", options={"factor": 5}, carry_surplus=True)',
        "+trainer.v1.snooze.policy=snooze +trainer.v1.snooze.options.factor=1",
        'snooze_config={"policy": "snooze"}',
    ]
    for text in bad:
        passage = _passages(text)[0]
        assert (
            FACTOR.search(passage)
            and FACTOR.search(passage)[1] != "1"
            or (TURNS_ON.search(passage) and "carry_surplus" not in passage)
        ), text
    assert all(rel in {p.relative_to(ROOT).as_posix() for p in _files()} for rel, _ in EXCEPTIONS)


def test_the_recommended_setting_serialises_as_plain_data_and_stays_read_only() -> None:
    """issue 49 build 6: ``dict(snooze.RECOMMENDED)`` goes into a config file as it is (``json.dumps``,
    ``yaml.safe_dump``, OmegaConf) and through ``copy.deepcopy`` and pickle; its options are a plain dict. Changing
    a copy changes nothing, and the setting itself cannot be written."""
    import copy
    import json
    import pickle

    yaml = pytest.importorskip("yaml")
    omegaconf = pytest.importorskip("omegaconf")
    want = {"policy": "snooze", "options": {"factor": 1}, "carry_surplus": True}
    plain = dict(snooze.RECOMMENDED)
    assert plain == want and type(plain["options"]) is dict
    assert json.loads(json.dumps(plain)) == want
    assert yaml.safe_load(yaml.safe_dump(plain)) == want
    assert omegaconf.OmegaConf.to_container(omegaconf.OmegaConf.create(plain)) == want
    assert copy.deepcopy(plain) == want and pickle.loads(pickle.dumps(plain)) == want
    assert dict(copy.deepcopy(snooze.RECOMMENDED)) == want
    assert dict(pickle.loads(pickle.dumps(snooze.RECOMMENDED))) == want
    assert {**snooze.RECOMMENDED} == want
    plain["options"]["factor"] = 5  # a copy: the setting is unchanged
    snooze.RECOMMENDED["options"]["factor"] = 7
    assert dict(snooze.RECOMMENDED) == want
    with pytest.raises(TypeError):
        snooze.RECOMMENDED["policy"] = "filter"  # type: ignore[index]
    with pytest.raises(AttributeError, match="read-only"):
        snooze.RECOMMENDED._values = {}  # type: ignore[attr-defined]
    cfg = snooze.SchedulerConfig(batch_size=4, **snooze.RECOMMENDED)
    assert (cfg.policy, cfg.options.factor, cfg.carry_surplus) == ("snooze", 1, True)

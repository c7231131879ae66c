"""``research/family_candidates.py``: every candidate is a valid regime built from a family regime, and the G=16
candidates change the group size and nothing the family did not choose them to change."""

from __future__ import annotations

from dataclasses import replace

import pytest
from family_candidates import CANDIDATES

from snooze.experiments.family import FAMILY


@pytest.mark.parametrize("name", sorted(CANDIDATES))
def test_every_candidate_builds_a_profile_from_a_family_regime(name: str) -> None:
    base, changes = CANDIDATES[name]
    profile = replace(FAMILY[base], **changes)
    assert profile != FAMILY[base]
    assert all(getattr(profile, field) == value for field, value in changes.items())


def test_the_g16_candidates_keep_or_double_their_base_regimes_rollouts_a_step() -> None:
    g16 = {name: CANDIDATES[name] for name in CANDIDATES if "-g16" in name}
    assert len(g16) >= 2
    for name, (base, changes) in g16.items():
        old, new = FAMILY[base], replace(FAMILY[base], **changes)
        assert new.group_size == 16 and set(changes) <= {"group_size", "batch_size"}, name
        ratio = (new.batch_size * new.group_size) / (old.batch_size * old.group_size)
        assert ratio == (2 if name.endswith(("-b8", "-b16")) else 1), name

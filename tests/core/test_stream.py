"""`DatasetStream`: a seeded permutation per epoch; state is (epoch, cursor), checked on load."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import snooze
from snooze.core._stream import DatasetStream, dataset_key


def test_each_epoch_is_the_permutation_of_seed_key_epoch() -> None:
    s = DatasetStream("math", 7, seed=3, epochs=None)
    assert s.key == dataset_key("math") == zlib.crc32(b"math")  # a name's key, not its position in the mix
    seen = []
    for _ in range(3):
        seen.append(s.peek(100).tolist())  # at most one epoch at a time
        s.advance(7)
    assert seen == [np.random.default_rng([3, zlib.crc32(b"math"), e]).permutation(7).tolist() for e in range(3)]
    assert (s.epoch, s.cursor) == (3, 0)


def test_peek_stops_at_the_end_of_the_epoch_and_advance_moves_on() -> None:
    s = DatasetStream("d", 5, seed=0, epochs=2)
    first = s.permutation().tolist()
    s.advance(3)
    assert s.peek(10).tolist() == first[3:]  # never crosses into the next epoch
    s.advance(2)
    assert (s.epoch, s.cursor, s.exhausted) == (1, 0, False)
    s.advance(5)
    assert s.exhausted and s.peek(4).shape == (0,)


def test_state_round_trip_and_a_bad_state_changes_nothing() -> None:
    s = DatasetStream("d", 5, seed=1)
    s.advance(5)  # a walk spends at most the rest of an epoch at a time
    s.advance(2)
    assert s.state_dict() == {"epoch": 1, "cursor": 2}
    t = DatasetStream("d", 5, seed=1)
    t.load_state_dict(s.state_dict())
    assert t.peek(5).tolist() == s.peek(5).tolist()
    for bad in ({"epoch": 1, "cursor": 5}, {"epoch": -1, "cursor": 0}, {"epoch": True, "cursor": 0}):
        with pytest.raises(snooze.StateError, match="stream of 'd'"):
            t.load_state_dict(bad)
        assert t.state_dict() == {"epoch": 1, "cursor": 2}

"""A scheduler's state on disk: ``save_state(path, state)`` and ``load_state(path)``, atomic, checksummed and
pickle-free. The file format and its commit protocol are the kit's (:mod:`snooze._kit.checkpoint`), shared with the
reference trainer's step folders; this module is their public face."""

from snooze._kit.checkpoint import CHECKPOINT_FORMAT, CHECKPOINT_VERSION, load_state, save_state

__all__ = ["save_state", "load_state", "CHECKPOINT_FORMAT", "CHECKPOINT_VERSION"]

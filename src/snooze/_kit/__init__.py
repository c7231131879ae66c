"""The internal kit, below every package of snooze (the core included): the pieces they all share.

- :mod:`snooze._kit.errors`: the one exception tree (its public home is :mod:`snooze.core.errors`, and
  ``snooze`` re-exports it);
- :mod:`snooze._kit.checks`: one rule per kind of value a caller hands in (integers in a range, finite
  numbers, probabilities, paths, lists of names...), each worded once;
- :mod:`snooze._kit.files`: reading only regular files, replacing a file atomically;
- :mod:`snooze._kit.json`: the one strict JSON reader;
- :mod:`snooze._kit.checkpoint`: atomic, checksummed, pickle-free state files and their commit record (the
  scheduler's state and the reference trainer's step folders);
- :mod:`snooze._kit.record`: a parsed JSON object's fields, checked as the type they must be;
- :mod:`snooze._kit.state`: the state protocol (``state_dict`` / ``load_state_dict``) and the checks of a
  loaded state's values (an integer or an array in range, or a ``StateError``);
- :mod:`snooze._kit.keys`: the stable key of a JSON value (a prompt without an id), one rule for the TRL adapter and
  ``snooze import trl``;
- :mod:`snooze._kit.lazy`: a sub-package's exports imported on first use (heavy dependencies stay unloaded).

Internal: none of it is public API and it may change without notice, but any package may import it
(``tests/test_layers.py``: a module whose name starts with ``_`` is imported only inside its own
package, or from the kit). The kit imports nothing else from snooze.
"""

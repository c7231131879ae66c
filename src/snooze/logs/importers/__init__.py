"""Other frameworks' rollout dumps as reward logs (``snooze import``; ``docs/offline-analysis.md``, "Importing a run").

- :func:`read_verl`: verl's ``trainer.rollout_data_dir`` (one ``<step>.jsonl`` per step; prompts keyed by text,
  or by a field the reward function dumps).
- :func:`read_prime_rl`: prime-rl's episode files (``rollouts/step_<N>/train/all/traces.jsonl``; prompts keyed
  by ``task.key``).
- :func:`read_trl`: TRL's completion logs (``completions/completions_<step>.parquet``, ``log_completions=True``:
  a sample, one generation batch every ``logging_steps``; prompts keyed by their text).

Each returns the groups, the header of their reward log and an :class:`ImportReport` (what was read and what
was not); :func:`write_reward_log` writes them; :func:`objects` is their strict JSONL reader (each line's
object). Dumps that cannot be replayed (partial, filtered, mixing group
sizes, empty) are each a :class:`~snooze.DataError` saying what to do. Standard library and numpy only
(pyarrow for TRL's Parquet files): the frameworks themselves are not imported.
"""

from snooze.logs.importers._common import ImportOptions, ImportReport, write_reward_log
from snooze.logs.importers._jsonl import objects
from snooze.logs.importers.prime_rl import read_prime_rl
from snooze.logs.importers.trl import read_trl
from snooze.logs.importers.verl import read_verl

FORMATS = {"verl": read_verl, "prime-rl": read_prime_rl, "trl": read_trl}
"""``snooze import``'s formats: name -> reader."""

__all__ = [
    "ImportOptions",
    "ImportReport",
    "read_verl",
    "read_prime_rl",
    "read_trl",
    "write_reward_log",
    "FORMATS",
    "objects",
]

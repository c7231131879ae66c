"""The ``snooze`` command's argument parser: argparse, with two things said where argparse leaves them out.

- A value that starts with ``-`` (``--reward-range -1,1``) reads to argparse as the next option, and its
  error, "expected one argument", does not say why. :class:`Parser` says how to write it: joined to its
  option by ``=`` (``--reward-range=-1,1``), the form argparse takes for every option.
- A help page that mentions "the design note" says what it is at the top (:data:`DESIGN_NOTE`).

>>> p = Parser(prog="demo")
>>> _ = p.add_argument("--reward-range")
>>> p.explained("argument --reward-range: expected one argument", ["--reward-range", "-1,1"]).split(", ")[-1]
'--reward-range=-1,1)'
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["Parser", "DESIGN_NOTE", "explain_design_note"]

DESIGN_NOTE = (
    "The design note: the blog post 'Dynamic data snoozing for efficient online RL' that this project "
    "implements (DAPO's waste, difficulty filtering, data snoozing); summarised in docs/concepts.md, "
    '"The design note".'
)
"""One line that says what "the design note" is, for a help page that mentions it."""

_MISSING = re.compile(r"argument (\S+): expected one argument")


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose "expected one argument" says how to pass a value starting with ``-``
    (subparsers are of this class too: argparse makes them of their parent's class)."""

    _given: list[str]

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        self._given = list(sys.argv[1:] if args is None else args)  # this parser's words (a subparser gets its own)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> Any:  # type: ignore[override]
        super().error(self.explained(message, getattr(self, "_given", [])))

    @staticmethod
    def explained(message: str, given: Sequence[str]) -> str:
        """``message``, and when an option's value was missing because the word after it starts with ``-``,
        how to write it (``--reward-range=-1,1``); any other message as it is."""
        m = _MISSING.fullmatch(message)
        if m is None:
            return message
        names = m.group(1).split("/")  # an option with aliases is named "--a/--b"
        for i, word in enumerate(given[:-1]):
            named = word in names or (word.startswith("--") and any(n.startswith(word) for n in names))
            if named and given[i + 1].startswith("-"):
                return (
                    f"{message} (a value that starts with '-' reads as an option: join it with '=', "
                    f"{word}={given[i + 1]})"
                )
        return message


def explain_design_note(parser: argparse.ArgumentParser) -> None:
    """Put :data:`DESIGN_NOTE` at the top of ``parser``'s help when the help mentions the design note
    (option help comes from config docstrings, which may)."""
    if "design note" in parser.format_help().lower():
        parser.description = f"{parser.description or ''}\n\n{DESIGN_NOTE}".strip()
        parser.formatter_class = _KeepParagraphs


class _KeepParagraphs(argparse.HelpFormatter):
    """Wraps each paragraph of the description on its own (argparse's default joins them into one)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n\n".join(super(_KeepParagraphs, self)._fill_text(p, width, indent) for p in text.split("\n\n"))

"""Command-line options made from config dataclass fields: the field is the one source of its flag,
its type, its default, its choices and its help.

``--max-gen-rounds`` is :attr:`SchedulerConfig.max_gen_rounds`: its type from the annotation, its
default from the field, its choices from :func:`snooze.core.options.field_choices` (a ``Literal``, or
the policy/skip registries), its help from the field's docstring (the first paragraph, markup
removed). Nothing about a field is written in the CLI. A policy's options come from its registered
options class (:func:`add_policy_options`): ``--snooze-factor`` is ``SnoozeOptions.factor``, the flag of
option ``<field>`` of the registered ``<name>`` being ``--<name>-<field>`` (the options of a skip rule
held in ``SnoozeOptions.rule``: ``--history-weight``). A command that overrides another source of
defaults (``snooze compare``'s profile) adds the fields with ``unset="the profile's"``: an option not
given is ``None`` and leaves the profile's value alone.

>>> import argparse
>>> from snooze.core.config import SchedulerConfig
>>> p = argparse.ArgumentParser()
>>> add_options(p, SchedulerConfig, ["max_gen_rounds"])
>>> _ = add_policy_options(p, "snooze", unset="unchanged")  # an option not given is None: left out
>>> args = p.parse_args(["--snooze-factor", "3", "--snooze-skip", "history", "--history-weight", "0.25"])
>>> policy_options(args, "snooze")
{'factor': 3, 'skip': 'history', 'rule': {'weight': 0.25}}
>>> SchedulerConfig(policy="snooze", options=policy_options(args, "snooze")).options.rule.weight
0.25
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import functools
import inspect
import operator
import re
import textwrap
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from snooze._kit.checks import INT64_MAX, INT64_MIN
from snooze.core.errors import ConfigError
from snooze.core.options import POLICIES, Options, field_choices, options_class

__all__ = [
    "add_options",
    "add_policy_options",
    "policy_option_keys",
    "policy_options",
    "checked_policy_options",
    "values",
    "build",
    "override",
    "naming_options",
    "field_help",
    "off_help",
    "flag",
    "integer",
    "comma_list",
]

T = TypeVar("T")


def flag(name: str) -> str:
    """The option of field ``name``: ``max_gen_rounds`` -> ``--max-gen-rounds``."""
    return "--" + name.replace("_", "-")


@functools.cache
def _docstrings(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal right under it in the class body)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    out = {}
    for node, after in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr):
            if isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
                out[node.target.id] = inspect.cleandoc(after.value.value)
    return out


def _plain(text: str) -> str:
    text = re.sub(r":\w+:`~?([\w.]+)`", lambda m: m.group(1).rsplit(".", 1)[-1], text)  # :class:`~snooze.X` -> X
    return " ".join(text.replace("``", "").split())


def field_help(cls: type, name: str) -> str:
    """Field ``name``'s docstring as one line of help: its first paragraph, reST markup made plain."""
    doc = _docstrings(cls).get(name)
    if not doc:
        raise ConfigError(f"{cls.__name__}.{name} has no docstring; every config field needs one (it is its help)")
    return _plain(doc.split("\n\n")[0])


OFF = "``False``:"
"""How the paragraph of a bool field's docstring that says what turning it off does starts."""


def off_help(cls: type, name: str) -> str:
    """The help of ``--no-<name>``, the switch that turns off bool field ``name`` (default ``True``): the
    paragraph of its docstring that starts with ``False``:, which says what the switch does. Required: the
    first paragraph says what the field does when on, and "turn off: <that>" reads as its opposite."""
    doc = _docstrings(cls).get(name) or ""
    off = next((p for p in doc.split("\n\n") if p.startswith(OFF)), None)
    if off is None:
        raise ConfigError(
            f"{cls.__name__}.{name} defaults to True, so its option is --no-{name.replace('_', '-')}: its docstring "
            f"needs a paragraph starting {OFF} that says what turning it off does (that is the switch's help)"
        )
    text = _plain(off[len(OFF) :])
    return text[0].upper() + text[1:]


def _base(tp: Any) -> tuple[Any, bool]:
    """``(type, optional)`` with ``Annotated`` and ``| None`` taken off."""
    optional = False
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp):
            rest = [a for a in typing.get_args(tp) if a is not type(None)]
            tp, optional = (rest[0] if len(rest) == 1 else functools.reduce(operator.or_, rest)), True
        else:
            return tp, optional


def integer(text: str) -> int:
    """An integer option: a whole number that fits in 64 bits (every integer the library holds does), so a
    value beyond it is a usage error when the command line is parsed, not an ``OverflowError`` later."""
    given = text if len(text) <= 40 else text[:40] + "..."
    digits = text.strip().lstrip("+-").replace("_", "")
    try:
        value = int(text)
    except ValueError:  # (more than 4,300 digits is a ValueError too)
        value = None
    if value is None and not digits.isdigit():
        raise argparse.ArgumentTypeError(f"{given!r}: expected an integer")
    if value is None or not INT64_MIN <= value <= INT64_MAX:
        raise argparse.ArgumentTypeError(
            f"{given}: does not fit in 64 bits (|n| < 2**63), as every count and size must"
        )
    return value


def comma_list(text: str, item: Callable[[str], T], example: str) -> list[T]:
    """An option that takes a list, ``"1,2,5"``: each item parsed by ``item`` (which raises
    ``argparse.ArgumentTypeError``). An empty item (``''``, ``1,,2``, ``,1``) or one given twice is refused,
    not dropped: either is a typo whose meaning cannot be guessed. ``example``: a valid value, for the message.

    >>> comma_list("1,2", integer, "1,2")
    [1, 2]
    >>> comma_list("1,,2", integer, "1,2")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: '1,,2': an empty item; separate the items by single commas, e.g. 1,2
    """
    parts = text.split(",")
    if "" in parts:
        what = "empty" if not text else "an empty item"
        raise argparse.ArgumentTypeError(f"{text!r}: {what}; separate the items by single commas, e.g. {example}")
    values = [item(part) for part in parts]
    for i, value in enumerate(values):
        if value in values[:i]:
            first, this = parts[values.index(value)].strip(), parts[i].strip()
            again = "given twice" if this == first else f"{first} again"
            raise argparse.ArgumentTypeError(f"{text!r}: {this} is {again}; give each once")
    return values


def _pair(text: str) -> tuple[float, float]:
    """``"LOW,HIGH"`` -> ``(low, high)``."""
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected LOW,HIGH, e.g. 0,1") from None
    return lo, hi


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def _argument(cls: type, name: str, unset: str | None, key: str | None = None) -> tuple[list[str], dict[str, Any]]:
    """The ``add_argument`` flags and keywords of field ``name`` (``key``: its flag and dest, if not ``name``)."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    key = key or name
    tp, _ = _base(typing.get_type_hints(cls, include_extras=True)[name])
    default = f.default if f.default is not dataclasses.MISSING else None
    kw: dict[str, Any] = {"dest": key, "default": None if unset is not None else default}
    flags = [flag(key)]
    if tp is bool and unset is None:
        flags = [flag(key)] if not default else ["--no-" + key.replace("_", "-")]
        kw["action"] = "store_false" if default else "store_true"
    elif tp is bool:
        kw["action"] = argparse.BooleanOptionalAction
    elif typing.get_origin(tp) is tuple:
        kw.update(type=_pair, metavar="LOW,HIGH")
    else:
        choices = field_choices(cls, name)
        kw["type"] = type(choices[0]) if choices else integer if tp is int else tp
        if choices:
            kw["choices"] = choices
    if unset is not None:
        shown = unset.format(default=_shown(default))
    else:
        shown = (
            "off"
            if tp is bool and not default
            else "on"
            if tp is bool
            else "None"
            if default is None
            else _shown(default)
        )
    text = off_help(cls, name) if tp is bool and unset is None and default else field_help(cls, name)
    if typing.get_origin(tp) is tuple:  # argparse takes "-1,1" for an option: the "=" form passes it
        text += f" A negative LOW needs the = form: {flag(key)}=-1,1."
    kw["help"] = (text + (f" (default: {shown})" if shown else "")).replace("%", "%%")
    return flags, kw


def add_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    names: Iterable[str],
    aliases: Mapping[str, Sequence[str]] | None = None,
    unset: str | None = None,
) -> None:
    """One option per field of dataclass ``cls`` in ``names`` (``aliases``: more flags for a field).

    ``unset``: the options default to ``None`` (not given) and the help says the default is ``unset``
    (e.g. ``"the profile's"``; ``{default}`` in it is the field's default); otherwise they default to
    the fields' defaults. A bool field is a switch
    that flips its default (``--snooze-hard``, ``--no-drop-too-easy``: its help is :func:`off_help`)."""
    for name in names:
        flags, kw = _argument(cls, name, unset)
        parser.add_argument(*flags, *(aliases or {}).get(name, ()), **kw)


def policy_option_keys(policy: str) -> list[tuple[str, type[Options], str, tuple[str, ...]]]:
    """``(key, options class, field, path)`` of every option of the registered ``policy``: its own, keyed
    ``<policy>_<field>``, and those of the plug-ins a field holds (:attr:`Options.nested`: ``SnoozeOptions.rule``
    holds a skip rule's), keyed ``<plug-in>_<field>``; ``path``: where the value goes in the options mapping."""
    cls = options_class(POLICIES, policy)
    out: list[tuple[str, type[Options], str, tuple[str, ...]]] = []
    for f in dataclasses.fields(cls):
        registry = cls.nested.get(f.name)
        if registry is None:
            out.append((f"{policy}_{f.name}", cls, f.name, (f.name,)))
            continue
        for name in registry:
            inner = options_class(registry, name)
            out += [(f"{name}_{g.name}", inner, g.name, (f.name, g.name)) for g in dataclasses.fields(inner)]
    return out


def add_policy_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, policy: str, unset: str | None = None
) -> list[str]:
    """One option per option of the registered ``policy`` (:func:`policy_option_keys`: ``--snooze-factor``,
    ``--history-weight``); :func:`policy_options` reads them back. Returns the keys."""
    keys = []
    for key, cls, field, _ in policy_option_keys(policy):
        flags, kw = _argument(cls, field, unset, key)
        parser.add_argument(*flags, **kw)
        keys.append(key)
    return keys


def policy_options(args: argparse.Namespace, policy: str) -> dict[str, Any]:
    """The options of ``policy`` given on the command line, as the mapping ``SchedulerConfig.options`` takes
    (``{"factor": 3, "rule": {"weight": 0.25}}``); those not given are left out."""
    out: dict[str, Any] = {}
    for key, _, _, path in policy_option_keys(policy):
        value = getattr(args, key, None)
        if value is not None:
            *outer, last = path
            node = out
            for name in outer:
                node = node.setdefault(name, {})
            node[last] = value
    return out


def checked_policy_options(args: argparse.Namespace, policy: str) -> dict[str, Any]:
    """:func:`policy_options`, checked by the policy's options class now; a :class:`ConfigError` names the
    command-line option a bad value came from."""
    given = policy_options(args, policy)
    try:
        options_class(POLICIES, policy).from_dict(given)
    except ConfigError as exc:
        text = str(exc)
        keys = [k for k, _, f, _ in policy_option_keys(policy) if text.startswith(f"{f}=") and k in vars(args)]
        given_keys = [k for k in keys if getattr(args, k) is not None]
        raise ConfigError(f"{text} (option {flag(given_keys[0])})" if given_keys else text) from None
    return given


def values(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The parsed values of those fields, leaving out the ones not given (``None``)."""
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def build(cls: type[T], options: Mapping[str, Any], **fixed: Any) -> T:
    """``cls(**fixed, **options)``; a :class:`ConfigError` names the command-line option it came from."""
    with naming_options(cls, options):
        return cls(**fixed, **options)


def override(base: T, options: Mapping[str, Any]) -> T:
    """``base`` with the given fields replaced (and checked again); errors name the option, as :func:`build`."""
    with naming_options(type(base), options):
        return dataclasses.replace(base, **options)  # type: ignore[type-var]


@contextlib.contextmanager
def naming_options(cls: type, options: Mapping[str, Any]) -> Iterator[None]:
    """Inside, a :class:`ConfigError` about one of ``cls``'s fields in ``options`` names its option (for
    constructors other than ``cls(...)``, e.g. ``StepShape.infer``)."""
    try:
        yield
    except ConfigError as exc:
        raise _naming(exc, cls, options) from None


def _naming(exc: ConfigError, cls: type, options: Mapping[str, Any]) -> ConfigError:
    """``exc`` with the option it came from: its message starts ``<field>=`` or ``<Class>.<field>=``."""
    text = str(exc)
    bad = next((n for n in options if text.startswith((f"{n}=", f"{cls.__name__}.{n}="))), None)
    return ConfigError(f"{text} (option {flag(bad)})" if bad else text)

"""Policy options and the registries: each registered policy (and skip rule) declares its own knobs.

A policy's knobs are a frozen dataclass of its own, subclassing :class:`Options`, named by the
policy's ``Options`` attribute; :class:`~snooze.SchedulerConfig` holds an instance of it as
``options`` and keeps only the fields of batch construction. That is the one spelling of an option::

    SchedulerConfig(policy="snooze", options=SnoozeOptions(factor=5))
    SchedulerConfig(options=PredictiveOptions(margin=1.0))      # policy read from the options' class
    SchedulerConfig(policy="snooze", options={"factor": 5})     # a mapping: the policy's class built from it

An options field may hold the options of another registry's plug-in (``SnoozeOptions.rule`` holds its
skip rule's): the class says so in :attr:`Options.nested`, and the CLI makes flags of those too.

This module imports nothing from :mod:`snooze.core.policies` (the policies import it): the config
reads the registries here, filled when the policies are imported (:mod:`snooze.core` does so).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, dataclass
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

from snooze.core.errors import ConfigError

__all__ = [
    "Choices",
    "field_choices",
    "Options",
    "NoOptions",
    "Registry",
    "POLICIES",
    "SKIP_RULES",
    "options_class",
    "policy_of",
    "check_known",
]


@dataclass(frozen=True)
class Options:
    """Base of every options class: frozen, validated in ``check`` (values replaced by the checked
    ones through :meth:`set_checked`), JSON-safe through :meth:`to_dict` / :meth:`from_dict`."""

    nested: ClassVar[Mapping[str, Registry[Any]]] = {}
    """Field -> the registry whose plug-in's options it holds (``SnoozeOptions.rule``: ``SKIP_RULES``)."""

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Validate (and normalise) the fields; raise :class:`ConfigError` naming the field. Nothing by default."""

    def set_checked(self, name: str, value: Any) -> None:
        """Store the checked form of field ``name`` (a frozen dataclass refuses plain assignment): what
        :meth:`check` calls once it has validated a value, e.g. ``self.set_checked("every", as_int(self.every,
        "every", 1))`` keeps a numpy integer as a Python one. Only inside :meth:`check`: options are frozen."""
        if name not in {f.name for f in dataclasses.fields(self)}:
            raise ConfigError(f"{type(self).__name__}.set_checked({name!r}, ...): not one of its fields")
        object.__setattr__(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form: each field by name (a nested options object as its own dict)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Options:
        """Inverse of :meth:`to_dict`; an unknown key is a :class:`ConfigError` that names it."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{cls.__name__} takes a mapping of option name to value, got {type(data).__name__}")
        check_known(cls, data)
        return cls(**{k: _as_declared(cls, k, v) for k, v in data.items()})

    def replace(self, **changes: Any) -> Options:
        """A copy with some options changed (validated again)."""
        check_known(type(self), changes)
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class NoOptions(Options):
    """The options of a policy that has none (``grpo``, ``dynamic_sampling``, ``filter``, ``counter``)."""


def _plain(value: Any) -> Any:
    if isinstance(value, Options):
        return value.to_dict()
    return list(value) if isinstance(value, tuple) else value


def _as_declared(cls: type, name: str, value: Any) -> Any:
    """A list given for a field declared a tuple (its annotation, or a tuple default) as a tuple: JSON and
    :meth:`Options.to_dict` have lists only, and a config read back must equal the one written."""
    if not isinstance(value, list):
        return value
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    try:
        declared = typing.get_origin(_hints(cls).get(name)) is tuple or _hints(cls).get(name) is tuple
    except Exception:  # noqa: BLE001  (an annotation that does not resolve: the default decides)
        declared = False
    return tuple(value) if declared or isinstance(f.default, tuple) else value


def check_known(cls: type, data: Mapping[Any, Any], hint: str = "") -> None:
    """An unknown key of dataclass ``cls`` is a :class:`ConfigError` naming it, with the nearest field (or
    ``hint``, a sentence ending in "; ", when the caller knows better)."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known, key=repr)
    if unknown:
        near = [m for k in unknown if isinstance(k, str) for m in difflib.get_close_matches(k, known, n=1)]
        hint = hint or (f"did you mean {', '.join(map(repr, near))}? " if near else "")
        raise ConfigError(
            f"unknown {cls.__name__} field(s) {', '.join(map(repr, unknown))}; {hint}known fields: {sorted(known)}"
        )


T = TypeVar("T")

RESERVED: set[str] = set()
"""Names an option's command-line key (``<name>_<field>``) may not take: ``SchedulerConfig``'s fields (filled
by :mod:`snooze.core.config` when it is imported)."""


def _check_options(kind: str, name: str, opts: Any, cls: type) -> None:
    """What registering plug-in ``cls`` under ``name`` would break, as a :class:`ConfigError`: an options class
    that is no frozen ``Options`` dataclass, one with a field without a default (``Options()`` is the policy's
    default), one another plug-in took already, or a field whose key ``<name>_<field>`` is a
    ``SchedulerConfig`` field or another plug-in's option key (``--<name>-<field>`` would name two things)."""
    where = f"{kind} {name!r}"
    if not (isinstance(opts, type) and issubclass(opts, Options) and dataclasses.is_dataclass(opts)):
        raise ConfigError(f"{where}: its Options must be a dataclass subclassing snooze.core.options.Options")
    bare = [f.name for f in dataclasses.fields(opts) if f.default is MISSING and f.default_factory is MISSING]
    if bare:
        raise ConfigError(f"{where}: options {bare} of {opts.__name__} have no default; give each one")
    taken = [
        (r.kind, n)
        for r in (POLICIES, SKIP_RULES)
        for n, c in r.items()
        if c is not cls and getattr(c, "Options", NoOptions) is opts
    ]
    if taken and opts is not NoOptions:
        raise ConfigError(f"{where}: {opts.__name__} is the options class of {taken[0][0]} {taken[0][1]!r} already")
    mine = {f"{name}_{f.name}" for f in dataclasses.fields(opts)}
    others = {
        f"{n}_{f.name}"
        for r in (POLICIES, SKIP_RULES)
        for n, c in r.items()
        if c is not cls
        for f in dataclasses.fields(getattr(c, "Options", NoOptions))
    }
    clash = sorted(mine & (RESERVED | others))
    if clash:
        raise ConfigError(f"{where}: the option key(s) {clash} (flag --<name>-<field>) name something else already")


class Registry(Mapping[str, type[T]], Generic[T]):
    """Name -> class. ``register(name)`` is a class decorator; iterating gives the names in order."""

    def __init__(self, kind: str, aliases: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self.aliases: Mapping[str, str] = dict(aliases or {})
        """Other names a config accepts for a registered one (``"dapo"``: ``"dynamic_sampling"``): never
        registered themselves, as a class under such a name could never be chosen."""
        self._classes: dict[str, type[T]] = {}

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        def add(cls: type[T]) -> type[T]:
            if not isinstance(name, str) or not name.isidentifier():
                raise ConfigError(f"{self.kind} name {name!r}: must be a Python identifier (it is a config value)")
            if name in self.aliases:
                raise ConfigError(
                    f"{self.kind} name {name!r} is another spelling of {self.aliases[name]!r} (a config that names "
                    f"{name!r} means {self.aliases[name]!r}), so a {self.kind} registered under it could never be "
                    "chosen; pick another name"
                )
            if name in self._classes and self._classes[name] is not cls:
                raise ConfigError(
                    f"a {self.kind} named {name!r} is registered already ({self._classes[name].__qualname__})"
                )
            other = [n for n, c in self._classes.items() if c is cls and n != name]
            if other:
                raise ConfigError(
                    f"{cls.__qualname__} is registered as {self.kind} {other[0]!r} already: one class has one name "
                    f"(its name attribute). To offer it under {name!r} too, register a subclass with an options "
                    "class of its own"
                )
            _check_options(self.kind, name, getattr(cls, "Options", NoOptions), cls)
            cls.name = name  # type: ignore[attr-defined]
            self._classes[name] = cls
            return cls

        return add

    def unregister(self, name: str) -> None:
        """Remove a registered class (tests and notebooks that register a class of their own)."""
        del self._classes[name]

    def __getitem__(self, name: str) -> type[T]:
        return self._classes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._classes)

    def __len__(self) -> int:
        return len(self._classes)

    def __repr__(self) -> str:
        return f"Registry({self.kind}: {', '.join(self._classes)})"


POLICIES: Registry[Any] = Registry("policy", aliases={"dapo": "dynamic_sampling"})
"""Every registered policy by name: ``grpo``, ``dynamic_sampling``, ``filter``, ``snooze``, ``predictive``, and any
you add."""

SKIP_RULES: Registry[Any] = Registry("skip rule")
"""Every registered skip rule of ``snooze`` by name: ``counter``, ``history``, and any you add."""


@dataclass(frozen=True)
class Choices:
    """``Annotated`` metadata: a ``str`` field whose allowed values are a registry's names, read when used."""

    names: Callable[[], tuple[str, ...]]


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def field_choices(cls: type, name: str) -> tuple[Any, ...] | None:
    """The values field ``name`` of dataclass ``cls`` may take: its ``Literal`` values, or the names of
    the registry in its ``Choices`` annotation; ``None`` when it is not a choice. The one source of a
    field's choices (config validation and the CLI read it).

    >>> from snooze.core.config import SchedulerConfig
    >>> field_choices(SchedulerConfig, "on_short"), field_choices(SchedulerConfig, "policy")
    (('partial', 'pad', 'raise'), ('grpo', 'dynamic_sampling', 'filter', 'snooze', 'predictive'))
    >>> field_choices(SchedulerConfig, "batch_size") is None
    True
    """
    return _choices_of(_hints(cls)[name])


def _choices_of(tp: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *extras = typing.get_args(tp)
        found = [m.names() for m in extras if isinstance(m, Choices)]
        return found[0] if found else _choices_of(base)
    if origin is Literal:
        return typing.get_args(tp)
    return None


def options_class(registry: Registry[Any], name: str) -> type[Options]:
    """The options class of the policy (or skip rule) ``name``."""
    return getattr(registry[name], "Options", NoOptions)  # type: ignore[no-any-return]


def policy_of(options: Options) -> str:
    """The registered policy whose options class ``options`` is (``policy`` need not be given with them)."""
    names = [n for n in POLICIES if options_class(POLICIES, n) is type(options)]
    if len(names) != 1:
        takers = "policies " + ", ".join(map(repr, names)) + " take" if names else "no registered policy takes"
        raise ConfigError(f"options={options!r}: {takers} {type(options).__name__}; give policy= too")
    return names[0]

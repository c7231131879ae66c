"""Imports point one way, in the order the README's "Layout" section declares; the core is numpy-only.

The order is read from the README (one source of truth): a package may import only packages to
its left; packages written between ``|`` are side by side and do not import each other. Every
``import`` in ``src/snooze`` counts, the ones inside functions too.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "snooze"
ORDER_LINE = "Imports point one way:"
THIRD_PARTY = {
    "_kit": {"numpy"},
    "core": {"numpy", "pyarrow"},
    "logs": {"numpy"},
    "curriculum": {"numpy"},
}  # the only non-stdlib imports (pyarrow: lazily, for Parquet)


def declared_layers() -> list[set[str]]:
    """``[{"_kit"}, {"core"}, {"logs", "curriculum"}, {"snooze"}, ...]`` from the README's line."""
    line = next(x for x in (ROOT / "README.md").read_text().splitlines() if x.startswith(ORDER_LINE))
    return [set(re.findall(r"`(\w+)`", part)) for part in line.removeprefix(ORDER_LINE).split("→")]


def package_of(module: str) -> str:
    """``snooze.core.scheduler`` -> ``core``; the root ``snooze`` (and a name it exports, ``snooze.Scheduler``)
    -> ``snooze``: the public face, which re-exports the core's API and the curriculum."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (SRC / parts[1]).is_dir() else "snooze"


@functools.cache
def imports(src: Path = SRC) -> list[tuple[str, str, int]]:
    """``(importing module, imported name, line)`` for every import in ``src`` (src/snooze, or another tree's
    copy of it; ``from m import x``: ``m.x``)."""
    out = []
    for path in sorted(src.rglob("*.py")):
        module = ".".join(path.relative_to(src.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:  # each name: it may be a module
                out += [(module, f"{node.module}.{alias.name}", node.lineno) for alias in node.names]
            elif isinstance(node, ast.Import):
                out += [(module, alias.name, node.lineno) for alias in node.names]
    return out


def violations(edges: list[tuple[str, str, int]], layers: list[set[str]]) -> list[str]:
    """Each import of a package that is not to the importer's left (or is beside it)."""
    rank = {pkg: i for i, layer in enumerate(layers) for pkg in layer}
    bad = []
    for src, dst, line in edges:
        if not dst.startswith("snooze"):
            continue
        a, b = package_of(src), package_of(dst)
        if a != b and rank[b] >= rank[a]:
            bad.append(
                f"{src}:{line} imports {dst} ({a} may import only {sorted(p for p, r in rank.items() if r < rank[a])})"
            )
    return bad


def test_every_package_has_its_place_in_the_declared_order() -> None:
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()} | {"snooze"}  # the root
    declared = set().union(*declared_layers())
    assert packages == declared, (
        f"in src/snooze but not in the README's order: {sorted(packages - declared)}; "
        f"declared but absent: {sorted(declared - packages)}"
    )


def test_imports_point_one_way() -> None:
    bad = violations(imports(), declared_layers())
    assert not bad, "imports against the declared order:\n" + "\n".join(bad)


def test_the_check_sees_an_arrow_back_and_one_sideways() -> None:
    layers = declared_layers()
    fake = [("snooze.core.scheduler", "snooze.trainer.loop", 1), ("snooze.plots.mix", "snooze.trainer.model", 2)]
    assert len(violations(fake, layers)) == 2
    assert not violations([("snooze.cli.main", "snooze.core.errors", 3)], layers)
    root = [  # the root re-exports the core and the curriculum; the core and the logs never import the root
        ("snooze.logs.dashboard", "snooze.Scheduler", 4),
        ("snooze.core.scheduler", "snooze.curriculum.stages", 5),
        ("snooze.curriculum.stages", "snooze.logs.dashboard", 6),
    ]
    assert len(violations(root, layers)) == 3
    assert not violations(
        [("snooze", "snooze.curriculum.Curriculum", 7), ("snooze.trainer.loop", "snooze.Batch", 8)], layers
    )


@pytest.mark.parametrize("package", sorted(THIRD_PARTY))
def test_the_core_and_the_logs_need_numpy_only(package: str) -> None:
    allowed = THIRD_PARTY[package] | set(sys.stdlib_module_names) | {"snooze"}
    bad = [
        f"{src}:{line} imports {dst}"
        for src, dst, line in imports()
        if package_of(src) == package and dst.split(".")[0] not in allowed
    ]
    assert not bad, "\n".join(bad)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Lines of the imports under ``if TYPE_CHECKING:`` (never run)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            out |= {
                n.lineno for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))
            }
    return out


@functools.cache
def run_time_edges() -> dict[str, set[str]]:
    """Module -> the snooze modules it imports when it runs (inside functions too; not under TYPE_CHECKING).
    ``from snooze.core.policies import base`` names the module ``snooze.core.policies.base``."""
    modules = {
        ".".join(p.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__") for p in SRC.rglob("*.py")
    }
    out: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_lines(tree)
        edges = out.setdefault(module, set())
        for node in ast.walk(tree):
            if node.__dict__.get("lineno") in skip:
                continue
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.level == 0
                and node.module.startswith("snooze")
            ):
                subs = {f"{node.module}.{a.name}" for a in node.names} & modules
                edges |= subs or {node.module}
            elif isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name.startswith("snooze")}
    return out


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles among modules of one package (each strongly connected set of more than one module,
    or a module importing itself), found by Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if package_of(w) != package_of(v):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1 or v in edges.get(v, ()):
                found.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_inside_a_package() -> None:
    """Within a package, modules import one way too: no module imports (at run time) one that imports it back."""
    assert not cycles(run_time_edges()), "import cycles:\n" + "\n".join(
        " <-> ".join(c) for c in cycles(run_time_edges())
    )


KIT = "snooze._kit"


def private_module_problems(edges: list[tuple[str, str, int]], modules: set[str] | None = None) -> list[str]:
    """Each import of a private module (a part of its name starts with ``_``: ``snooze.core._memory``) from
    outside the package that holds it; the kit (``snooze._kit``) is what every package may import. An imported
    name counts as its module: ``from snooze.core._memory import BLOCKED`` is ``snooze.core._memory``, and
    ``from snooze.core.scheduler import _name`` names no private module. ``modules``: every module of the tree
    (by default, those that import something)."""
    modules = modules if modules is not None else {src for src, _, _ in edges}
    bad = []
    for src, dst, line in edges:
        if not dst.startswith("snooze.") or dst == KIT or dst.startswith(KIT + "."):
            continue
        parent = dst.rpartition(".")[0]
        module = parent if dst not in modules and parent in modules else dst
        parts = module.split(".")
        private = next((i for i, part in enumerate(parts) if part.startswith("_") and not part.startswith("__")), None)
        if private is None:
            continue
        owner = ".".join(parts[:private])  # the package holding the private module
        if src != owner and not src.startswith(owner + "."):
            bad.append(f"{src}:{line} imports {module}, private to {owner}")
    return list(dict.fromkeys(bad))  # ``from m import a, b``: once


def modules_in(src: Path = SRC) -> set[str]:
    """Every module of ``src`` (``snooze.core.scheduler``; a package by its own name)."""
    return {
        ".".join(p.relative_to(src.parent).with_suffix("").parts).removesuffix(".__init__") for p in src.rglob("*.py")
    }


def test_a_private_module_is_imported_only_inside_its_package_or_from_the_kit() -> None:
    """``core/_stream.py`` is the scheduler's own part and may change with it; what every package shares lives in
    the kit (``snooze._kit``), the one exception (the README's "Layout"). Tests may reach any private module."""
    bad = private_module_problems(imports(), modules_in())
    assert not bad, "private modules imported from outside their package:\n" + "\n".join(bad)


def test_the_private_module_rule_sees_a_stray() -> None:
    edges = [
        ("snooze.analysis.replay", "snooze.core._memory.BLOCKED", 1),  # another package's private module
        ("snooze.core._memory", "numpy", 1),
        ("snooze.logs.importers.verl", "snooze.logs._jsonl.fail", 2),  # inside its package: fine
        ("snooze.trainer.loop", "snooze._kit.checks.as_int", 3),  # the kit: fine
        ("snooze.cli.main", "snooze.core.scheduler.Scheduler", 4),
        ("snooze.logs._jsonl", "numpy", 1),
        ("snooze.core.scheduler", "numpy", 1),
        ("snooze.experiments.runner", "snooze.trainer._records", 5),  # ``import snooze.trainer._records``
        ("snooze.trainer._records", "numpy", 1),
    ]
    assert private_module_problems(edges) == [
        "snooze.analysis.replay:1 imports snooze.core._memory, private to snooze.core",
        "snooze.experiments.runner:5 imports snooze.trainer._records, private to snooze.trainer",
    ]


def test_the_cycle_check_sees_a_cycle() -> None:
    fake = {
        "snooze.core.config": {"snooze.core.policies"},
        "snooze.core.policies": {"snooze.core.policies.base"},
        "snooze.core.policies.base": {"snooze.core.config"},
        "snooze.core.types": {"snooze.core.config"},
    }
    assert cycles(fake) == [["snooze.core.config", "snooze.core.policies", "snooze.core.policies.base"]]
    assert not cycles(
        {"snooze.core.a": {"snooze.logs.b"}, "snooze.logs.b": {"snooze.core.a"}}
    )  # across packages: the order's test


def test_the_config_imports_nothing_from_the_policies() -> None:
    """The config reads the registry (snooze.core.options), which the policies fill: never the policies themselves."""
    assert not {m for m in run_time_edges()["snooze.core.config"] if m.startswith("snooze.core.policies")}
    assert not {m for m in run_time_edges()["snooze.core.options"] if m.startswith("snooze.core.policies")}


def module_cycles(edges: list[tuple[str, str, int]]) -> list[list[str]]:
    """Every import circle between the modules of src/snooze: the groups of modules that each reach the others
    through imports (or a module importing itself). An imported name that is not a module counts as its module."""
    modules = {src for src, _, _ in edges}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for src, dst, _ in edges:
        while dst and dst not in modules:  # ``from snooze.core.x import name``: the module snooze.core.x
            dst = dst.rpartition(".")[0]
        if dst:
            graph[src].add(dst)

    def reach(start: str) -> set[str]:
        seen, todo = set(), list(graph[start])
        while todo:
            v = todo.pop()
            if v not in seen:
                seen.add(v)
                todo += graph[v]
        return seen

    reached = {m: reach(m) for m in sorted(modules)}
    groups = {frozenset([m, *(w for w in reached[m] if m in reached[w])]) for m in modules if m in reached[m]}
    return sorted(sorted(g) for g in groups)


def test_no_import_circle_between_modules() -> None:
    """Every import counts (inside functions and under ``TYPE_CHECKING`` too): a module that needs another's
    names at type-check time still depends on it, and a circle means two modules that are one."""
    cycles = module_cycles(imports())
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_circle() -> None:
    edges = [("snooze.core.a", "snooze.core.b", 1), ("snooze.core.b", "snooze.core.a.name", 2)]
    assert module_cycles(edges) == [["snooze.core.a", "snooze.core.b"]]
    assert module_cycles([("snooze.core.a", "snooze.core.b", 1), ("snooze.core.b", "numpy", 1)]) == []


def private_imports(source: str) -> list[int]:
    """Lines of ``source`` that import a private snooze module or name (a part starting with ``_``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("snooze"):
            names = [node.module or "", *(a.name for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("snooze")]
        else:
            continue
        if any(part.startswith("_") for name in names for part in name.split(".")):
            out.append(node.lineno)
    return out


def test_examples_use_the_public_api_only() -> None:
    """An example is what a user copies: it imports ``snooze`` and its public sub-packages, never a private
    module (``snooze.core._memory``) or name."""
    bad = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "examples").rglob("*.py"))
        for line in private_imports(path.read_text(encoding="utf-8"))
    ]
    assert not bad, "examples importing private names:\n" + "\n".join(bad)
    assert private_imports("from snooze.core._memory import RETIRED\nimport snooze\n") == [1]
    assert private_imports("from snooze.core.policies import _hidden\nimport numpy._core\n") == [1]

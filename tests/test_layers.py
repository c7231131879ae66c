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
THIRD_PARTY = {"core": {"numpy", "pyarrow"}, "logs": {"numpy"}}  # the only non-stdlib imports (pyarrow: lazily, for Parquet)


def declared_layers() -> list[set[str]]:
    """``[{"core"}, {"logs"}, {"trainer", "integrations", "plots"}, ...]`` from the README's line."""
    line = next(x for x in (ROOT / "README.md").read_text().splitlines() if x.startswith(ORDER_LINE))
    return [set(re.findall(r"`(\w+)`", part)) for part in line.removeprefix(ORDER_LINE).split("→")]


def package_of(module: str) -> str:
    """``snooze.core.scheduler`` -> ``core``; the root ``snooze`` (and ``snooze._lazy``) belong to the core."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (SRC / parts[1]).is_dir() else "core"


@functools.cache
def imports() -> list[tuple[str, str, int]]:
    """``(importing module, imported module, line)`` for every import in src/snooze."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.append((module, node.module, node.lineno))
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
            bad.append(f"{src}:{line} imports {dst} ({a} may import only {sorted(p for p, r in rank.items() if r < rank[a])})")
    return bad


def test_every_package_has_its_place_in_the_declared_order() -> None:
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    declared = set().union(*declared_layers())
    assert packages == declared, f"in src/snooze but not in the README's order: {sorted(packages - declared)}; " \
                                 f"declared but absent: {sorted(declared - packages)}"  # fmt: skip


def test_imports_point_one_way() -> None:
    bad = violations(imports(), declared_layers())
    assert not bad, "imports against the declared order:\n" + "\n".join(bad)


def test_the_check_sees_an_arrow_back_and_one_sideways() -> None:
    layers = declared_layers()
    fake = [("snooze.core.scheduler", "snooze.trainer.loop", 1), ("snooze.plots.mix", "snooze.trainer.model", 2)]
    assert len(violations(fake, layers)) == 2
    assert not violations([("snooze.cli.main", "snooze.core.errors", 3)], layers)


@pytest.mark.parametrize("package", sorted(THIRD_PARTY))
def test_the_core_and_the_logs_need_numpy_only(package: str) -> None:
    allowed = THIRD_PARTY[package] | set(sys.stdlib_module_names) | {"snooze"}
    bad = [f"{src}:{line} imports {dst}" for src, dst, line in imports() if package_of(src) == package and dst.split(".")[0] not in allowed]
    assert not bad, "\n".join(bad)

"""The install lines people copy: the README's, every example's, and the TRL + verl constraint set.

What these tests prove, and what they do not: each ``pip install`` line of the README's "Install" section and
of the examples' headers that installs snooze from the clone resolves in this (CI's) environment with
``pip install --dry-run --no-index``: the extras it names exist (pip only warns of a missing one, so the
warning is an error here) and every requirement they bring is already satisfied here, offline. They do not
install into an empty environment from the package index: CI does that once, at its start
(``scripts/setup.sh``: ``pip install -e '.[all,dev,trl,verl]'`` from the same pyproject.toml). A line
that names a package of another index or a GPU stack (``verl[vllm]``) is not resolved here; none may name
``snooze-rl`` (snooze is installed from a clone, it is on no index). The constraint set's pins are checked
against the extras and against trl's and verl's own requirements as installed here.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, requires
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    from pip._vendor import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "constraints" / "trl-verl.txt"


def _install_args(text: str) -> list[list[str]]:
    """The arguments of every ``pip install`` in ``text`` (command lines, comments and inline code), comments cut."""
    found = []
    for m in re.finditer(r"pip install ([^`\n]+)", text):
        words = shlex.split(m.group(1).split(" #", 1)[0])
        found.append([w for w in words if w not in ("&&",)])
    return found


def _from_clone(args: list[str]) -> bool:
    """Whether the line installs snooze from the clone (``.`` or ``.[extras]``)."""
    return any(re.fullmatch(r"\.(\[[\w,-]+\])?", a) for a in args)


def _dry_run(args: list[str]) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-build-isolation"]
    argv += ["--disable-pip-version-check", *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=600)


def _readme_install_section() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("## Install", 1)[1].split("\n## ", 1)[0]


def test_the_readme_install_lines_resolve_in_cis_environment() -> None:
    lines = _install_args(_readme_install_section())
    assert [a for a in lines if _from_clone(a)], "the README's Install section has no pip install of the clone"
    for args in lines:
        done = _dry_run(args)
        said = done.stdout + done.stderr
        assert done.returncode == 0 and "ERROR" not in said, f"pip install {' '.join(args)}: {said[-1500:]}"
        assert "does not provide the extra" not in said, f"pip install {' '.join(args)}: {said[-800:]}"


def _example_files() -> list[Path]:
    return sorted(p for p in (ROOT / "examples").rglob("*") if p.suffix in (".py", ".sh"))


@pytest.mark.parametrize("example", _example_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_says_how_to_install_from_a_clone_and_that_line_resolves(example: Path) -> None:
    lines = _install_args(example.read_text())
    assert any(_from_clone(a) for a in lines), f"{example.name}: no 'pip install .' line for snooze from a clone"
    assert not [a for a in lines if any("snooze-rl" in w for w in a)], f"{example.name}: snooze-rl is on no index"
    for args in filter(_from_clone, lines):
        done = _dry_run(args)
        assert done.returncode == 0 and "does not provide the extra" not in done.stderr, done.stderr[-1500:]


def test_the_custom_policy_example_runs_from_the_clones_root_as_its_header_says() -> None:
    header = (ROOT / "examples" / "custom_policy.py").read_text().split('"""')[1]
    assert "python examples/custom_policy.py" in header
    done = subprocess.run(
        [sys.executable, "examples/custom_policy.py"], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr[-1500:]
    assert done.stdout.strip() == "{'skipped': 24, 'generated': 16}"  # worked out in tests/core/test_policy_options.py


def _pins() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower()] = version
    return pins


def test_the_trl_verl_constraints_fit_the_extras_and_trl_and_verl() -> None:
    from packaging.requirements import Requirement

    pins = _pins()
    assert {"transformers", "trl", "verl", "transferqueue", "torch"} <= set(pins)
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    checked = 0
    for extra in ("trl", "verl"):
        for text in extras[extra]:
            req = Requirement(text)
            if req.name.lower() in pins:
                assert req.specifier.contains(pins[req.name.lower()]), f"[{extra}] {req} excludes {pins[req.name]}"
                checked += 1
    for package in ("trl", "verl"):  # their own requirements, as installed here (the pinned releases)
        try:
            reqs = [Requirement(r) for r in requires(package) or []]
        except PackageNotFoundError:
            pytest.fail(f"{package} is not installed: CI installs it (scripts/setup.sh)")
        for req in reqs:
            if req.marker is None and req.name.lower() in pins:
                assert req.specifier.contains(pins[req.name.lower()]), f"{package} needs {req}: not {pins[req.name]}"
                checked += 1
    assert checked >= 5  # transformers against [trl], [verl], trl's and verl's own; tensordict against [verl]
    assert "pip install -c constraints/trl-verl.txt '.[trl,verl]'" in (ROOT / "docs/integrations/verl.md").read_text()

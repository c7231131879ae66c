"""The front door's links and commands work: README.md and docs/results.md.

Every relative link must name a file of the repository (and an anchor, a heading of it); every command
in a ``bash`` block must name a script that exists, and its options must parse: ``snooze ...`` and
``python X.py ...`` are run with ``--help`` appended after their own arguments would be checked by
argparse, which is what a reader copying the line would meet first.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "docs" / "results.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
BLOCK = re.compile(r"```bash\n(.*?)```", re.S)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _links(page: Path) -> list[tuple[str, str]]:
    out = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        out.append((path, anchor))
    return out


def _commands(page: Path) -> list[list[str]]:
    out = []
    for block in BLOCK.findall(page.read_text()):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                out.append(shlex.split(line))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    assert _links(page), f"{page.name} has no links: the parser is broken"
    bad = []
    for path, anchor in _links(page):
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            bad.append(f"{path}: no such file")
        elif anchor and target.suffix == ".md":
            headings = {_anchor(h) for h in re.findall(r"^#+ (.*)$", target.read_text(), re.M)}
            if anchor not in headings:
                bad.append(f"{path}#{anchor}: no such heading")
    assert not bad, f"{page.name}: {bad}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_names_what_exists_and_parses(page: Path) -> None:
    commands = _commands(page)
    assert commands, f"{page.name} has no bash block"
    for argv in commands:
        env_free = [a for a in argv if not re.match(r"^[A-Z_]+=", a)]
        tool = env_free[0]
        if tool in ("bash", "git", "cd", "pip", "accelerate", "time"):
            scripts = [a for a in env_free[1:] if a.endswith((".sh", ".py"))]
            for script in scripts:
                assert (ROOT / script).is_file(), f"{page.name}: {' '.join(argv)}: {script} does not exist"
            continue
        if tool.endswith("python"):
            script = env_free[1]
            assert (ROOT / script).is_file(), f"{page.name}: {script} does not exist"
            argv_run = [sys.executable, str(ROOT / script), *env_free[2:], "--help"]
        elif tool == "snooze":
            argv_run = [sys.executable, "-m", "snooze.cli.main", *env_free[1:], "--help"]
        else:
            pytest.fail(f"{page.name}: a command this test does not know how to check: {' '.join(argv)}")
        done = subprocess.run(argv_run, capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert done.returncode == 0, f"{page.name}: {' '.join(argv)} --help failed: {done.stderr[-500:]}"


def test_the_test_command_lints_every_python_folder_before_the_tests() -> None:
    """CI runs the README's test command, which runs ruff over every folder holding Python, then pytest."""
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
    script = (ROOT / "scripts" / "test.sh").read_text()
    linted = re.search(r"^LINTED=\(([^)]*)\)", script, re.M)
    assert linted, "scripts/test.sh: no LINTED=(...) folder list"
    ignored = {line.strip().rstrip("/") for line in (ROOT / ".gitignore").read_text().splitlines()}
    folders = [p for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name not in ignored]
    with_python = {p.name for p in folders if next(p.rglob("*.py"), None) is not None}
    assert with_python - set(linted.group(1).split()) == set(), "scripts/test.sh: folders with Python left unlinted"
    steps = [line.split()[:2] for line in script.splitlines() if line.startswith((".venv/bin/", "exec "))]
    assert steps == [[".venv/bin/ruff", "check"], [".venv/bin/ruff", "format"], ["exec", ".venv/bin/python"]], steps
    assert "--check" in script.split(".venv/bin/ruff format", 1)[1].splitlines()[0], "ruff format must only check"


def test_the_design_note_is_explained_at_its_first_mention_on_every_page() -> None:
    """ "The design note" (the blog post the project implements, not in the repository) is, where a page first
    mentions it, a link to its summary in docs/concepts.md or followed by what it is."""
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
    link = re.compile(r"\[design note\]\((?:\.\./)?(?:concepts\.md)?#the-design-note\)")
    mentioned = []
    for page in pages:
        text = " ".join(page.read_text().split())
        first = text.lower().find("design note")
        if first < 0:
            continue
        mentioned.append(page.name)
        linked = link.match(text, first - 1) is not None
        explained = "the blog post this project implements" in text[first : first + 200]
        assert linked or explained, (
            f"{page.relative_to(ROOT)}: not linked nor explained: {text[first - 80 : first + 80]}"
        )
    assert "concepts.md" in mentioned and len(mentioned) > 3, mentioned  # the check looked at the pages that mention it


def test_the_sizing_tables_are_what_the_script_prints() -> None:
    """docs/sizing.md's two tables are benchmarks/sizing.py's output, row for row (the toy: seconds)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "sizing.py")], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    printed = [line for line in done.stdout.splitlines() if re.match(r"\| \d+% \|", line)]
    page = (ROOT / "docs" / "sizing.md").read_text()
    documented = [line for line in page.splitlines() if re.match(r"\| \d+% \|", line)]
    assert len(printed) == 13 and documented == printed

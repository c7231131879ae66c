"""``snooze --help`` and every subcommand's ``--help`` build their parsers without importing torch (a
fresh interpreter each: torch takes seconds to import, and help should not)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from snooze.cli.main import SUBCOMMANDS


@pytest.mark.parametrize("argv", [[], *([name] for name in SUBCOMMANDS)], ids=["snooze", *SUBCOMMANDS])
def test_help_loads_no_torch(argv: list[str]) -> None:
    code = (
        "import sys\nfrom snooze.cli.main import _build_parser\n"
        f"_build_parser({argv!r}).format_help()\nprint('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"

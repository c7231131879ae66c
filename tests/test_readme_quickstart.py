"""The README's quick start runs as written, prints what the README says it prints, and shows the
recommended setting saving generation against DAPO at the same batches."""

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _block(name: str, lang: str) -> str:
    text = README.read_text()
    block = re.search(rf"<!-- {name}:begin -->\s*```{lang}\n(.*?)```\s*<!-- {name}:end -->", text, re.S)
    assert block, f"README lost its {name} markers"
    return block.group(1)


def test_quickstart_is_short_runs_and_prints_the_readmes_output():
    code = _block("quickstart", "python")
    assert len(code.strip().splitlines()) <= 20
    out = io.StringIO()
    namespace: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README quickstart", "exec"), namespace)
    assert out.getvalue() == _block("quickstart-output", "text")
    dapo, rec = (
        re.search(r"(\d+) groups generated, (\d+) trained on", line).groups() for line in out.getvalue().splitlines()
    )
    assert int(dapo[1]) == int(rec[1]) == 50 * 8  # every step filled with signal groups, under both
    assert int(dapo[0]) > int(rec[0]) > int(rec[1])  # DAPO generated more; both generated zero-signal groups

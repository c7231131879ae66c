"""The README's quick start runs as written and shows snoozing at work."""

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def quickstart_code() -> str:
    text = README.read_text()
    block = re.search(r"<!-- quickstart:begin -->\s*```python\n(.*?)```\s*<!-- quickstart:end -->", text, re.S)
    assert block, "README lost its quick start markers"
    return block.group(1)


def test_quickstart_is_short_and_runs():
    code = quickstart_code()
    assert len(code.strip().splitlines()) <= 15
    out = io.StringIO()
    namespace: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README quickstart", "exec"), namespace)
    metrics = namespace["sched"].metrics()
    assert metrics["total/train_groups"] == 30 * 8  # every step filled with signal groups
    assert metrics["total/gen_groups"] > metrics["total/train_groups"]  # zero-signal groups were generated...
    assert metrics["total/rounds"] > 30  # ...so steps took more than one round, and none more than the limit
    assert metrics["total/rounds"] <= 30 * namespace["config"].max_gen_rounds
    assert "total/gen_groups" in out.getvalue()

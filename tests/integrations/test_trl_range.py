"""The TRL range is written once and agreed on everywhere: the adapter's check, the [trl] extra, the CI job that
tests the oldest release, and the docs. Needs no TRL."""

from __future__ import annotations

import json
import re
from pathlib import Path

from snooze.integrations.trl import _checks as checks

ROOT = Path(__file__).resolve().parents[2]


def test_the_extra_the_oldest_job_and_the_docs_name_the_checked_range() -> None:
    line = re.search(r"^trl = (\[.*?\])", (ROOT / "pyproject.toml").read_text(), re.M)
    assert line, "pyproject.toml: no [trl] extra"
    extra = json.loads(line.group(1))
    assert f"trl>={checks.OLDEST},<={checks.NEWEST}" in extra, extra
    job = (ROOT / "scripts" / "test_trl_oldest.sh").read_text()
    pins = dict(re.findall(r'"(trl|transformers)==([\d.]+)"', job))
    assert pins["trl"] == checks.OLDEST, pins
    low = next(x for x in extra if x.startswith("transformers>="))
    assert low.split(">=")[1].split(",")[0] == pins["transformers"], (low, pins)  # the extra's floor is tested
    assert "tests/integrations/test_trl*.py" in job  # every TRL test file, this one included
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci.index("bash scripts/test.sh") < ci.index("bash scripts/test_trl_oldest.sh")
    page = (ROOT / "docs" / "integrations" / "trl.md").read_text()
    assert f"trl {checks.OLDEST} to {checks.NEWEST}" in page, "docs/integrations/trl.md: the tested range"

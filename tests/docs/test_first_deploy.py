"""docs/first-deploy.md, the checklist a user runs on a first real deploy (issue #37): its
steps are numbered in order, each gives a command and the output to expect, and every
platform.md row that leaves a fact to a live account names a step that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STEP = re.compile(r"^ *(\d+)\. \*\*", re.M)


def _steps() -> dict[int, str]:
    text = (ROOT / "docs/first-deploy.md").read_text()
    marks = list(STEP.finditer(text))
    return {int(m.group(1)): text[m.start():(marks[i + 1].start() if i + 1 < len(marks) else None)]
            for i, m in enumerate(marks)}


def test_deploy_first_deploy_steps_are_numbered_and_each_has_a_command_and_its_expected_output():
    steps = _steps()
    assert list(steps) == list(range(len(steps))) and len(steps) >= 10, list(steps)
    for number, body in steps.items():
        assert "```" in body or re.search(r"`(gcloud|aws|spotbench|pulumi) ", body), (number, body)
        assert "Expected" in body, (number, body)


def test_deploy_platform_rows_left_to_a_live_account_name_a_step_that_exists():
    steps = _steps()
    cited = [int(n) for n in re.findall(r"first-deploy\.md,? step (\d+)",
                                        (ROOT / "docs/platform.md").read_text())]
    assert cited, "platform.md names no first-deploy step"
    assert sorted(set(cited) - set(steps)) == [], "platform.md names steps first-deploy.md lacks"

"""Issue #25's bar for complexity: no function above radon grade C (cyclomatic complexity
≤ 20) and no module over 400 lines in spotbench/, functions/, infra/ and workloads/.

ALLOWED is where a file that cannot meet the bar yet would be named (with its reason); it
is empty.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from radon.complexity import cc_visit
from radon.visitors import Class

ROOT = Path(__file__).resolve().parents[1]
TREES = ("spotbench", "functions", "infra", "workloads")
MAX_COMPLEXITY = 20  # radon grade C ends here; D starts at 21
MAX_LINES = 400

ALLOWED: set[str] = set()  # emptied: the last two (GcpSweep, AwsSweep) are grade C now


def _modules() -> list[Path]:
    return sorted(p for top in TREES for p in (ROOT / top).rglob("*.py")
                  if "__pycache__" not in p.parts)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def too_complex(source: str, limit: int = MAX_COMPLEXITY) -> list[str]:
    """Every function and method (nested ones too) above `limit`, as `name (complexity)`."""
    found: list[str] = []

    def walk(blocks) -> None:
        for block in blocks:
            if isinstance(block, Class):  # its methods are listed on their own
                continue
            if block.complexity > limit:
                found.append(f"{block.fullname} ({block.complexity})")
            walk(block.closures)

    walk(cc_visit(source))
    return found


def too_long(source: str, limit: int = MAX_LINES) -> int | None:
    lines = len(source.splitlines())
    return lines if lines > limit else None


def test_no_function_above_grade_c():
    offenders = {_rel(p): found for p in _modules() if _rel(p) not in ALLOWED
                 if (found := too_complex(p.read_text()))}
    assert not offenders, f"split these into named steps (complexity > {MAX_COMPLEXITY}): {offenders}"


def test_no_module_over_400_lines():
    offenders = {_rel(p): n for p in _modules() if _rel(p) not in ALLOWED
                 if (n := too_long(p.read_text()))}
    assert not offenders, f"split these modules (> {MAX_LINES} lines): {offenders}"


def test_the_allow_list_names_only_files_that_exist():
    assert {p for p in ALLOWED if not (ROOT / p).is_file()} == set()


BRANCHY = "def f(x):\n" + "".join(f"    if x == {i}:\n        return {i}\n" for i in range(21))


@pytest.mark.parametrize("source, found", [
    (BRANCHY, ["f (22)"]),
    ("class K:\n    def m(self, x):\n" + "".join(
        f"        if x == {i}:\n            return {i}\n" for i in range(21)), ["K.m (22)"]),
    ("def outer():\n    " + BRANCHY.replace("\n", "\n    ") + "return f\n", ["f (22)"]),
    ("def f(x):\n" + "".join(f"    if x == {i}:\n        return {i}\n" for i in range(19)), []),
])
def test_the_complexity_check_sees_functions_methods_and_closures(source: str, found: list[str]):
    assert too_complex(source) == found


def test_the_length_check_counts_lines():
    assert too_long("x = 1\n" * 401) == 401
    assert too_long("x = 1\n" * 400) is None

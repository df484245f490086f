"""Numbers for people in reports and tables (issue #27: `2.875e+04`, `+458974.7%`, `127.000`)."""

from __future__ import annotations

import pytest

from spotbench.report.data import fmt
from spotbench.report.numbers import num, p_value, pct, with_unit


@pytest.mark.parametrize("value, shown", [
    (28750.0, "28,750"), (2.875e4, "28,750"), (127.0, "127"), (1.1234, "1.123"), (1076.29, "1,076"),
    (0.00001667, "0.00001667"), (0.0, "0"), (-0.5, "-0.5"), (float("nan"), "—"), (None, "—"),
])
def test_num(value, shown):
    assert num(value) == shown


def test_relative_changes_p_values_and_units():
    assert pct(4589.747) == "×4,591"  # was +458974.7%
    assert pct(0.123) == "+12.3%" and pct(-0.4) == "-40%"
    assert p_value(3e-10) == "p < 0.0001" and p_value(0.0032) == "p = 0.0032"
    assert with_unit(28750.0, "us") == "28.75 ms" and with_unit(24.5, "us") == "24.5 µs"


def test_table_cells_use_them():
    assert fmt(127.0, 3) == "127"  # the container report's exit_code
    assert fmt(3.0, 0) == "3" and fmt(2.5e4) == "25,000"

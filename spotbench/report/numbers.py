"""Numbers for people: significant digits, thousands separators, no exponent, units by name.

    num(28750.0) == "28,750"     num(127.0) == "127"      num(1.1234) == "1.123"
    num(0.00001667) == "0.00001667"                       pct(4589.747) == "×4,591"
    unit_label("us") == "µs"

Machine-readable values go to the report's CSV files; these strings are for reading.
"""

from __future__ import annotations

import math
from typing import Any

MISSING = "—"


def _missing(value: Any) -> bool:
    try:
        return value is None or bool(math.isnan(value))
    except TypeError:
        return False


def num(value: Any, sig: int = 4) -> str:
    """`sig` significant digits (never rounding the integer part), thousands separators,
    trailing zeros dropped, no exponent; `—` for a missing value."""
    if _missing(value):
        return MISSING
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    v = float(value)
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    if v == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(v)))
    decimals = max(0, sig - 1 - magnitude)
    text = f"{v:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def pct(rel: Any) -> str:
    """A relative change: `+12.3%`, `-40%`; from +100% on a factor (`×2.5`, `×4,591`)."""
    if _missing(rel):
        return MISSING
    if rel >= 1:
        return "×" + num(1 + rel, 3)
    return ("+" if rel > 0 else "") + num(100 * rel, 3) + "%"


def p_value(p: Any) -> str:
    """`p < 0.0001`, `p = 0.003`: a test's p-value without an exponent."""
    if _missing(p):
        return MISSING
    return "p < 0.0001" if p < 0.0001 else f"p = {num(p, 2)}"


_UNITS = {"us": "µs", "usec": "µs", "MB/s": "MB/s", "s": "s", "USD": "USD"}


def unit_label(unit: str) -> str:
    return _UNITS.get(unit, unit)


def with_unit(value: Any, unit: str, sig: int = 4) -> str:
    """`24.5 µs`, `1,234 MB/s`; times in µs above 10 ms read as ms (`25.05 ms`)."""
    if _missing(value):
        return MISSING
    shown = unit_label(unit)
    if shown == "µs" and abs(value) >= 10_000:
        return f"{num(value / 1000, sig)} ms"
    return f"{num(value, sig)} {shown}".strip()

"""Suite-wide isolation."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_refreshed_prices(tmp_path_factory, monkeypatch):
    """Price with the shipped tables unless a test refreshes its own: a table the machine's
    user refreshed (`spotbench prices`, ~/.cache/spotbench/prices) never changes a figure."""
    monkeypatch.setenv("SPOTBENCH_PRICES_DIR", str(tmp_path_factory.mktemp("prices") / "none"))

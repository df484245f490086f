"""`SPOTBENCH_RETRY_SCALE`: the retry waits of spotbench's HTTP calls, scaled (tests of
failure paths shorten them; unset means the normal waits)."""

from __future__ import annotations

import pytest
import requests

from spotbench.retries import RETRY_SCALE_ENV, http_retry, retry_scale


def waits_of(attempts: int, max_wait_s: float) -> list[float]:
    """The pauses http_retry takes between attempts of a call that always fails."""
    slept: list[float] = []

    @http_retry(attempts=attempts, max_wait_s=max_wait_s)
    def call() -> None:
        raise requests.ConnectionError("down")

    call.retry.sleep = slept.append  # type: ignore[attr-defined]
    with pytest.raises(requests.ConnectionError):
        call()
    return slept


def test_unset_means_the_normal_waits(monkeypatch):
    monkeypatch.delenv(RETRY_SCALE_ENV, raising=False)
    assert retry_scale() == 1.0
    assert waits_of(5, 1.0) == pytest.approx([0.2, 0.4, 0.8, 1.0])


def test_the_scale_shortens_every_wait_but_not_the_attempts(monkeypatch):
    monkeypatch.setenv(RETRY_SCALE_ENV, "0.1")
    assert waits_of(5, 1.0) == pytest.approx([0.02, 0.04, 0.08, 0.1])


@pytest.mark.parametrize("bad", ["fast", "-1"])
def test_a_bad_scale_is_refused_naming_the_variable(monkeypatch, bad):
    monkeypatch.setenv(RETRY_SCALE_ENV, bad)
    with pytest.raises(ValueError, match=f"{RETRY_SCALE_ENV}='{bad}'"):
        retry_scale()

"""A member's `grant` call on both clouds (issue #29): a 5xx or a reset connection is
retried with the project's policy (`spotbench.retries`, bounded), a 4xx (refused: past the
deadline, another group) is final and says why.

The front here is a `grant` endpoint that fails its first N calls (503, or closes the
connection without an answer) and then answers, or that refuses with a JSON 403 as the
functions do (functions/grant.py, functions/aws_grants.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from spotbench.clouds.aws import member_grant as aws
from spotbench.clouds.gcp import member_grant as gcp
from spotbench.retries import RETRY_SCALE_ENV
from tests.local_http import LocalServer, read_body, reply

EXPIRES = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
ANSWER = {"group": "g--a-t1", "grant": {"expires": EXPIRES},
          "records": {"url": "http://store/b", "fields": {}},
          "credentials": {"AccessKeyId": "ASIAGRANT", "SecretAccessKey": "s",
                          "SessionToken": "t", "Expiration": EXPIRES}}


class Front:
    """Fails the first `failures` calls with `how` ("503", "reset"), then answers `status`."""

    def __init__(self, failures: int, how: str = "503", status: int = 200) -> None:
        self.calls = 0
        self.failures, self.how, self.status = failures, how, status

        def handle(h) -> None:
            read_body(h)
            self.calls += 1
            if self.calls <= self.failures and self.how == "reset":
                h.close_connection = True
                h.connection.close()  # no status line: the client sees the connection drop
                return
            if self.calls <= self.failures:
                return reply(h, 503, {"Content-Type": "text/plain"}, b"Service Unavailable")
            if self.status != 200:
                return reply(h, self.status, {"Content-Type": "application/json"}, json.dumps(
                    {"error": "group g--a-t1's deadline has passed; its launch is over"}).encode())
            reply(h, 200, {"Content-Type": "application/json"}, json.dumps(ANSWER).encode())

        self.server = LocalServer(handle)
        self.url = self.server.url


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch) -> None:
    monkeypatch.setenv(RETRY_SCALE_ENV, "0")  # the same attempts, no pauses
    monkeypatch.setenv("AWS_REGION", "us-east-1")


@pytest.fixture
def front() -> Iterator[list[Front]]:
    made: list[Front] = []
    yield made
    for f in made:
        f.server.close()


def ask(cloud: str, f: Front) -> dict:
    from botocore.credentials import Credentials

    if cloud == "gcp":
        return gcp.fetch_grant(f"{f.url}/s-grant", lambda audience: "idt")
    return aws.fetch_grant(f"{f.url}/", credentials=Credentials("ASIAINSTANCE", "k", "t"))


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
@pytest.mark.parametrize("how", ["503", "reset"])
def test_a_grant_that_fails_a_few_times_is_retried_until_it_answers(cloud, how, front):
    f = Front(failures=3, how=how)
    front.append(f)
    assert ask(cloud, f)["grant"]["expires"] == EXPIRES
    assert f.calls == 4


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
def test_a_grant_that_keeps_failing_is_given_up_after_bounded_attempts(cloud, front):
    f = Front(failures=100)
    front.append(f)
    error = gcp.GrantWriteError if cloud == "gcp" else aws.GrantUnavailable
    with pytest.raises(error, match=r"did not answer after 6 attempts \(503"):
        ask(cloud, f)
    assert f.calls == (gcp.GRANT_ATTEMPTS if cloud == "gcp" else aws.GRANT_ATTEMPTS) == 6


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
def test_a_refused_grant_is_not_retried_and_says_why(cloud, front):
    f = Front(failures=0, status=403)
    front.append(f)
    error = gcp.GrantRefused if cloud == "gcp" else aws.GrantRefused
    with pytest.raises(error, match=r"refused this instance \(403\) .*deadline has passed"):
        ask(cloud, f)
    assert f.calls == 1

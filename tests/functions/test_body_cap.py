"""Request bodies are capped before anything reads them (issue #24 item 9).

functions-framework reads every request's whole body after the function answered
(`read_request`, an after-request hook): a 401 to a 400 MiB body cost 409 MiB of RSS. The
functions' own guard (`functions/http_guard.py`, installed by `functions/main.py` on the app
functions-framework builds, here and on Cloud Functions) refuses a declared length over the
cap with a JSON 413 before the app runs, and lets nobody read more than the cap of a body
without a length. Measured on the real local functions server: the worker's peak RSS
(`VmHWM`) and the answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
import requests

from functions.app import MAX_BODY_BYTES
from spotbench.localrun.http_server import MAX_BODY_BYTES as SERVER_MAX
from tests.security._server import LocalFunctions, json_error, raw_request

pytestmark = [pytest.mark.security, pytest.mark.timeout(120)]

BIG = 96 * 1024 * 1024
BOUND = 24 * 1024 * 1024  # a worker's peak may grow by this much, not by the body


class Zeros:
    """`size` bytes, read in pieces (requests sends it with its Content-Length)."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.size = size

    def __len__(self) -> int:
        return self.size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return b"0" * n


def chunks(size: int, piece: int = 1 << 20):
    for _ in range(size // piece):
        yield b"0" * piece


def peak_rss(server: LocalFunctions) -> int:
    """The largest peak RSS (VmHWM) among the server's processes, in bytes."""
    procs = [psutil.Process(server.server.proc.pid)]
    procs += procs[0].children(recursive=True)
    peaks = []
    for proc in procs:
        status = Path(f"/proc/{proc.pid}/status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
        peaks.append(int(line.split()[1]) * 1024)
    return max(peaks)


@pytest.fixture
def fx(tmp_path):  # one server per test: a peak RSS never goes down
    with LocalFunctions(tmp_path, name="cap") as server:
        yield server


def _json_error(resp: requests.Response) -> str:
    assert resp.headers["Content-Type"].startswith("application/json"), resp.headers
    return json.loads(resp.content)["error"]


@pytest.mark.parametrize("token", ["garbage", None], ids=["bad-token", "no-token"])
def test_a_big_body_with_a_length_is_refused_unread(fx, token) -> None:
    before = peak_rss(fx)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        resp = requests.post(fx.url + "/done", data=Zeros(BIG), headers=headers, timeout=60)
    except requests.ConnectionError:  # the server may close while the client still sends
        resp = None
    grew = peak_rss(fx) - before
    assert grew < BOUND, f"the server's peak RSS grew by {grew >> 20} MiB"
    if resp is not None:
        assert resp.status_code == 413 and _json_error(resp)
    # under the server's own bound, over the functions': the functions' guard answers
    resp = requests.post(fx.url + "/done", data=Zeros(SERVER_MAX // 2), headers=headers, timeout=60)
    assert resp.status_code == 413 and str(MAX_BODY_BYTES) in _json_error(resp)
    ok = requests.post(fx.url + "/stop", json={}, timeout=30,
                       headers={"Authorization": f"Bearer {fx.scheduler}"})
    assert ok.status_code == 200, ok.text


def test_a_big_chunked_body_is_read_no_further_than_the_cap(fx) -> None:
    before = peak_rss(fx)
    resp = requests.post(fx.url + "/done", data=chunks(BIG), timeout=60,
                         headers={"Authorization": "Bearer garbage"})
    grew = peak_rss(fx) - before
    assert grew < BOUND, f"the server's peak RSS grew by {grew >> 20} MiB"
    assert resp.status_code in (401, 413) and _json_error(resp)
    authorized = requests.post(fx.url + "/stop", data=chunks(8 << 20), timeout=60,
                               headers={"Authorization": f"Bearer {fx.scheduler}"})
    assert authorized.status_code == 413 and _json_error(authorized)


def test_the_local_server_refuses_a_declared_length_over_its_own_bound_before_the_app(fx) -> None:
    """The server's bound holds whatever app it serves: the answer is the server's own 413,
    sent before any body byte arrived."""
    status, headers, body = raw_request(fx.port, (
        b"POST /done HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer garbage\r\n"
        b"Content-Length: %d\r\n\r\n" % (SERVER_MAX + 1)))
    assert status == 413 and json_error(status, headers, body) == "request too large"
    assert headers.get("connection") == "close"


# ---- the deployed path: functions-framework's own app, no local server in front ----------
class CountingStream:
    """A request body of `size` bytes that counts how much of it was read."""

    def __init__(self, size: int) -> None:
        self.left, self.read_bytes = size, 0

    def read(self, n: int = -1) -> bytes:
        n = self.left if n is None or n < 0 else min(n, self.left)
        self.left -= n
        self.read_bytes += n
        return b"0" * n

    def readline(self, n: int = -1) -> bytes:
        return self.read(n)

    def close(self) -> None:
        pass


@pytest.fixture
def deployed_app(monkeypatch):
    """`create_app` as Cloud Functions runs it, configured as a GCP function."""
    from functions_framework import create_app

    from spotbench.spec import load_spec

    spec = load_spec({"name": "cap", "cloud": "gcp", "zone": "us-central1-a",
                      "gcp": {"project": "p"}, "workload": {"name": "osu"},
                      "matrix": {"machine_type": ["n2-standard-2"]}})
    for key, value in {"SPOTBENCH_CLOUD": "gcp", "SPOTBENCH_SPEC": spec.model_dump_json(),
                       "SPOTBENCH_AUDIENCE": "https://us-central1-p.cloudfunctions.net/cap-done",
                       "SPOTBENCH_GCP_PROJECT": "p"}.items():
        monkeypatch.setenv(key, value)
    return create_app("done", str(Path(__file__).parents[2] / "functions" / "main.py"), "http")


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_functions_framework_app_reads_no_more_than_the_cap(deployed_app, declared) -> None:
    """Without a token: the function answers 401 (declared length under the cap would too);
    over the cap: 413 unread, or at most the cap + 1 byte of a chunked body."""
    from werkzeug.test import EnvironBuilder, run_wsgi_app

    body = CountingStream(BIG)
    environ = EnvironBuilder(path="/", method="POST").get_environ()
    environ["wsgi.input"] = body
    if declared:
        environ["CONTENT_LENGTH"] = str(BIG)
    else:  # as gunicorn hands over a chunked body: no length, the input ends where it ends
        environ.pop("CONTENT_LENGTH", None)
        environ["wsgi.input_terminated"] = True
    answer, status, headers = run_wsgi_app(deployed_app, environ, buffered=True)
    data = b"".join(answer)
    assert body.read_bytes <= MAX_BODY_BYTES + 1, f"read {body.read_bytes >> 20} MiB"
    assert int(status.split()[0]) == (413 if declared else 401), data[:200]
    assert headers["Content-Type"].startswith("application/json")


def test_functions_framework_apps_own_errors_are_json(deployed_app) -> None:
    resp = deployed_app.test_client().get("/robots.txt")
    assert resp.status_code == 404 and resp.get_json() == {"error": "not found"}

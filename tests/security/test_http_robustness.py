"""Attacks on the HTTP surface of the local functions server (anyone on the machine can
reach 127.0.0.1): malformed headers and bodies, oversize requests, slow-loris clients.
Every answer is JSON with a short reason, never a 5xx, never an echo of a credential; the
same body checks hold in the Lambda adapter."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import requests

from functions import lambda_handler
from spotbench.clouds.aws.identity import member_role_name
from spotbench.localrun import http_server
from spotbench.spec import load_spec
from tests.security._server import LocalFunctions, json_error, raw_request

pytestmark = pytest.mark.security


@pytest.fixture(scope="module")
def fx(tmp_path_factory):
    with LocalFunctions(tmp_path_factory.mktemp("http")) as fx:
        yield fx


def post(fx, path: str, token: str | None, data: bytes | str = b"{}", **headers) -> requests.Response:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return requests.post(fx.url + path, data=data, headers=headers, timeout=30)


def is_json_error(resp: requests.Response) -> str:
    return json_error(resp.status_code, {k.lower(): v for k, v in resp.headers.items()}, resp.content)


@pytest.mark.parametrize("token", ["é" * 10, "scheduler.é", "x.\u00ff\u00fe", "m\u00e9mber.abc"])
def test_non_ascii_bearer_is_401_json(fx, token) -> None:
    resp = post(fx, "/start", token.encode("latin-1").decode("latin-1"))
    assert resp.status_code == 401
    assert is_json_error(resp)


def test_utf8_bytes_in_authorization_is_401_json(fx) -> None:
    status, headers, body = raw_request(fx.port, (
        b"POST /done HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer m\xc3\xa9.\xe2\x82\xac\r\n"
        b"Content-Length: 2\r\n\r\n{}"))
    assert status == 401 and json_error(status, headers, body)


def test_401_never_echoes_the_token(fx) -> None:
    secret_looking = "leakcheck-" + "f" * 64
    for token in (secret_looking, f"{fx.groups[0].members[0].name}.{'0' * 64}{secret_looking}",
                  f"scheduler.{secret_looking}"):
        resp = post(fx, "/start", token)
        assert resp.status_code == 401
        assert "leakcheck" not in resp.text and token not in resp.text


def test_deeply_nested_json_is_400_json(fx) -> None:
    for body in ("[" * 30_000 + "]" * 30_000, '{"a":' * 5000 + "1" + "}" * 5000, "[" * 50_000):
        resp = post(fx, "/stop", fx.scheduler, body)
        assert resp.status_code == 400, resp.text[:300]
        assert "deeper" in is_json_error(resp)
    assert set(fx.states().values()) == {"STOPPED"}


def test_oversize_body_is_413_json(fx) -> None:
    resp = post(fx, "/stop", fx.scheduler, json.dumps({"reason": "x" * 200_000}))
    assert resp.status_code == 413 and is_json_error(resp)
    chunked = requests.post(fx.url + "/stop", data=iter([b'{"reason": "', b"x" * 100_000, b'"}']),
                            headers={"Authorization": f"Bearer {fx.scheduler}"}, timeout=30)
    assert chunked.status_code == 413 and is_json_error(chunked)


@pytest.mark.parametrize(("raw", "status"), [
    (b"GARBAGE\r\n\r\n", 400),
    (b"POST /done HTTP/1.1\r\nHost: x\r\nBad Header Name: 1\r\n\r\n", 400),
    (b"POST /done HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n", 431),
    (b"POST /done HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(60))
     + b"\r\n", 431),
    (b"POST /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
])
def test_the_servers_own_errors_are_json(fx, raw, status) -> None:
    got, headers, body = raw_request(fx.port, raw)
    assert got == status
    error = json_error(got, headers, body)
    assert b"aaaa" not in body and "Bad Header" not in error


def test_a_token_in_a_refused_header_is_not_echoed(fx) -> None:
    got, headers, body = raw_request(fx.port, (
        b"POST /done HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + fx.scheduler.encode()
        + b"\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n"))
    assert got == 431 and fx.scheduler.encode() not in body


def test_slow_loris_does_not_stall_the_server(fx) -> None:
    """More dribbling connections than worker threads; a real caller is still answered
    within one request deadline, and the dribblers get a JSON 408 and are closed."""
    n = http_server.THREADS + 8
    stop = threading.Event()
    closed: list[tuple[float, bytes]] = []
    t0 = time.monotonic()

    def loris() -> None:
        sock = socket.create_connection(("127.0.0.1", fx.port), timeout=30)
        sock.settimeout(0.2)
        head = b"POST /start HTTP/1.1\r\nHost: x\r\nX-Slow: "
        sent, got = 0, b""
        try:
            while not stop.is_set():
                try:
                    sock.sendall(head[sent:sent + 1] if sent < len(head) else b"a")
                    sent += 1
                except OSError:
                    break
                try:
                    chunk = sock.recv(4096)
                    if not chunk:
                        break
                    got += chunk
                except TimeoutError:
                    pass
                except OSError:
                    break
                stop.wait(0.3)
        finally:
            closed.append((time.monotonic() - t0, got))
            sock.close()

    threads = [threading.Thread(target=loris, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # every worker thread is now busy with a dribbler
    began = time.monotonic()
    resp = post(fx, "/start", "not-a-token")
    waited = time.monotonic() - began
    assert resp.status_code == 401
    assert waited < http_server.REQUEST_READ_S + 3, f"a real caller waited {waited:.1f}s"
    deadline = time.monotonic() + http_server.REQUEST_READ_S + 10
    while len(closed) < n and time.monotonic() < deadline:
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(5)
    by_server = [(at, got) for at, got in closed if got]
    assert len(by_server) == n, f"{n - len(by_server)} slow connections were never closed by the server"
    for at, got in by_server:
        assert got.startswith(b"HTTP/1.1 408") and b'"error"' in got
        assert at < http_server.REQUEST_READ_S + 8


def test_lambda_adapter_refuses_deep_and_broken_bodies(monkeypatch) -> None:
    from tests.functions.test_lambda_handler import CONTEXT, instance_iam, url_event

    monkeypatch.setenv("SPOTBENCH_CLOUD", "aws")
    monkeypatch.setenv("SPOTBENCH_ACTION", "done")
    spec = {"name": "lx", "cloud": "aws", "region": "us-east-1", "workload": {"name": "osu"},
            "matrix": {"machine_type": ["c5n.large"]}}
    monkeypatch.setenv("SPOTBENCH_SPEC", json.dumps(spec))
    monkeypatch.setattr(lambda_handler, "_config", None)
    role = member_role_name(load_spec(spec).name, "us-east-1")  # the sweep's member role
    iam = instance_iam("i-0123456789abcdef0", role=role)
    for raw, b64, status in (("[" * 50_000, False, 400), ('{"a":' * 3000 + "1" + "}" * 3000, False, 400),
                             ("x" * 100_000, False, 413), ("@@not base64@@", True, 400),
                             ("\udcff", False, 400)):
        out = lambda_handler.handler(url_event(None, iam=iam, raw=raw, b64=b64), CONTEXT)
        assert out["statusCode"] == status, out
        assert isinstance(json.loads(out["body"])["error"], str)

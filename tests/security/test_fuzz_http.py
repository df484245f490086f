"""Property-based fuzzing of start/stop/done over the real local functions server.

Hypothesis draws requests — methods, paths, `Authorization` headers (none, garbage,
non-ASCII bytes, forged member/scheduler tokens, valid tokens with a flipped character),
extra headers and bodies (JSON values, deep nesting, binary, oversize) — and sends them
to the server `spotbench run` uses. Unauthenticated requests go in concurrent batches;
requests with a valid token go alone. For every request: an answer within 10 s (no hang),
never a 5xx, a JSON error for every 4xx, 401 for a bad token on a real route. Unauthorised
batches must leave the sweep unchanged: which instances are active and every byte of
the results ledger. At least 10,000 requests per run, bounded to 60 s of CPU (this process
and the server's: the work the run does, whatever else the machine runs) and to 240 s of
wall time (a hang); the count, the times and the status histogram are printed.

The bound used to be 60 s of wall time, which failed under load: the run takes ~12 CPU
seconds (half the fuzzer drawing and checking, half the server answering), ~13 s on a quiet
2-core machine, and a minute once other jobs leave it a fifth of the cores.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import unquote

import psutil
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from functions.app import MAX_BODY_BYTES
from spotbench.clouds.base import State
from tests.security._server import LocalFunctions

pytestmark = pytest.mark.security

WANTED_UP = {State.PENDING, State.RUNNING}  # STOPPING → STOPPED is the supervisor's own step
MIN_REQUESTS = 10_000
BUDGET_S = 60.0  # CPU seconds of this process and the server
WALL_S = 240.0  # a bound, not a speed target
HANG_S = 10.0
ROUTES = ("/start", "/stop", "/done")
CONCURRENCY = 3

_CTL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_latin = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"),
                 max_size=40)
_any_text = st.text(max_size=40)
_hex64 = st.text("0123456789abcdef", min_size=64, max_size=64)


def _encoded(text: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    return st.tuples(text, st.sampled_from(["utf-8", "latin-1"])).map(
        lambda t: t[0].encode(t[1], "replace").replace(b"\r", b"").replace(b"\n", b""))


_short = st.text(max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _short,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_short, inner, max_size=3),
    max_leaves=5,
)
DEEP = [("[" * n + "]" * n).encode() for n in (33, 200, 5000)] + [b'{"a":' * 3000 + b"1" + b"}" * 3000]
bodies = st.one_of(
    st.just(b""),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({}, optional={"group": _any_text, "reason": _any_text,
                                        "tick": _any_text, "run": _any_text,
                                        "extra": json_values}).map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
    st.sampled_from(DEEP + [b"x" * 70_000, b"\xff\xfe{", b"{" * 10, b'"\\ud800"']),
)
HEADER_NAMES = ["X-Forwarded-For", "Content-Type", "X-Cloud-Trace-Context", "Transfer-Encoding",
                "Expect", "Cookie", "X-A"]
extra_headers = st.dictionaries(st.sampled_from(HEADER_NAMES), _encoded(_latin), max_size=2)
PATHS = ["/", "/start/", "/done/x", "/stop?x=1", "//done", "/DONE", "/%2e%2e/start", "/start%00",
         "/../done", "/%C3%A9", "/start;x", "/" + "a" * 300, "/done#frag", "/favicon.ico"]


def _fan_out(req: tuple) -> list[tuple]:
    """One drawn unauthenticated request becomes ten (drawing is the fuzzer's costly part):
    as drawn; POSTed to each real route with its Authorization header and without it; PUT
    and GET on a route; POSTed to a path no function serves."""
    _, _, auth, headers, body = req
    route = ROUTES[len(body) % 3]
    return [req,
            *(("POST", r, auth, headers, body) for r in ROUTES),
            *(("POST", r, None, headers, body) for r in ROUTES),
            ("PUT", route, auth, headers, body), ("GET", route, auth, headers, b""),
            ("POST", "/nothing-here", auth, headers, body)]


def _route(path: str) -> bool:
    """Does the router serve this path? Its first segment names the action (`/done/x` too)."""
    segment = unquote(path.split("?")[0].split("#")[0]).strip("/").split("/")[0]
    return f"/{segment}" in ROUTES


class Fuzzer:
    def __init__(self, fx: LocalFunctions, root: Path):
        self.fx, self.results = fx, root / "results"
        self.statuses: Counter[int] = Counter()
        self.count = 0
        self.server = psutil.Process(fx.server.proc.pid)
        self.started, self.cpu_started = time.monotonic(), self._cpu()
        self.local = threading.local()
        self.pool = ThreadPoolExecutor(CONCURRENCY)
        names = [m.name for g in fx.groups for m in g.members]
        self.tokens = {"member": [fx.member(gi, mi) for gi, g in enumerate(fx.groups)
                                  for mi in range(len(g.members))],
                       "scheduler": fx.scheduler}
        valid = [*self.tokens["member"], fx.scheduler]
        flipped = st.tuples(st.sampled_from(valid), st.integers(0, 200), st.sampled_from("0af.-é")).map(
            lambda t: t[0][: t[1] % len(t[0])] + t[2] + t[0][t[1] % len(t[0]) + 1:]).filter(
            lambda tok: tok not in valid)
        forged = st.one_of(
            st.tuples(st.sampled_from(names), _hex64).map(lambda t: f"{t[0]}.{t[1]}"),
            _hex64.map(lambda h: f"scheduler.{h}"),
            flipped,
        )
        self.bad_auth = st.one_of(
            st.none(),
            _encoded(_latin),
            _encoded(_any_text).map(lambda b: b"Bearer " + b),
            forged.map(lambda tok: f"Bearer {tok}".encode("utf-8")),
            st.sampled_from([b"Bearer", b"Bearer ", b"Basic dXNlcjpwYXNz", b"bearer  .", b"Bearer ."]),
        )
        self.groups = [g.id for g in fx.groups]

    # ---- sending -------------------------------------------------------------------------
    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.fx.port, timeout=HANG_S)
        return conn

    def send(self, req: tuple) -> tuple[int, bytes] | str:
        """One request; a kept-alive connection the server has closed meanwhile is retried
        once on a fresh one (as any HTTP client does); a fresh one failing is a failure."""
        reused = getattr(self.local, "conn", None) is not None and self.local.conn.sock is not None
        got = self._send(req)
        if reused and isinstance(got, str) and "connection failed" in got:
            got = self._send(req)
        return got

    def _send(self, req: tuple) -> tuple[int, bytes] | str:
        method, path, auth, headers, body = req
        conn = self._conn()
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            for name, value in headers.items():
                conn.putheader(name, value)
            if auth is not None:
                conn.putheader("Authorization", auth)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            resp = conn.getresponse()
            return resp.status, resp.read()
        except TimeoutError:
            conn.close()
            return f"no answer within {HANG_S:g}s"
        except (http.client.HTTPException, OSError) as exc:
            conn.close()
            return f"connection failed: {type(exc).__name__}: {exc}"

    def check(self, req: tuple, got: tuple[int, bytes] | str, authorised: bool,
              failures: list[str]) -> None:
        self.count += 1
        method, path, auth, _, body = req
        what = f"{method} {path!r} auth={auth!r:.60} body={body[:60]!r}"
        if isinstance(got, str):
            self.statuses["hang/conn"] += 1
            failures.append(f"{what}: {got}")
            return
        status, data = got
        self.statuses[status] += 1
        if status >= 500:
            failures.append(f"{what}: {status} {data[:200]!r}")
        if status >= 400:
            try:
                assert isinstance(json.loads(data)["error"], str)
            except (ValueError, KeyError, TypeError, AssertionError):
                failures.append(f"{what}: {status} answer is not a JSON error: {data[:200]!r}")
        if not authorised:
            routed = _route(path)
            want = {401 if method == "POST" and routed else (405 if routed else 404)}
            if any(_CTL.search(v) for v in [auth or b"", *req[3].values()]) or \
                    {"Transfer-Encoding", "Expect"} & set(req[3]):
                want |= {400, 417}  # refused as HTTP before any function code runs
            if len(body) > MAX_BODY_BYTES:
                want |= {413}  # refused unread, before authentication (functions/http_guard.py)
            if status not in want:
                failures.append(f"{what}: {status}, expected {sorted(want)}")
        for secret in [self.tokens["scheduler"], *self.tokens["member"]]:
            if secret.encode() in data:
                failures.append(f"{what}: the answer contains a valid token")

    def fingerprint(self) -> tuple:
        active = tuple(sorted((i.name, i.state in WANTED_UP) for i in
                              self.fx.cloud.query({"spotbench-sweep": self.fx.spec.name})))
        digest = hashlib.sha256()
        for path in sorted(self.results.rglob("*")) if self.results.exists() else []:
            if path.is_file():
                digest.update(str(path).encode() + path.read_bytes())
        return active, digest.hexdigest()

    def _cpu(self) -> float:
        total = 0.0
        for proc in (psutil.Process(), self.server, *self.server.children(recursive=True)):
            try:
                times = proc.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
        return total

    def cpu_s(self) -> float:
        return self._cpu() - self.cpu_started

    def wall_s(self) -> float:
        return time.monotonic() - self.started

    def over_budget(self) -> bool:
        return self.cpu_s() > BUDGET_S - 3 or self.wall_s() > WALL_S - 10


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    with LocalFunctions(root, name="fz", trials=1) as fx:
        f = Fuzzer(fx, root)
        yield f
        f.pool.shutdown()


def test_fuzz_start_stop_done(fuzzer, capsys) -> None:
    f = fuzzer
    methods = st.sampled_from(["POST"] * 8 + ["GET", "PUT", "DELETE", "PATCH"])
    paths = st.sampled_from(list(ROUTES) * 8 + PATHS)
    bad = st.tuples(methods, paths, f.bad_auth, extra_headers, bodies)
    good_body = st.one_of(bodies, st.fixed_dictionaries(
        {"group": st.sampled_from(f.groups) | _any_text},
        optional={"reason": st.sampled_from(["deadline", "budget"]) | _any_text, "extra": json_values},
    ).map(lambda v: json.dumps(v).encode()))
    member_call = st.tuples(st.just("POST"), st.sampled_from(["/done"] * 4 + ["/start", "/stop"]),
                            st.sampled_from(f.tokens["member"]).map(lambda t: f"Bearer {t}".encode()),
                            extra_headers, good_body)
    scheduler_call = st.tuples(st.just("POST"), st.sampled_from(["/start"] * 3 + ["/stop"]),
                               st.just(f"Bearer {f.tokens['scheduler']}".encode()), extra_headers,
                               good_body)
    batches = st.one_of(
        st.tuples(st.just(False), st.lists(bad, min_size=3, max_size=4)),
        st.tuples(st.just(False), st.lists(bad, min_size=3, max_size=4)),
        st.tuples(st.just(False), st.lists(bad, min_size=3, max_size=4)),
        st.tuples(st.just(False), st.lists(bad, min_size=3, max_size=4)),
        st.tuples(st.just(True), st.lists(member_call | scheduler_call, min_size=1, max_size=1)),
    )

    @settings(max_examples=600, deadline=None, database=None, derandomize=False,
              phases=[Phase.generate, Phase.shrink], report_multiple_bugs=False,
              suppress_health_check=list(HealthCheck))
    @given(batches)
    def run(batch) -> None:
        if f.count >= MIN_REQUESTS + 500 or (f.over_budget() and f.count >= MIN_REQUESTS):
            return
        authorised, drawn = batch
        reqs = drawn if authorised else [r for d in drawn for r in _fan_out(d)]
        failures: list[str] = []
        before = None if authorised else f.fingerprint()
        answers = list(f.pool.map(f.send, reqs)) if len(reqs) > 1 else [f.send(reqs[0])]
        for req, got in zip(reqs, answers):
            f.check(req, got, authorised, failures)
        if before is not None:
            after = f.fingerprint()
            if after != before:
                failures.append(f"unauthorised requests changed the sweep: {before} -> {after}")
        assert not failures, "\n".join(failures[:10])
        assert f.cpu_s() < BUDGET_S and f.wall_s() < WALL_S, (
            f"the fuzz run passed its bound ({f.cpu_s():.0f} s CPU, {f.wall_s():.0f} s) "
            f"after {f.count} requests")

    run()
    elapsed, cpu = f.wall_s(), f.cpu_s()
    histogram = {str(k): v for k, v in sorted(f.statuses.items(), key=lambda kv: str(kv[0]))}
    with capsys.disabled():
        print(f"\nfuzz: {f.count} requests in {elapsed:.1f}s ({cpu:.1f}s CPU), "
              f"statuses {json.dumps(histogram)}")
    assert f.count >= MIN_REQUESTS, f"only {f.count} requests in {elapsed:.1f}s ({cpu:.1f}s CPU)"
    assert cpu < BUDGET_S and elapsed < WALL_S
    assert not any(str(k).startswith("5") for k in f.statuses)

"""Slow clients bounded on the local functions server (issue 38): a request is read whole in
the worker's event loop before a thread takes it, and each local user holds a bounded number
of connections.

gunicorn's gthread worker hands a connection to one of its threads as soon as a byte
arrives; the thread then blocks reading the rest. A client sending its headers a byte at a
time held a thread for the whole read deadline, so a few dozen of them queued every real
call behind them (16 threads per 5 s). Here the event loop buffers, without blocking, the
request line and headers (at most `HEAD_BYTES`) and the body a function reads (at most
`BODY_BYTES`, the functions' own cap + 1; a chunked body and a malformed head go on at
once, under the thread's own read deadline) until the request is complete, and only then
submits it to a thread; a connection incomplete `REQUEST_READ_S` after it was accepted gets
a JSON 408 and is closed, one over `HEAD_BYTES` of headers a JSON 431. A slow client costs a
file descriptor and a buffer, never a thread. One request per connection (the server keeps
none alive: `keepalive` 0), so a client that sends requests and never reads the answers
fills no socket buffer a thread would wait on.

Connections are counted per local user, the uid that owns the client's socket (looked up in
`/proc/net/tcp`, the server binds 127.0.0.1 only, looked up once `PER_USER` connections are
open): over `PER_USER` attributed to it, another is answered JSON 503 and closed at once (so a
user holds at most 2 × `PER_USER`), so one user's flood never takes the slots (gunicorn's
`worker_connections`) the sweep's own calls need.
"""

from __future__ import annotations

import re
import selectors
import socket
import struct
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from gunicorn.workers.gthread import TConn

HEAD_BYTES = 64 * 1024
BODY_BYTES = 64 * 1024 + 1  # functions/http_guard's cap + 1: enough to see a body is over it
PER_USER = 64  # connections one local user may hold open at once
_LENGTH = re.compile(rb"\ncontent-length:[ \t]*(\d{1,12})[ \t]*(?:\r|$)")


def _hex_address(addr: tuple[str, int]) -> str:
    """An IPv4 address as /proc/net/tcp writes it (`0100007F:1F90` for 127.0.0.1:8080)."""
    (packed,) = struct.unpack("=I", socket.inet_aton(addr[0]))
    return f"{packed:08X}:{addr[1]:04X}"


def peer_uid(client: tuple[str, int], server: tuple[str, int],
             table: Path = Path("/proc/net/tcp")) -> int | None:
    """The uid owning the client's end of a loopback connection, or None when not found."""
    want = (_hex_address(client), _hex_address(server))
    try:
        lines = table.read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 7 and (fields[1], fields[2]) == want:
            return int(fields[7])
    return None


def request_state(data: bytes | bytearray) -> bool | None:
    """Whether DATA holds enough of a request for a thread to serve it without waiting: its
    head and the body it declares (a declared body over BODY_BYTES is refused unread, a
    malformed head or a chunked body is left to gunicorn's parser and the thread's own read
    deadline); None when the head is over HEAD_BYTES."""
    end, bare = data.find(b"\r\n\r\n"), data.find(b"\n\n")
    if 0 <= bare and (end < 0 or bare < end):
        return True  # bare line feeds: gunicorn answers it at once
    if end < 0:
        return None if len(data) > HEAD_BYTES else False
    if end > HEAD_BYTES:
        return None
    head = bytes(data[:end]).lower()
    if b"\nexpect:" in head or b"\ntransfer-encoding:" in head:
        return True  # a client waiting for 100 Continue; a chunked body
    match = _LENGTH.search(head)
    if match is None:
        return True  # no body declared, or a malformed length gunicorn refuses at once
    want = int(match.group(1))
    return want >= BODY_BYTES or len(data) - end - 4 >= want


class UserConn(TConn):
    """gunicorn's connection, telling its worker when it closes (whoever closes it)."""

    def __init__(self, *args: Any, peer_uid: int | None, on_close: Callable[[UserConn], None]):
        super().__init__(*args)
        self.peer_uid = peer_uid
        self.buffered = bytearray()
        self.on_close: Callable[[UserConn], None] | None = on_close

    def close(self, graceful: bool = False) -> None:
        """Closed at once: gunicorn's graceful close lingers up to 2 s in a blocking read on
        the event loop's thread for a peer that neither sends nor closes (a complete request,
        then silence, stalled every other connection that long); here the FIN is sent and
        only what already arrived is drained, without waiting."""
        on_close, self.on_close = self.on_close, None
        if on_close is not None:
            on_close(self)
        if graceful:
            _drain_without_waiting(self.sock)
        super().close(False)


def _drain_without_waiting(sock: socket.socket, most: int = 65536) -> None:
    """Half-close, then read what the peer already sent (so the close sends no RST over an
    answer it has not read yet), never blocking."""
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.setblocking(False)
        while most > 0:
            data = socket.socket.recv(sock, 4096)  # the plain read: no request deadline here
            if not data:
                return
            most -= len(data)
    except OSError:  # BlockingIOError: nothing more has arrived
        return


class PrefetchMixin:
    """For a gthread `ThreadWorker`: accept, read each request whole in the event loop,
    then `enqueue_req` it; the thread's `handle` calls `replay(conn)` first."""

    def init_prefetch(self) -> None:
        self.per_user: Counter[int | None] = Counter()
        self.prefetching: dict[Any, float] = {}  # conn → when it must be complete

    def accept(self, listener: socket.socket) -> None:
        try:
            sock, client = listener.accept()
        except (BlockingIOError, ConnectionAbortedError, InterruptedError):
            return
        # looked up only once PER_USER are open (reading /proc/net/tcp per call cost the
        # fuzz run more CPU than its bound); those before are counted under no user
        uid = peer_uid(client, listener.getsockname()) if self.nr_conns >= PER_USER else None
        if uid is not None and self.per_user[uid] >= PER_USER:
            self.log.info("refused a connection: uid %s holds %d", uid, self.per_user[uid])
            self.refuse(sock, 503, "Service Unavailable")
            sock.close()
            return
        self.per_user[uid] += 1
        self.nr_conns += 1
        conn = UserConn(self.cfg, sock, client, listener.getsockname(),  # non-blocking
                        peer_uid=uid, on_close=self.closed)
        self.prefetching[conn] = time.monotonic() + self.read_s
        self.poller.register(sock, selectors.EVENT_READ, partial(self.on_prefetch_readable, conn))

    def on_prefetch_readable(self, conn: Any, _sock: socket.socket) -> None:
        try:
            chunk = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            return self.drop(conn)
        conn.buffered += chunk
        state = request_state(conn.buffered)
        if state is None:
            return self.drop(conn, 431, "Request Header Fields Too Large")
        if state:
            self.poller.unregister(conn.sock)
            del self.prefetching[conn]
            conn.data_ready = True
            self.enqueue_req(conn)
        return None

    def murder_pending(self) -> None:
        super().murder_pending()  # type: ignore[misc]
        now = time.monotonic()
        for conn in [c for c, by in self.prefetching.items() if by <= now]:
            self.drop(conn, 408, "Request Timeout")

    def drop(self, conn: Any, status: int | None = None, reason: str = "") -> None:
        """Close a connection still being read (answered STATUS first when given)."""
        self.prefetching.pop(conn, None)
        try:
            self.poller.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass
        if status is not None:
            self.refuse(conn.sock, status, reason)
        self.nr_conns -= 1  # gunicorn counts the ones it closes itself
        conn.close()

    def closed(self, conn: UserConn) -> None:
        """A connection closed (by gunicorn or here): one fewer for its user."""
        self.per_user[conn.peer_uid] -= 1
        if self.per_user[conn.peer_uid] <= 0:
            del self.per_user[conn.peer_uid]

    @staticmethod
    def replay(conn: Any) -> None:
        """In the thread: hand what the event loop read to gunicorn's parser."""
        buffered = getattr(conn, "buffered", None)
        if buffered:
            conn.sock.setblocking(True)
            conn.init()
            conn.parser.unreader.unread(bytes(buffered))
            conn.buffered = bytearray()

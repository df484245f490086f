"""Loopback ports for local instances and servers.

Ports are taken below the kernel's ephemeral range (`ip_local_port_range`) when there is
room: a port handed to a member at deploy time is bound only when the member starts (and
again at each retry), and a port in the ephemeral range can meanwhile be taken by any
outgoing connection on the machine (MPI's own, another sweep's), so the member could not
serve on it.
"""

from __future__ import annotations

import random
import socket
import time
from contextlib import ExitStack
from pathlib import Path

PORT_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 20000  # below: ports services commonly use


def _outside_ephemeral() -> range | None:
    """Ports the kernel never hands out on its own (None: no room, or not Linux)."""
    try:
        low = int(PORT_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return range(LOWEST, low) if low - LOWEST >= 1000 else None


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct ports free right now (all held open together, then released)."""
    candidates = _outside_ephemeral()
    with ExitStack() as stack:
        ports: list[int] = []
        tries = 0
        while len(ports) < n:
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            tries += 1
            port = random.choice(candidates) if candidates is not None and tries < 50 * n else 0
            try:
                sock.bind((host, port))
            except OSError:
                continue  # taken: try another
            ports.append(sock.getsockname()[1])
        return ports


def listening_socket(port: int | None = None, host: str = "127.0.0.1", wait_s: float = 5.0) -> socket.socket:
    """A TCP socket bound and listening on `host`:`port` (None: a free port, below the
    ephemeral range when there is room), so its port is never free between the moment it
    is chosen and the moment a server uses it: the server inherits this very socket.
    A given `port` still held (a leftover server shutting down) is retried for `wait_s`;
    OSError naming the port if it stays taken."""
    candidates = _outside_ephemeral()
    deadline = time.monotonic() + wait_s
    tries = 0
    while True:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAIT, never a listener
        tries += 1
        want = port if port is not None else (
            random.choice(candidates) if candidates is not None and tries < 50 else 0)
        try:
            sock.bind((host, want))
            sock.listen(128)
            return sock
        except OSError as exc:
            sock.close()
            if port is None:
                continue  # taken: try another
            if time.monotonic() >= deadline:
                raise OSError(exc.errno, f"port {port} on {host} is taken by another process: {exc.strerror}") from None
            time.sleep(0.1)

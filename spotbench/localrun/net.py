"""Loopback ports for local instances and servers."""

from __future__ import annotations

import socket
from contextlib import ExitStack


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct ports free right now (all held open together, then released)."""
    with ExitStack() as stack:
        ports = []
        for _ in range(n):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(sock.getsockname()[1])
        return ports

"""`python -m tests.fidelity.ports OUT` inside a member's network namespace: every 0.1 s,
record each TCP port in LISTEN and each bound UDP port (psutil) with the program that owns
it, one JSON line per new (protocol, address, port) in OUT, until killed."""

from __future__ import annotations

import json
import socket
import sys
import time

import psutil


def sample(seen: set, out) -> None:
    for c in psutil.net_connections(kind="inet"):
        if not c.laddr:
            continue
        tcp = c.type == socket.SOCK_STREAM
        if tcp and c.status != psutil.CONN_LISTEN:
            continue
        if not tcp and c.raddr:
            continue
        key = ("tcp" if tcp else "udp", c.laddr.ip, c.laddr.port)
        if key in seen:
            continue
        seen.add(key)
        try:
            name = " ".join(psutil.Process(c.pid).cmdline()[:3]) if c.pid else "?"
        except psutil.Error:
            name = "?"
        out.write(json.dumps({"protocol": key[0], "ip": key[1], "port": key[2],
                              "program": name}) + "\n")
        out.flush()


def main(path: str) -> None:
    seen: set = set()
    with open(path, "a") as out:
        while True:
            sample(seen, out)
            time.sleep(0.1)


if __name__ == "__main__":
    main(sys.argv[1])

"""`mpiexec`'s launcher on the local cloud: `python -m workloads.osu.bridge HOST CMD…`.

Hydra calls its launcher like `rsh`: the host, then the proxy command. HOST is a group
member name; its (host, port) comes from SPOTBENCH_CONTEXT (inherited from the launcher
member). The bridge waits for the peer's exec agent (like waiting for sshd on a booting VM),
authenticates, streams the command's stdout/stderr to its own and exits with its code.
A connection lost before the exit code → exit 255 with a message naming the peer, which
the launcher reads as "the peer is gone" (ssh exits 255 likewise).
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import time

from workloads.osu.agent import _FRAME, EXIT, STDERR, STDOUT, mac, read_key

LOST = "spotbench-bridge: lost the connection to peer"


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def connect(host: str, port: int, wait: float) -> socket.socket:
    deadline = time.monotonic() + wait
    while True:
        try:
            return socket.create_connection((host, port), timeout=10)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def run(member: str, host: str, port: int, cmd: list[str], wait: float = 60.0) -> int:
    try:
        sock = connect(host, port, wait)
    except OSError as exc:
        print(f"{LOST} {member} ({host}:{port}): cannot connect: {exc}", file=sys.stderr)
        return 255
    with sock:
        sock.settimeout(None)
        try:
            hello = json.loads(sock.makefile("rb").readline())
            key = read_key(member)
            req = {"cmd": cmd, "mac": mac(key, hello["nonce"], cmd)}
            sock.sendall(json.dumps(req).encode() + b"\n")
            out, err = sys.stdout.buffer, sys.stderr.buffer
            while True:
                channel, length = _FRAME.unpack(_recv_exact(sock, _FRAME.size))
                data = _recv_exact(sock, length)
                if channel == EXIT:
                    return int(data)
                stream = out if channel == STDOUT else err if channel == STDERR else None
                if stream is not None:
                    stream.write(data)
                    stream.flush()
        except (OSError, ConnectionError, ValueError, KeyError) as exc:
            print(f"{LOST} {member} ({host}:{port}): {exc}", file=sys.stderr)
            return 255


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m workloads.osu.bridge HOST CMD…", file=sys.stderr)
        return 2
    from spotbench.member import MemberContext

    ctx = MemberContext.from_env()
    target = argv[0]
    peer = next((p for p in ctx.members if p.name == target), None)
    if peer is None:
        names = ", ".join(p.name for p in ctx.members)
        print(f"spotbench-bridge: {target!r} is not a member of this group ({names})", file=sys.stderr)
        return 255
    # like rsh/ssh: the words are joined into one command line and split as a shell would
    # (hydra quotes the proxy path), but no shell runs it
    cmd = shlex.split(" ".join(argv[1:]))
    wait = float(os.environ.get("SPOTBENCH_OSU_CONNECT_WAIT", "60"))
    return run(peer.name, peer.host, peer.port, cmd, wait)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

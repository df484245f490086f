"""`python -m tests.fidelity.ports OUT` inside a member's network namespace: every 0.1 s,
record each TCP port in LISTEN and each bound, unconnected UDP port with the program that
owns it, one JSON line per new (protocol, address, port) in OUT, until killed.

Each sample asks the kernel for the namespace's listening sockets over netlink sock_diag
(what `ss` does; well under a millisecond); only a port not seen before costs the walk
over every process's open files that finds its owner. (psutil.net_connections reads
/proc/net/tcp*, which walks every namespace's connections, and does that walk on every
call: ~50 ms of CPU per sample, half a core per sampled member on this shared machine.)
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import time

import psutil

SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
TCP_LISTEN = 10
NETLINK_SOCK_DIAG = 4


def _dump(family: int, protocol: int, states: int) -> list[tuple[int, str, int, int, int]]:
    """One sock_diag dump (what `ss` asks): [(state, local ip, local port, remote port, inode)]."""
    req = struct.pack("=BBBBI", family, protocol, 0, 0, states) + bytes(48)
    msg = struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP,
                      1, 0) + req
    out = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as nl:
        nl.sendto(msg, (0, 0))
        while True:
            data = nl.recv(65536)
            offset = 0
            while offset < len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if kind == NLMSG_DONE:
                    return out
                if kind == NLMSG_ERROR:
                    raise OSError(-struct.unpack_from("=i", data, offset + 16)[0], "sock_diag")
                body = offset + 16
                state = data[body + 1]
                sport, dport = struct.unpack_from(">HH", data, body + 4)
                raw = data[body + 8: body + 8 + (4 if family == socket.AF_INET else 16)]
                inode = struct.unpack_from("=I", data, body + 68)[0]
                out.append((state, socket.inet_ntop(family, raw), sport, dport, inode))
                offset += (length + 3) & ~3


def listening() -> dict[tuple[str, str, int], int]:
    """(protocol, ip, port) → socket inode for every TCP listener and unconnected UDP
    socket of this network namespace."""
    out = {}
    for family in (socket.AF_INET, socket.AF_INET6):
        for state, ip, port, _, inode in _dump(family, socket.IPPROTO_TCP, 1 << TCP_LISTEN):
            out[("tcp", ip, port)] = inode
        for state, ip, port, remote_port, inode in _dump(family, socket.IPPROTO_UDP, 0xFFFFFFFF):
            if remote_port == 0:  # connected UDP is a client, not something peers reach
                out[("udp", ip, port)] = inode
    return out


def owners(inodes: set[int]) -> dict[int, int]:
    """socket inode → pid of a process holding it."""
    found: dict[int, int] = {}
    wanted = {f"socket:[{i}]": i for i in inodes}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                inode = wanted.get(os.readlink(f"/proc/{pid}/fd/{fd}"))
                if inode is not None:
                    found.setdefault(inode, int(pid))
        except OSError:
            continue  # the process ended, or a file closed, while we looked
    return found


def program(pid: int | None) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline()[:3]) if pid else "?"
    except psutil.Error:
        return "?"


def sample(seen: set, out) -> None:
    new = {k: inode for k, inode in listening().items() if k not in seen}
    if not new:
        return
    pids = owners(set(new.values()))
    for key, inode in new.items():
        seen.add(key)
        out.write(json.dumps({"protocol": key[0], "ip": key[1], "port": key[2],
                              "program": program(pids.get(inode))}) + "\n")
    out.flush()


def main(path: str) -> None:
    seen: set = set()
    with open(path, "a") as out:
        while True:
            sample(seen, out)
            time.sleep(0.1)


if __name__ == "__main__":
    main(sys.argv[1])

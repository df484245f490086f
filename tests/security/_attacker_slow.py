"""Run by test_slow_clients.py, as another local user when it can (setpriv); stdlib only.

argv: PORT COUNT SECONDS

Opens COUNT connections to the local functions server, a quarter of each kind, and keeps
them going for at most SECONDS: headers a byte at a time; a whole head declaring a body,
then the body a byte at a time; connected and silent; pipelined requests sent at once and
never read. Prints one JSON object: per kind, how each connection ended (`503`, `408`, …:
the status the server answered, `open` when it was still open at the end, `closed` when the
server closed it without an answer) and after how many seconds.
"""

import json
import selectors
import socket
import sys
import time

port, count, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
KINDS = ("header", "body", "silent", "unread")
HEAD = b"POST /start HTTP/1.1\r\nHost: x\r\nX-Slow: "
BODY_HEAD = b"POST /start HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n"
PIPELINED = b"POST /start HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" * 2000

t0 = time.monotonic()
conns = []  # [kind, sock, sent, got, ended]
for i in range(count):
    kind = KINDS[i % len(KINDS)]
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError as exc:
        conns.append([kind, None, 0, b"", (f"connect {exc.errno}", round(time.monotonic() - t0, 1))])
        continue
    sock.setblocking(False)
    if kind == "body":
        sock.send(BODY_HEAD)
    elif kind == "unread":
        try:
            sock.send(PIPELINED)
        except OSError:
            pass
    conns.append([kind, sock, 0, b"", None])

sel = selectors.DefaultSelector()
for c in conns:
    if c[1] is not None and c[0] != "unread":  # the "unread" kind never reads
        sel.register(c[1], selectors.EVENT_READ, c)
last_drip = 0.0
while time.monotonic() - t0 < seconds and any(c[4] is None for c in conns if c[0] != "unread"):
    for key, _ in sel.select(0.2):
        c = key.data
        try:
            data = c[1].recv(4096)
        except OSError:
            data = b""
        c[3] += data
        if not data or b"\r\n\r\n" in c[3]:
            status = c[3].split(b" ", 2)[1].decode() if c[3].startswith(b"HTTP/") else "closed"
            c[4] = (status, round(time.monotonic() - t0, 1))
            sel.unregister(c[1])
    if time.monotonic() - last_drip > 0.4:  # one byte more on every dribbling connection
        last_drip = time.monotonic()
        for c in conns:
            if c[4] is None and c[0] in ("header", "body"):
                byte = (HEAD[c[2]:c[2] + 1] or b"a") if c[0] == "header" else b" "
                try:
                    c[1].send(byte)
                    c[2] += 1
                except OSError:
                    pass
out = {kind: [] for kind in KINDS}
for kind, sock, _sent, _got, ended in conns:
    out[kind].append(list(ended) if ended else ["open", round(time.monotonic() - t0, 1)])
    if sock is not None:
        sock.close()
print(json.dumps(out))

"""The local cloud's stand-in for sshd: a tiny exec agent served by the peer member.

On a VM the launcher reaches its peer with `ssh`; on the local cloud the peer member runs
this agent on its service port (127.0.0.1). `mpiexec` calls the bridge
(`python -m workloads.osu.bridge HOST CMD…`) as its launcher; the bridge connects here and
the agent runs hydra's proxy command as ITS OWN child, so stopping or killing the peer's
instance takes rank 1 down with it, exactly as stopping a VM would.

Wire protocol (one command per connection):
    agent → {"nonce": hex}\\n
    bridge → {"cmd": [argv…], "mac": hmac_sha256(key, nonce + "\\n" + json(cmd))}\\n
    agent → frames: 1 byte channel (1 stdout, 2 stderr, 3 exit code) + 4 byte length + data
The key is random, made when the agent starts, and published in a per-user runtime
directory (mode 0700, owner checked), so only the same local user — the launcher — can run
commands; other users on the machine cannot. It is derived from nothing: neither a member
token (which travels in env and HTTP headers) nor anything in the sweep's state gives it.
"""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import json
import logging
import os
import secrets
import signal
import socket
import socketserver
import struct
import subprocess
import tempfile
import threading
from pathlib import Path

import psutil

log = logging.getLogger("spotbench.osu.agent")

STDOUT, STDERR, EXIT = 1, 2, 3
_FRAME = struct.Struct("!BI")


RUNTIME_KEY = Path("~/.cache/spotbench/runtime.key")  # this user's: names the runtime folder


def _runtime_name() -> str:
    """`spotbench-<uid>-<16 hex>`: the hex from a key in this user's home (0600, made once),
    so nobody else can know the name and pre-create the folder in a shared `$TMPDIR`
    (`spotbench-<uid>` made by another user blocked every local OSU run: issue 38)."""
    path = RUNTIME_KEY.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = path.read_text().strip()
    else:
        key = secrets.token_hex(32)
        with os.fdopen(fd, "w") as fh:
            fh.write(key + "\n")
    if not key:  # another process is writing it this very moment
        key = path.read_text().strip()
    tag = hmac.new(key.encode(), b"runtime-dir", hashlib.sha256).hexdigest()[:16]
    return f"spotbench-{os.getuid()}-{tag}"


def runtime_dir() -> Path:
    """`$TMPDIR/spotbench-<uid>-<tag>` (`_runtime_name`), created 0700; refuses a
    directory others own or can read."""
    path = Path(tempfile.gettempdir()) / _runtime_name()
    path.mkdir(mode=0o700, exist_ok=True)
    st = path.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(f"{path} must be owned by uid {os.getuid()} with mode 0700; remove it and retry")
    return path


def key_path(member: str) -> Path:
    return runtime_dir() / f"{member}.agent-key"


def publish_key(member: str) -> bytes:
    """Make a random agent key for `member` and write it 0600 for the launcher to read."""
    key = secrets.token_hex(32)
    path = key_path(member)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key)
    tmp.replace(path)
    return key.encode()


def read_key(member: str) -> bytes:
    return key_path(member).read_text().strip().encode()


def mac(key: bytes, nonce: str, cmd: list[str]) -> str:
    return hmac.new(key, f"{nonce}\n{json.dumps(cmd)}".encode(), hashlib.sha256).hexdigest()


def send_frame(sock: socket.socket, channel: int, data: bytes) -> None:
    sock.sendall(_FRAME.pack(channel, len(data)) + data)


def _pdeathsig() -> None:  # runs in the child between fork and exec
    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)


def kill_tree(pid: int, grace: float = 2.0) -> None:
    """SIGTERM a process and its descendants, SIGKILL what is left after `grace`."""
    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


class _Handler(socketserver.BaseRequestHandler):
    server: ExecAgent

    def handle(self) -> None:
        sock: socket.socket = self.request
        nonce = secrets.token_hex(16)
        sock.sendall(json.dumps({"nonce": nonce}).encode() + b"\n")
        reader = sock.makefile("rb")
        line = reader.readline(1 << 20)
        if not line:
            return  # a liveness probe: connected and left
        try:
            req = json.loads(line)
            cmd = [str(a) for a in req["cmd"]]
            ok = hmac.compare_digest(str(req["mac"]), mac(self.server.key, nonce, cmd))
        except (ValueError, KeyError, TypeError):
            ok, cmd = False, []
        if not ok or not cmd:
            log.warning("refused a command from %s: bad or missing key", self.client_address)
            send_frame(sock, STDERR, b"spotbench exec agent: authentication failed\n")
            send_frame(sock, EXIT, b"255")
            return
        self.server.run(sock, reader, cmd)


class ExecAgent(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int, key: bytes):
        self.key = key
        self.children: set[int] = set()
        self._lock = threading.Lock()
        super().__init__((host, port), _Handler)

    def run(self, sock: socket.socket, reader, cmd: list[str]) -> None:
        log.info("running %s", " ".join(cmd)[:200])
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, preexec_fn=_pdeathsig)
        except OSError as exc:
            send_frame(sock, STDERR, f"spotbench exec agent: {exc}\n".encode())
            send_frame(sock, EXIT, b"127")
            return
        with self._lock:
            self.children.add(proc.pid)
        send_lock = threading.Lock()

        def pump(stream, channel: int) -> None:
            for chunk in iter(lambda: stream.read1(65536), b""):
                with send_lock:
                    try:
                        send_frame(sock, channel, chunk)
                    except OSError:
                        return

        def watch_client() -> None:  # the bridge went away (mpiexec aborted): stop the command
            reader.read()
            if proc.poll() is None:
                kill_tree(proc.pid)

        pumps = [threading.Thread(target=pump, args=(proc.stdout, STDOUT), daemon=True),
                 threading.Thread(target=pump, args=(proc.stderr, STDERR), daemon=True)]
        for t in pumps:
            t.start()
        threading.Thread(target=watch_client, daemon=True).start()
        rc = proc.wait()
        for t in pumps:
            t.join(timeout=5)
        with self._lock:
            self.children.discard(proc.pid)
        try:
            with send_lock:
                send_frame(sock, EXIT, str(rc).encode())
        except OSError:
            pass

    def kill_children(self) -> None:
        with self._lock:
            pids = list(self.children)
        for pid in pids:
            kill_tree(pid)


def serve(host: str, port: int, member: str, stop: threading.Event) -> None:
    """Serve commands until `stop` is set, then kill whatever still runs."""
    key = publish_key(member)
    server = ExecAgent(host, port, key)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    log.info("exec agent for %s listening on %s:%d", member, host, port)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.shutdown()
        server.server_close()
        server.kill_children()
        key_path(member).unlink(missing_ok=True)

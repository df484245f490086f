"""Run as ANOTHER local user (setpriv --reuid 65534) by test_local_state.py; stdlib only.

argv: STATE_ROOT FUNCTIONS_URL AGENT_PORT AGENT_MEMBER [LEAKED_TOKEN]

What an unprivileged local user would try: read everything under the sweep's state folder,
look for member tokens (`<member>.<64 hex>`) or the sweep secret, derive the OSU exec-agent
key from a token, ask the agent to run `id -u`, and call `done` with a token over HTTP.
Prints one JSON object with what worked.
"""

import hashlib
import hmac
import json
import os
import re
import socket
import struct
import sys
import urllib.error
import urllib.request

root, url, port, member = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
leaked = sys.argv[5] if len(sys.argv) > 5 else None
out = {"uid": os.getuid(), "read": [], "denied": [], "tokens": {}, "secret": None,
       "exec": [], "done": None}

TOKEN = re.compile(rb"([A-Za-z0-9_-][A-Za-z0-9_.-]*)\.([0-9a-f]{64})")
for dirpath, _dirs, files in os.walk(root, onerror=lambda e: out["denied"].append(e.filename)):
    for name in files:
        path = os.path.join(dirpath, name)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            out["denied"].append(path)
            continue
        out["read"].append(path)
        if name == "secret":
            out["secret"] = data.decode().strip()
        for m in TOKEN.finditer(data):
            out["tokens"][m.group(1).decode()] = (m.group(1) + b"." + m.group(2)).decode()

if out["secret"]:  # the secret gives every token
    for who in list(out["tokens"]) + [member]:
        mac = hmac.new(out["secret"].encode(), f"member:{who}".encode(), hashlib.sha256)
        out["tokens"][who] = f"{who}.{mac.hexdigest()}"
if leaked:
    out["tokens"][leaked.rpartition(".")[0]] = leaked


def agent_exec(key: bytes) -> dict:
    """Ask the exec agent to run `id -u` with KEY; its stdout and exit code."""
    frame = struct.Struct("!BI")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        reader = sock.makefile("rb")
        nonce = json.loads(reader.readline())["nonce"]
        cmd = ["id", "-u"]
        mac = hmac.new(key, f"{nonce}\n{json.dumps(cmd)}".encode(), hashlib.sha256).hexdigest()
        sock.sendall(json.dumps({"cmd": cmd, "mac": mac}).encode() + b"\n")
        stdout, code = b"", None
        while True:
            head = reader.read(frame.size)
            if len(head) < frame.size:
                break
            channel, size = frame.unpack(head)
            data = reader.read(size)
            if channel == 1:
                stdout += data
            elif channel == 3:
                code = int(data)
                break
        return {"stdout": stdout.decode().strip(), "code": code}


keys = []
for who, token in out["tokens"].items():
    if who == member:  # the agent key as derived from the member's token
        keys.append(hmac.new(token.encode(), f"osu-exec-agent:{member}".encode(),
                             hashlib.sha256).hexdigest().encode())
try:  # the published key file itself
    keys_dir = os.environ.get("VICTIM_KEYS") or f"/tmp/spotbench-{os.environ.get('VICTIM_UID', '0')}"
    with open(f"{keys_dir}/{member}.agent-key", "rb") as fh:
        keys.append(fh.read().strip())
except OSError:
    pass
for key in keys:
    out["exec"].append(agent_exec(key))

for who, token in out["tokens"].items():
    req = urllib.request.Request(f"{url}/done", data=b"{}", method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            out["done"] = resp.status
    except urllib.error.HTTPError as exc:
        out["done"] = exc.code
    break
print(json.dumps(out))

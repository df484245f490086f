"""A real `moto_server` on 127.0.0.1 for tests: started on a free port, stopped after.

Use as a context manager (`with MotoServer() as url:`) or through a pytest fixture that
wraps it. Credentials are fake (`testing`) and set by the caller's monkeypatch.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

VENV_BIN = Path(sys.executable).parent
_IMAGES: dict[str, str] = {}
_AMIS: dict[str, str] = {}


def base_amis() -> str:
    """A file of moto's own base AMI list (44 images, owner amazon), for `MOTO_AMIS_PATH`.

    Without it every EC2 backend (one per region, again after each reset) also loads the
    ~1,300 "latest" and ECS-optimized AMIs, and each `describe_images` filters all of them:
    about a second per server or reset that no test needs (they take any image moto knows)."""
    if "path" not in _AMIS:
        spec = importlib.util.find_spec("moto")
        assert spec is not None and spec.submodule_search_locations
        packed = Path(spec.submodule_search_locations[0]) / "ec2" / "resources" / "amis.json.gz"
        data = gzip.decompress(packed.read_bytes())
        out = Path(tempfile.gettempdir()) / f"spotbench-moto-amis-{len(data)}.json"
        if not out.exists() or out.read_bytes() != data:
            tmp = out.with_name(f"{out.name}.{os.getpid()}")
            tmp.write_bytes(data)
            os.replace(tmp, out)  # whole, even with other test runs reading it
        _AMIS["path"] = str(out)
    return _AMIS["path"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MotoServer:
    def __init__(self, start_timeout_s: float = 60, all_amis: bool = False) -> None:
        self.port = free_port()
        self.all_amis = all_amis  # True: moto's full AMI catalogue (the ECS-optimized ones too)
        self.url = f"http://127.0.0.1:{self.port}"
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> str:
        exe = VENV_BIN / "moto_server"
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "moto.server"]
        # its log goes to a file, never a pipe: moto logs every request, and a pipe nobody
        # reads fills up (64 KiB) and blocks the server mid-answer after a few hundred calls
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [*cmd, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            env=os.environ if self.all_amis else {**os.environ, "MOTO_AMIS_PATH": base_amis()},
        )
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                err = self.log.read().decode(errors="replace")
                raise RuntimeError(f"moto_server exited early: {err[-2000:]}")
            try:
                requests.get(f"{self.url}/moto-api/", timeout=2)
                break
            except requests.ConnectionError:
                time.sleep(0.2)
        else:
            self.__exit__()
            raise RuntimeError(f"moto_server did not answer on {self.url} within {self.start_timeout_s}s")
        # Lambda invocations run in-process, not in Docker (there is no Docker daemon).
        requests.post(f"{self.url}/moto-api/config", json={"lambda": {"use_docker": False}}, timeout=10)
        return self.url

    def reset(self) -> None:
        self.reset_url(self.url)

    @staticmethod
    def any_image(ec2) -> str:
        """An AMI id moto knows (looked up once per server: the listing is long)."""
        key = ec2.meta.endpoint_url
        if key not in _IMAGES:
            _IMAGES[key] = ec2.describe_images(Owners=["amazon"], MaxResults=5)["Images"][0]["ImageId"]
        return _IMAGES[key]

    @staticmethod
    def reset_url(url: str) -> None:
        """Forget every resource (keeps the server and its config)."""
        requests.post(f"{url}/moto-api/reset", timeout=10).raise_for_status()

    @staticmethod
    def fresh_account(url: str, monkeypatch: Any, region: str) -> None:
        """An empty account at `url`, and moto's test credentials and `region` in the env."""
        for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                           "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": region}.items():
            monkeypatch.setenv(key, value)
        MotoServer.reset_url(url)

    def __exit__(self, *exc: object) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if getattr(self, "log", None) is not None:
            self.log.close()

"""`make images REGISTRY=… TAG=…` builds every images/*/Dockerfile from the repository root
and pushes REGISTRY/<name>:TAG — the names a spec without `image:` resolves to."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from spotbench.images import IMAGES, REGISTRY_IMAGES, image_ref

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_docker(tmp_path: Path) -> Path:
    log = tmp_path / "docker.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    (bin_dir / "docker").chmod(0o755)
    return bin_dir


def test_make_images_builds_and_pushes_every_image(fake_docker: Path):
    if shutil.which("make") is None:
        pytest.skip("make missing")
    env = {**os.environ, "PATH": f"{fake_docker}:{os.environ['PATH']}", "BUILDER": "docker"}
    out = subprocess.run(["make", "-s", "images", "REGISTRY=reg.example/p/spotbench-x", "TAG=t1"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    calls = (fake_docker.parent / "docker.log").read_text().splitlines()
    folders = sorted(p.parent.name for p in ROOT.glob("images/*/Dockerfile"))
    assert calls == [line for name in folders for line in (
        f"build -f {ROOT}/images/{name}/Dockerfile -t reg.example/p/spotbench-x/{name}:t1 {ROOT}",
        f"push reg.example/p/spotbench-x/{name}:t1")]
    # what the stack boots when the spec names no image is among what was pushed
    pushed = {c.split()[-1] for c in calls if c.startswith("push")}
    for (workload, gpu) in IMAGES:
        assert image_ref("reg.example/p/spotbench-x", workload, gpu, "t1") in pushed
    # and the runner a `container` sweep boots beside the user's image
    assert "runner" in REGISTRY_IMAGES
    assert {f"reg.example/p/spotbench-x/{name}:t1" for name in REGISTRY_IMAGES} <= pushed


def test_make_images_without_registry_says_how():
    out = subprocess.run(["bash", str(ROOT / "scripts/build_images.sh")], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 2 and "REGISTRY" in out.stderr

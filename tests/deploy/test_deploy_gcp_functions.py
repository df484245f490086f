"""The GCP functions as Cloud Functions runs them: the shipped archive, nothing else.

The program is declared under the Pulumi mocks; the functions' source object it declares is
zipped as the engine zips it and unpacked into an empty folder (the build's workspace); a
fresh venv gets only the archive's requirements.txt (the Python buildpack's install;
cached by digest, tests/deploy/artifacts.py); functions-framework starts on each entry point
the declared functions name (`--target`, from the workspace, `main.py`) with the
environment the program declares (+ the test's endpoints); Google's callers reach them
through the Cloud Run front double (tests/fidelity/cloud_run_front.py). Fails when an entry
point is missing (MissingTargetException: the process exits), an import is absent from the
requirements, or a module would come from the dev checkout or venv.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from spotbench.done_client import call_done
from spotbench.localrun.server import FunctionsServer, _die_with_parent
from tests.auth.test_gcp import KEY, KID, CertServer, _cert_pem
from tests.clouds.fake_gce import FakeGce
from tests.deploy.artifacts import Python, clean_venv, runtime_python, unpack, zip_of
from tests.fidelity.cloud_run_front import (
    FUNCTION,
    CloudRunFront,
    CloudScheduler,
    Deployment,
    deploy_gcp,
    vm_identity_token,
    vm_network,
)

pytestmark = [pytest.mark.fidelity, pytest.mark.timeout(900)]

PROJECT, REGION, ZONE = "proj-ship", "us-central1", "us-central1-a"
SPEC = {"name": "sh", "cloud": "gcp", "zone": ZONE, "gcp": {"project": PROJECT},
        "workload": {"name": "osu", "benchmarks": ["latency"]},
        "matrix": {"machine_type": ["n2-standard-2"]}, "trials": 1,
        "schedule": {"cron": "0 3 * * *"}, "deadline": "30m"}  # fmt: skip
BUCKET_OBJECT = "gcp:storage/bucketObject:BucketObject"


def entry_points(dep: Deployment) -> list[str]:
    """Every entry point a declared function builds (read from the program, not listed here)."""
    return [f.inputs["buildConfig"]["entryPoint"] for f in dep.of_type(FUNCTION)]


def source_zip(dep: Deployment, entry: str) -> bytes:
    """The zip of the source object the function `entry` is built from."""
    build = dep.function(entry)["buildConfig"]
    storage = build["source"]["storageSource"]
    obj = next(o for o in dep.of_type(BUCKET_OBJECT) if o.inputs["name"] == storage["object"])
    return zip_of(obj.inputs["source"])


def runtime_version(dep: Deployment) -> str:
    """`python312` → `3.12` (every function declares the same runtime)."""
    (runtime,) = {dep.function(e)["buildConfig"]["runtime"] for e in entry_points(dep)}
    digits = runtime.removeprefix("python")
    return f"{digits[0]}.{digits[1:]}"


class ShippedFunction(FunctionsServer):
    """One Cloud Run service: functions-framework of the clean venv on one `--target`, in
    the unpacked workspace, with only the declared environment (and Cloud Run's own)."""

    def __init__(self, entry: str, workspace: Path, venv: Path, env: dict[str, str], log: Path):
        super().__init__(env, log)
        self.entry, self.workspace, self.venv = entry, workspace, venv

    def launch(self) -> ShippedFunction:
        # Cloud Run hands the container a PORT to bind itself, as functions-framework does
        # here: the socket FunctionsServer bound to choose the port is released first
        self.sock.close()
        cmd = [str(self.venv / "bin" / "functions-framework"), "--target", self.entry,
               "--host", "127.0.0.1", "--port", str(self.port)]
        platform = {"PATH": f"{self.venv / 'bin'}:/usr/bin:/bin", "HOME": str(self.workspace),
                    "PORT": str(self.port), "K_SERVICE": self.env.get("K_SERVICE", self.entry),
                    "FUNCTION_TARGET": self.entry, "FUNCTION_SIGNATURE_TYPE": "http"}
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child's lifetime
        self.proc = subprocess.Popen(cmd, cwd=self.workspace, env={**platform, **self.env},
                                     stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
                                     start_new_session=True)
        log.close()
        return self

    def ready(self) -> None:
        try:
            self.wait_ready(120)
        except RuntimeError as exc:
            tail = self.log_path.read_text(errors="replace")[-2500:]
            pytest.fail(f"entry point {self.entry!r} of the shipped archive did not start: "
                        f"{exc}\n{tail}")


@dataclass
class Shipped:
    dep: Deployment
    workspace: Path
    venv: Path
    python: Python
    gce: FakeGce
    front: CloudRunFront
    ids: dict[str, str]

    def members(self) -> list[str]:
        return [i["name"] for i in self.dep.instances]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> Iterator[Shipped]:
    root: Path = tmp_path_factory.mktemp("shipped")
    dep = deploy_gcp(SPEC, PROJECT, REGION)
    entries = entry_points(dep)
    archives = {e: source_zip(dep, e) for e in entries}
    workspace = unpack(archives[entries[0]], root / "workspace")
    python = runtime_python(runtime_version(dep))
    venv = clean_venv((workspace / "requirements.txt").read_text(), python)
    gce = FakeGce(project=PROJECT)
    ids = {}
    for n, inst in enumerate(dep.instances):
        ids[inst["name"]] = str(8_000_000 + n)
        gce.add(inst["name"], inst["zone"], labels=inst["labels"],
                service_account=inst["serviceAccount"]["email"], instance_id=ids[inst["name"]])
    gce.start()
    certs = CertServer({KID: _cert_pem(KEY)})
    procs: dict[str, ShippedFunction] = {}
    try:
        for entry in entries:
            fn = dep.function(entry)
            env = {**fn["serviceConfig"]["environmentVariables"], "K_SERVICE": fn["name"],
                   "SPOTBENCH_GCP_API_ENDPOINT": gce.url, "SPOTBENCH_GCP_CERTS_URL": certs.url,
                   "SPOTBENCH_RESULTS_URL": f"file://{root}/results"}
            procs[entry] = ShippedFunction(entry, workspace, venv, env,
                                           root / f"{entry}.log").launch()
        for proc in procs.values():
            proc.ready()
        front = CloudRunFront(dep, certs.url, {e: p.url for e, p in procs.items()}).start()
        yield Shipped(dep, workspace, venv, python, gce, front, ids)
        front.stop()
    finally:
        for proc in procs.values():
            proc.stop()
        certs.close()
        gce.stop()


def test_deploy_gcp_every_function_builds_from_the_one_archive(shipped):
    dep = shipped.dep
    assert set(entry_points(dep)) >= {"start", "stop", "done", "grant"}
    # one source object, named by every function's build (zipping it once per function would
    # read the checkout's files again while other tests run beside this one)
    sources = {json.dumps(dep.function(e)["buildConfig"]["source"]["storageSource"], sort_keys=True)
               for e in entry_points(dep)}
    assert len(sources) == 1, sources
    assert len([o for o in dep.of_type(BUCKET_OBJECT)
                if o.inputs["name"] == json.loads(next(iter(sources)))["object"]]) == 1
    assert not shipped.python.mismatch, (
        f"no python{runtime_version(dep)} here: the functions ran on {shipped.python.version}")


def test_deploy_gcp_each_entry_point_serves_through_the_cloud_run_front(shipped, monkeypatch):
    """Old main: `grant` is not exported by the archive's main.py, functions-framework exits
    with MissingTargetException and the fixture fails."""
    dep, front = shipped.dep, shipped.front
    name = shipped.members()[0]
    # grant before any run: the function answers for itself (its own refusal, JSON)
    grant_url = dep.service_url("grant")
    tok = vm_identity_token(dep, name, shipped.ids[name], grant_url)
    resp = requests.post(front.url_for(grant_url), json={}, timeout=60,
                         headers={"Authorization": f"Bearer {tok}"})
    assert resp.status_code == 403, resp.text
    assert "no run of sweep sh is open" in resp.json()["error"]

    resp = CloudScheduler(front).fire("start", "2026-01-05T03:00:00Z")
    assert resp.status_code == 200, resp.text
    started = resp.json()["started"]
    assert started

    ctx = dep.context(name)
    with vm_network(front, monkeypatch, dep, name, shipped.ids[name]):
        answer = call_done(ctx)
    assert name in answer["stopped"]

    resp = CloudScheduler(front).fire("stop", "2026-01-05T03:30:00Z")
    assert resp.status_code == 200, resp.text
    assert {entry for entry, *_ in front.log} == set(entry_points(dep))


PROBE = """
import importlib, json, os, sys
sys.path.insert(0, os.getcwd())  # the workspace, as functions-framework puts its source dir
for m in sys.argv[1:]:
    importlib.import_module(m)
print(json.dumps({n: getattr(m, "__file__", None) for n, m in sys.modules.items()}))
"""


def test_deploy_gcp_every_module_a_function_loads_comes_from_the_archive_or_its_venv(shipped):
    """What the functions import once they ran a call (the drivers load lazily), from a
    fresh interpreter of the clean venv in the workspace: each module's file is the
    archive's, the venv's or the interpreter's own — never the checkout's or the dev venv's."""
    modules = ["main", "functions.main", "functions.grant", "spotbench.clouds.gcp.gce",
               "spotbench.clouds.gcp.identity", "spotbench.clouds.gcp.storage_grant",
               "spotbench.control", "gcsfs"]
    out = subprocess.run([str(shipped.venv / "bin" / "python"), "-I", "-c", PROBE, *modules],
                         cwd=shipped.workspace, capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(shipped.workspace)})
    assert out.returncode == 0, out.stderr[-3000:]
    files = json.loads(out.stdout.splitlines()[-1])
    base = subprocess.run([str(shipped.venv / "bin" / "python"), "-I", "-c",
                           "import sys; print(sys.base_prefix)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    homes = (str(shipped.workspace), str(shipped.venv), base)
    strays = {n: f for n, f in files.items() if f and not f.startswith(homes)}
    assert not strays, f"loaded from outside the shipped artifact: {strays}"

"""Boot simulation: render what a VM boots, check it, and boot it — as the VM sees it.

    docs = render("examples/gcp-osu.yaml", workload={...})   # Pulumi program under mocks
    schema_errors(doc), shellcheck_errors(doc)                 # cloud-init 22.4, shellcheck
    with Lab(tmp) as lab:                                       # root: netns + veth + mounts
        vms = [lab.vm(d) for d in group_docs]                   # each member: its own netns
        lab.boot(vm) ... lab.stop(vm)                           # with its declared IP

`render` runs `infra/__main__.py` (the real program) under the recording mocks, so the
user-data is what `pulumi up` would send (the mocks answer `tls` keys with real ED25519
pairs). `Lab` gives each member its own network namespace on a bridge in a hub namespace
(all created and removed here; private addresses only inside them), the hub serving the
metadata endpoints and a stand-in `done` (tests/fidelity/hub.py); `tests.fidelity.vm` then
executes the user-data with the shims of tests/fidelity/shims.py.

What is swapped for local doubles, and only that: the results URL (gs://, s3://) becomes a
shared file:// folder and the done URL the hub's, by replacing those two strings in the
rendered document (`localize`); GCP members fetch their private keys from the hub's Secret
Manager double, which serves each secret the declared version's data, to the accounts the
declared IAM policy lets read it (`secret_store`), as the account the member's instance
declares (`Rendered.account`, the hub's access tokens); AWS members fetch theirs from the
hub's function URL double (tests/fidelity/aws_function.py: `/keys`, SigV4, the calling
instance's own group only), the lab's function URL being the hub's `/done/`. Keys, files, modes, owners, the unit, the docker command,
the image's USER and entrypoint, addresses and ports are the rendered ones.
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml

from spotbench.member import ENV_KEY, MemberContext
from infra.preview import PROGRAM, RecordingMocks, install, run_declarations
from tests.fidelity import amis, aws_ssm, shims
from tests.fidelity.hub import DONE_PORT, HUB_IP, METADATA_IP

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {"gcp": {"gcp:project": "proj-sim", "gcp:region": "us-central1"},
          "aws": {"aws:region": "us-east-1"}}
INSTANCE = {"gcp": ("gcp:compute/instance:Instance",),
            "aws": ("aws:ec2/instance:Instance", "aws:ec2/spotInstanceRequest:SpotInstanceRequest")}


@dataclass
class Rendered:
    cloud: str
    name: str
    user_data: str
    ctx: MemberContext
    account: str | None = None  # the service account (GCP) or role (AWS) it runs as
    image: amis.Image | None = None  # AWS: the AMI it boots (tests/fidelity/amis.py)

    @property
    def doc(self) -> dict:
        return yaml.safe_load(self.user_data)

    def file(self, suffix: str) -> dict:
        return next(f for f in self.doc["write_files"] if f["path"].endswith(suffix))

    @property
    def env(self) -> dict[str, str]:
        return dict(line.split("=", 1) for line in self.file("/env")["content"].splitlines())

    @property
    def unit(self) -> dict[str, list[str]]:
        return shims.parse_unit(self.file(".service")["content"])


def spec_variant(example: str, tmp: Path, **over: Any) -> Path:
    """The example spec with some fields replaced (e.g. fewer OSU iterations), as a file."""
    data = yaml.safe_load((ROOT / example).read_text())
    for key, value in over.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    out = tmp / Path(example).name
    out.write_text(yaml.safe_dump(data))
    return out


def render(spec_file: Path | str, mocks: RecordingMocks) -> tuple[list[Rendered], list[dict]]:
    """Every member's user-data as the Pulumi program declares it (under `mocks`), and the
    resource rows `spotbench preview --json` prints for the same declarations."""
    from spotbench.preview import as_json
    from spotbench.spec import load_spec

    path = Path(spec_file) if Path(spec_file).is_absolute() else ROOT / spec_file
    cloud = load_spec(path).cloud
    install(mocks, stack="fidelity")
    mocks.reset()
    pulumi.runtime.set_all_config({**CONFIG[cloud], "spotbench:spec": str(path)})
    mocks.answers[amis.GET_PARAMETER] = amis.get_parameter  # the AMIs' public parameters
    try:
        run_declarations(lambda: runpy.run_path(str(PROGRAM), run_name="__main__"))
    finally:
        pulumi.runtime.set_all_config({})
        mocks.answers.pop(amis.GET_PARAMETER, None)
    out = []
    for inst in (i for typ in INSTANCE[cloud] for i in mocks.of_type(typ)):
        account, image = None, None
        if cloud == "gcp":
            name, text = inst.inputs["name"], inst.inputs["metadata"]["user-data"]
            account = inst.inputs["serviceAccount"]["email"]
        else:
            name, text = inst.inputs["tags"]["Name"], inst.inputs["userData"]
            account = aws_ssm.instance_role(mocks.declared, inst.inputs["iamInstanceProfile"])
            image = amis.image_of(inst.inputs["ami"])
        env = dict(line.split("=", 1) for line in next(
            f["content"] for f in yaml.safe_load(text)["write_files"]
            if f["path"].endswith("/env")).splitlines())
        out.append(Rendered(cloud, name, text, MemberContext.model_validate_json(env[ENV_KEY]),
                            account, image))
    return out, json.loads(as_json(mocks.declared))


def secret_store(declared: list, project: str = CONFIG["gcp"]["gcp:project"]) -> dict[str, dict]:
    """What the hub's Secret Manager serves: secret name → base64 data of its declared
    version and the members the declared IAM policy lets read its latest version."""
    import base64

    from tests.fidelity.gcp_iam import DeclaredPolicy, declared_secrets, secret_access

    policy = DeclaredPolicy.from_declared(declared, project)
    members = {b.member for b in policy.bindings}
    return {name: {"data": base64.b64encode(data.encode()).decode(),
                   "readers": sorted(m for m in members if policy.allows(m, secret_access(name)))}
            for name, data in declared_secrets(declared, project).items()}


def groups(rendered: list[Rendered]) -> dict[str, list[Rendered]]:
    """Each group's members in the plan's order (Pulumi registers resources as their inputs
    resolve, so the mocks' order varies from run to run)."""
    out: dict[str, list[Rendered]] = {}
    for r in rendered:
        out.setdefault(r.ctx.group, []).append(r)
    for members in out.values():
        members.sort(key=lambda r: [p.name for p in r.ctx.members].index(r.ctx.name))
    return out


# ---- static checks -------------------------------------------------------------------
def schema_errors(user_data: str) -> str:
    """`cloud-init schema` on the document: '' when valid, else its report."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        fh.write(user_data)
    try:
        proc = subprocess.run(["cloud-init", "schema", "-c", fh.name], capture_output=True,
                              text=True)
    finally:
        os.unlink(fh.name)
    return "" if proc.returncode == 0 and "Valid cloud-config" in proc.stdout else (
        proc.stdout + proc.stderr)


def shell_of(rendered: Rendered) -> str:
    """Every shell line the boot runs: runcmd, and each unit command (a `/bin/sh -c` body
    on its own; `-`/`$$` as systemd reads them)."""
    lines = []
    for c in rendered.doc.get("runcmd", []):
        lines.append(c if isinstance(c, str) else " ".join(map(shims.quote, c)))
    for key in ("ExecStartPre", "ExecStart", "ExecStopPost"):
        for command in rendered.unit.get(key, []):
            argv, _ = shims._argv(command, {})
            if argv[:2] == ["/bin/sh", "-c"]:
                lines.append(argv[2])
            else:
                lines.append(" ".join(map(shims.quote, argv)))
    return "#!/bin/sh\n" + "\n".join(lines) + "\n"


def shellcheck_errors(script: str) -> str:
    proc = subprocess.run(["shellcheck", "-s", "sh", "-"], input=script, capture_output=True,
                          text=True)
    return "" if proc.returncode == 0 else proc.stdout + proc.stderr


# ---- the lab ------------------------------------------------------------------------------
def localize(rendered: Rendered, results_url: str, done_url: str) -> str:
    """The user-data with the cloud's results bucket and done URL swapped for local ones."""
    text = rendered.user_data
    assert rendered.ctx.results_url in text and rendered.ctx.done_url in text
    grant = rendered.ctx.done_url.removesuffix("-done") + "-grant"  # GCP's grant function
    if grant != rendered.ctx.done_url + "-grant" and grant in text:
        text = text.replace(grant, done_url.removesuffix("/done") + "/grant")
    if rendered.ctx.done_url.endswith("/") and not done_url.endswith("/"):
        done_url += "/"  # AWS's function URL: its `/grant` and `/keys` paths follow it
    return text.replace(rendered.ctx.results_url, results_url).replace(rendered.ctx.done_url,
                                                                       done_url)


def ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True)


@dataclass
class VM:
    name: str
    ip: str
    netns: str
    state: Path
    cloud: str
    boots: int = 0
    proc: subprocess.Popen | None = None

    def calls(self, program: str | None = None) -> list[dict]:
        return shims.calls(self.state, program)

    @property
    def journal(self) -> str:
        path = self.state / "journal.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def ports(self) -> list[dict]:
        path = self.state / "ports.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    @property
    def powered_off(self) -> bool:
        return (self.state / "poweroff").exists()


@dataclass
class Lab:
    tmp: Path
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    vms: list[VM] = field(default_factory=list)
    hub_proc: subprocess.Popen | None = None
    samplers: list[subprocess.Popen] = field(default_factory=list)

    @property
    def hub(self) -> str:
        return f"sbh{self.tag}"

    @property
    def done_url(self) -> str:
        return f"http://{HUB_IP}:{DONE_PORT}/done"

    def __enter__(self) -> Lab:
        ip("netns", "add", self.hub)
        ip("-n", self.hub, "link", "set", "lo", "up")
        ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        ip("-n", self.hub, "link", "set", "br0", "up")
        for addr in (HUB_IP, METADATA_IP):
            ip("-n", self.hub, "addr", "add", f"{addr}/32", "dev", "br0")
        ip("-n", self.hub, "route", "add", "default", "dev", "br0")
        hub_dir = self.tmp / "hub"
        hub_dir.mkdir()
        self.hub_dir = hub_dir
        self.hub_proc = subprocess.Popen(
            ["ip", "netns", "exec", self.hub, sys.executable, "-m", "tests.fidelity.hub",
             str(hub_dir)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        deadline = time.monotonic() + 20
        while not (hub_dir / "hub.ready").exists():
            assert self.hub_proc.poll() is None and time.monotonic() < deadline, "hub did not start"
            time.sleep(0.05)
        return self

    def serve_secrets(self, store: dict[str, dict]) -> None:
        """Secrets the hub's Secret Manager double answers (`secret_store`) or, on AWS, the
        sweep's function answers from its parameters (`aws_ssm.parameter_store`); a GCP sweep's
        one secret (key seed, secret envs) also makes the hub's `grant` answer each GCP VM
        its own group's files (`vm` registers them by address), as the function does."""
        (self.hub_dir / "secrets.json").write_text(json.dumps(store))
        if "function" in store:  # AWS: what the sweep's function answers (aws_function.py)
            (self.hub_dir / "function.json").write_text(json.dumps(store["function"]))
        import base64

        for entry in store.values():
            if not isinstance(entry, dict) or "data" not in entry:
                continue  # an AWS store (`aws_ssm.parameter_store`): no GCP secret
            try:
                payload = json.loads(base64.b64decode(entry["data"]))
            except ValueError:
                continue
            if isinstance(payload, dict) and "seed" in payload:
                self.sweep_secret = payload

    def _grant_files(self, name: str, address: str) -> None:
        import base64

        from spotbench.auth.group_keys import KEY_FILES, private_openssh

        secret = getattr(self, "sweep_secret", None)
        if secret is None:
            return
        group = name.rsplit("-", 1)[0]  # <group id>-<role code><index>
        seed = bytes.fromhex(secret["seed"])
        files = {f: base64.b64encode(private_openssh(seed, group, f).encode()).decode()
                 for f in KEY_FILES}
        env = (secret.get("env") or {}).get((secret.get("env_of") or {}).get(group, ""))
        if env is not None:
            files["env"] = base64.b64encode(env.encode()).decode()
        path = self.hub_dir / "grants.json"
        grants = json.loads(path.read_text()) if path.exists() else {}
        grants[address] = files
        path.write_text(json.dumps(grants))

    def function_calls(self) -> list[dict]:
        """The AWS function URL's `/grant` and `/keys` calls (tests/fidelity/aws_function.py)."""
        path = self.hub_dir / "function.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def secret_calls(self) -> list[dict]:
        path = self.hub_dir / "secrets.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def vm(self, name: str, address: str, cloud: str, user_data: str,
           account: str | None = None, image: amis.Image | None = None) -> VM:
        if cloud == "gcp":
            self._grant_files(name, address)
        i = len(self.vms)
        netns = f"sbm{self.tag}{i}"
        state = self.tmp / f"vm-{name}"
        state.mkdir()
        (state / "user-data").write_text(user_data)
        if image is not None:  # what the AMI carries (the docker shim's --gpus reads it)
            (state / "image.json").write_text(json.dumps(image.as_dict()))
        ip("netns", "add", netns)
        ip("link", "add", f"v{self.tag}{i}", "netns", self.hub, "type", "veth", "peer", "name",
           "eth0", "netns", netns)
        ip("-n", self.hub, "link", "set", f"v{self.tag}{i}", "master", "br0", "up")
        ip("-n", netns, "link", "set", "lo", "up")
        ip("-n", netns, "addr", "add", f"{address}/32", "dev", "eth0")
        ip("-n", netns, "link", "set", "eth0", "up")
        ip("-n", netns, "route", "add", "default", "dev", "eth0")
        vm = VM(name, address, netns, state, cloud)
        self.vms.append(vm)
        names = self.hub_dir / "names.json"  # AWS: which instance a signed call came from
        known = json.loads(names.read_text()) if names.exists() else {}
        names.write_text(json.dumps({**known, address: name}))
        if account:  # the metadata server's access tokens are this account's
            (state / "account").write_text(account)  # (AWS: the instance role, aws_ssm.py)
            accounts = self.hub_dir / "accounts.json"
            known = json.loads(accounts.read_text()) if accounts.exists() else {}
            accounts.write_text(json.dumps({**known, address: account}))
        return vm

    def boot(self, vm: VM) -> VM:
        vm.boots += 1
        (vm.state / "poweroff").unlink(missing_ok=True)
        (vm.state / "vm.json").write_text(json.dumps(
            {"cloud": vm.cloud, "hostname": vm.name, "ip": vm.ip, "boot": vm.boots}))
        vm.proc = subprocess.Popen(
            ["ip", "netns", "exec", vm.netns, "unshare", "--mount", "--uts", "--propagation",
             "private", sys.executable, "-m", "tests.fidelity.vm", str(vm.state)],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        return vm

    def wait(self, vm: VM, timeout: float) -> int | None:
        """The boot's exit code (all units ended), or None if still running at `timeout`."""
        assert vm.proc is not None
        try:
            return vm.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, vm: VM, timeout: float = 30) -> None:
        """Stop the instance: SIGTERM to the boot (systemd stops units), then kill."""
        if vm.proc is None or vm.proc.poll() is not None:
            return
        vm.proc.send_signal(signal.SIGTERM)
        try:
            vm.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill(vm)

    def kill(self, vm: VM) -> None:
        out = subprocess.run(["ip", "netns", "pids", vm.netns], capture_output=True, text=True)
        for pid in out.stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        if vm.proc is not None:
            vm.proc.wait(timeout=10)

    def sample_ports(self, vm: VM) -> subprocess.Popen:
        """Record the ports `vm` listens on (tests/fidelity/ports.py) until the lab closes."""
        proc = subprocess.Popen(
            ["ip", "netns", "exec", vm.netns, sys.executable, "-m", "tests.fidelity.ports",
             str(vm.state / "ports.jsonl")], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        self.samplers.append(proc)
        return proc

    def done_calls(self) -> list[dict]:
        path = self.hub_dir / "done.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def nft(self, vm: VM, ruleset: str) -> None:
        subprocess.run(["ip", "netns", "exec", vm.netns, "nft", "-f", "-"], input=ruleset,
                       text=True, check=True, capture_output=True)

    def __exit__(self, *exc: object) -> None:
        for proc in self.samplers:
            proc.kill()
            proc.wait(timeout=10)
        for vm in self.vms:
            self.kill(vm)
        if self.hub_proc is not None:
            self.hub_proc.kill()
            self.hub_proc.wait(timeout=10)
        for vm in self.vms:
            subprocess.run(["ip", "netns", "del", vm.netns], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.hub], capture_output=True)


def attach_gpus(vm: VM, count: int) -> None:
    """Give `vm` what a cloud VM with `count` NVIDIA GPUs has once its driver is installed
    (before it boots): the count (`STATE/gpus`: the VM gets a /dev of its own, where the
    `cos-extensions` shim makes the device nodes) and the driver's files the installer copies
    to /var/lib/nvidia — `lib64/libcuda.so.1`, a real shared object (a copy of this
    machine's libm: the lab has no NVIDIA driver; what is tested is that the container's
    loader finds and maps it) — and `bin/nvidia-smi`."""
    import ctypes
    import ctypes.util

    ctypes.CDLL(ctypes.util.find_library("m"))
    libm = next(line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
                if "/libm.so" in line or "/libm-" in line)
    (vm.state / "gpus").write_text(str(count))
    for sub in ("lib64", "bin"):
        (vm.state / "driver" / sub).mkdir(parents=True, exist_ok=True)
    shutil.copy(libm, vm.state / "driver" / "lib64" / "libcuda.so.1")
    smi = vm.state / "driver" / "bin" / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho 'NVIDIA-SMI (boot lab): {count} GPU(s)'\n")
    smi.chmod(0o755)


def shared_results(tmp: Path, uid: int) -> Any:
    """A file:// results store (the bucket) whose folder the image's uid can write."""
    from spotbench.results import ResultStore

    folder = tmp / "results"
    folder.mkdir(parents=True)
    os.chown(folder, uid, uid)
    return ResultStore(f"file://{folder}")


def open_run(store: Any, uid: int) -> Any:
    """What the start function does first: open a run (its folder writable by the image)."""
    run = store.open_run()
    for dirpath, dirnames, filenames in os.walk(store.root):
        for n in [dirpath, *(os.path.join(dirpath, f) for f in dirnames + filenames)]:
            os.chown(n, uid, uid)
    return run


def files(store: Any) -> list[str]:
    return sorted(str(p.relative_to(store.root)) for p in Path(store.root).rglob("*")
                  if p.is_file())


def cleanup_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


class Background:
    """Boots that run side by side in worker threads while the tests read them in order.

    A boot is two steps: `prepare` renders (the Pulumi mocks are process-wide: main thread
    only) and returns the lab part, which `start` hands to its lane's threads. A lane caps
    how many of its boots run at once (TF groups are CPU-heavy; an idle wait, such as the
    bounded hang of a blocked group, costs nothing to overlap). `result` waits for a boot
    (re-raising its error); `close` waits for all of them, so no lab outlives the module.
    """

    def __init__(self, lanes: dict[str, int]):
        from concurrent.futures import ThreadPoolExecutor

        self.pools = {lane: ThreadPoolExecutor(n, thread_name_prefix=f"lab-{lane}")
                      for lane, n in lanes.items()}
        self.futures: dict[str, Any] = {}

    def start(self, name: str, lane: str, prepare: Any) -> None:
        """Run `prepare()` here; its lab part in `lane`. A failure (or a skip) of either
        is what `result(name)` raises, so it fails only the tests of that boot."""
        from concurrent.futures import Future

        try:
            run = prepare()
        except BaseException as exc:  # noqa: BLE001 - pytest's skip/fail are BaseExceptions
            if isinstance(exc, KeyboardInterrupt):
                raise
            self.futures[name] = Future()
            self.futures[name].set_exception(exc)
            return
        self.futures[name] = self.pools[lane].submit(run)

    def result(self, name: str) -> Any:
        if name not in self.futures:
            raise KeyError(f"boot {name!r} was not started: no selected test asked for it")
        return self.futures[name].result()

    def close(self) -> None:
        for pool in self.pools.values():
            pool.shutdown(wait=True, cancel_futures=True)

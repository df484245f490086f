"""The programs a simulated VM (`tests.fidelity.vm`) finds in /usr/bin instead of the real ones.

- `systemctl`: daemon-reload, enable/disable, start [--no-block], poweroff — units run by
  `run_unit` with systemd's semantics for ExecStartPre (`-` ignores failure), ExecStart,
  ExecStopPost (`$EXIT_STATUS` …), `Environment=`, and SIGTERM on stop.
- `docker`: `rm -f`, `login` and `run`. `run` accepts exactly the flags the boot path uses,
  spotbench's images on `--network host` only, a user's image also on docker's default
  bridge (its own network namespace behind docker0 and the host's iptables, `bridge`),
  resolves the image to its `images/<name>/Dockerfile`, and starts the image's ENTRYPOINT
  module from this checkout (the image's /app) as the Dockerfile's `USER` uid (setpriv),
  in its own mount namespace with the `--volume`s bound (read-only when `:ro`), the image's
  /etc/passwd user, `--env-file` verbatim and the image's ENV. A user's image (one that
  knows nothing of spotbench, listed in `STATE/user-images` by the test) runs the command
  given after it as a process, as `nobody` (uid 65534: not the spotbench images' uid), with
  the same mounts, `--env-file` only, and its own (real) curl.
- `docker-credential-gcr configure-docker --registries=HOST`: COS's Artifact Registry
  helper; `docker run` of a private image (pkg.dev, ECR) fails unless its registry was
  configured or `docker login` got the password ECR issues.
- `curl`: the real curl (IMDS on the hub is real HTTP) except for ECR's API, answered here
  after checking the call is SigV4-signed with the instance role's credentials, and Secret
  Manager's, whose URL is pointed at the hub's double (tests/fidelity/hub.py), and SSM's
  (tests/fidelity/aws_ssm.py: only what the role's declared policies allow; members, which
  get their entries from the function's `/keys` since issue #29, are allowed nothing).
- `systemd-run --unit=U --on-active=Ns [--timer-property=…] CMD…`: a transient timer of
  this boot (`systemctl is-active U.timer` answers for it) that runs CMD after N seconds
  unless the VM booted again meanwhile (a timer dies with its boot).
- `cos-extensions install gpu`: creates /var/lib/nvidia/{lib64,bin} as COS does; on a VM
  without GPUs nothing more (no device nodes: the lab has no GPU). On a VM the test gave
  GPUs (`boot.attach_gpus`: `STATE/gpus`, the driver's files in `STATE/driver/`) it does
  what COS's installer leaves behind: the driver's files in /var/lib/nvidia/{lib64,bin}
  (on COS's noexec /var) and the device nodes `/dev/nvidia<i>` (char 195:i), `/dev/nvidiactl`
  (195:255), `/dev/nvidia-uvm` in the VM's own /dev. Then `docker run --device` takes
  character devices only, and a container on such a VM gets docker's own /dev (a tmpfs with
  null, zero, full, random, urandom, tty, a fresh shm, and only the `--device` nodes).

Every call is appended to `STATE/calls.jsonl` (what the tests read back).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHIMS = ("docker", "systemctl", "cos-extensions", "docker-credential-gcr", "curl", "systemd-run")
ECR_PASSWORD = "sim-ecr-password"
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
VENV_BIN = Path(sys.executable).parent
# what a user's image runs as here: no ENTRYPOINT (the command is given), uid nobody
USER_IMAGE = {"user": "nobody", "uid": 65534, "entrypoint": [], "env": {}, "workdir": "/",
              "user_image": True}


def quote(arg: str) -> str:
    return shlex.quote(arg)


def launcher(name: str, state: Path) -> str:
    return (f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO)!r})\n"
            "from tests.fidelity.shims import main\n"
            f"sys.exit(main({name!r}, {str(state)!r}, sys.argv[1:]))\n")


def record(state: Path, **entry: object) -> None:
    with open(Path(state) / "calls.jsonl", "a") as fh:
        fh.write(json.dumps(entry) + "\n")


def calls(state: Path, program: str | None = None) -> list[dict]:
    path = Path(state) / "calls.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if program is None or r.get("program") == program]


# ---- systemd -----------------------------------------------------------------------------
def enabled_units(state: Path) -> list[str]:
    path = state / "enabled"
    return sorted(set(path.read_text().split())) if path.exists() else []


def running_units(state: Path) -> list[int]:
    pids = []
    for pidfile in (state / "units").glob("*.pid") if (state / "units").exists() else []:
        pid = int(pidfile.read_text())
        try:
            os.kill(pid, 0)
            pids.append(pid)
        except ProcessLookupError:
            pidfile.unlink(missing_ok=True)
    return pids


def start_unit(state: Path, unit: str) -> subprocess.Popen:
    (state / "units").mkdir(exist_ok=True)
    env = {"PATH": SYSTEMD_PATH, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.fidelity.shims", "unit", str(state), unit],
                            env=env, cwd="/")
    (state / "units" / f"{unit}.pid").write_text(str(proc.pid))
    return proc


def parse_unit(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out.setdefault(key.strip(), []).append(value.strip())
    return out


def _argv(command: str, env: dict[str, str]) -> tuple[list[str], bool]:
    """systemd's command line: `-` prefix = ignore failure; `$$` = `$`; ${VAR} expanded."""
    ignore = command.startswith("-")
    command = command.lstrip("-@:+!")
    argv = shlex.split(command)
    out = []
    for a in argv:
        a = re.sub(r"(?<!\$)\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), a)
        out.append(a.replace("$$", "$"))
    return out, ignore


def run_unit(state: Path, unit: str) -> int:
    spec = parse_unit(Path(f"/etc/systemd/system/{unit}").read_text())
    env = {"PATH": SYSTEMD_PATH, "LANG": "C.UTF-8"}
    for assignment in spec.get("Environment", []):
        for pair in shlex.split(assignment):
            k, _, v = pair.partition("=")
            env[k] = v
    log = open(state / "journal.log", "a")  # noqa: SIM115
    main_proc: list[subprocess.Popen] = []
    stopped = []

    def on_term(*_: object) -> None:
        stopped.append(True)
        if main_proc and main_proc[0].poll() is None:
            main_proc[0].send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)

    def run(phase: str, command: str, extra: dict[str, str] | None = None) -> int:
        argv, ignore = _argv(command, env)
        try:
            proc = subprocess.Popen(argv, env={**env, **(extra or {})}, stdout=log,
                                    stderr=log, stdin=subprocess.DEVNULL)
        except OSError as exc:  # what systemd logs and records (status 203/EXEC)
            log.write(f"{unit}: Failed to execute {argv[0]}: {exc.strerror}\n")
            log.flush()
            record(state, program="systemd", unit=unit, phase=phase, argv=argv, rc=203,
                   exec_error=exc.strerror)
            return 0 if ignore else 203
        if phase == "main":
            main_proc.append(proc)
        rc = proc.wait()
        record(state, program="systemd", unit=unit, phase=phase, argv=argv, rc=rc)
        return 0 if ignore else rc

    result, status = "success", 0
    try:
        for command in spec.get("ExecStartPre", []):
            if stopped:
                break
            if run("pre", command) != 0:
                result, status = "exit-code", 1
                break
        else:
            for command in spec.get("ExecStart", []):
                status = run("main", command)
                if status != 0:
                    result = "signal" if status < 0 else "exit-code"
        for command in spec.get("ExecStopPost", []):
            run("post", command, {"SERVICE_RESULT": result, "EXIT_CODE": "exited",
                                  "EXIT_STATUS": str(status)})
    finally:
        (state / "units" / f"{unit}.pid").unlink(missing_ok=True)
        record(state, program="systemd", unit=unit, phase="end", result=result, status=status)
    return 0


def systemctl(state: Path, argv: list[str]) -> int:
    record(state, program="systemctl", argv=argv)
    args = [a for a in argv if not a.startswith("--")]
    verb, units = (args[0], args[1:]) if args else ("", [])
    if verb == "daemon-reload":
        return 0
    if verb == "enable":
        with open(state / "enabled", "a") as fh:
            fh.write("".join(f"{u}\n" for u in units))
        return 0
    if verb == "disable":
        return 0 if all(Path(f"/etc/systemd/system/{u}").exists() for u in units) else 1
    if verb == "start":
        for unit in units:
            if not Path(f"/etc/systemd/system/{unit}").exists():
                print(f"Failed to start {unit}: Unit {unit} not found.", file=sys.stderr)
                return 5
            proc = start_unit(state, unit)
            if "--no-block" not in argv:
                proc.wait()
        return 0
    if verb in ("poweroff", "halt"):
        (state / "poweroff").write_text(str(time.time()))
        return 0
    if verb == "is-active":
        return 0 if all(_timer_armed(state, u) for u in units) else 3
    print(f"systemctl shim: unsupported {argv}", file=sys.stderr)
    return 1


# ---- systemd-run: transient timers of this boot ---------------------------------------------
def _boot_id(state: Path) -> str:
    path = state / "boot_id"
    return path.read_text().strip() if path.exists() else ""


def _timer_armed(state: Path, unit: str) -> bool:
    path = state / "timers" / unit.removesuffix(".timer")
    return path.exists() and json.loads(path.read_text())["boot"] == _boot_id(state)


def systemd_run(state: Path, argv: list[str]) -> int:
    record(state, program="systemd-run", argv=argv)
    unit, after, i = "", None, 0
    while i < len(argv) and argv[i].startswith("--"):
        key, _, value = argv[i].partition("=")
        if key == "--unit":
            unit = value
        elif key == "--on-active":
            after = float(value.removesuffix("s"))
        elif key != "--timer-property":
            print(f"systemd-run shim: unsupported {argv[i]}", file=sys.stderr)
            return 1
        i += 1
    command = argv[i:]
    if not unit or after is None or not command:
        print(f"systemd-run shim: needs --unit, --on-active and a command: {argv}", file=sys.stderr)
        return 1
    if _timer_armed(state, unit):
        print(f"Failed to start transient timer unit: Unit {unit}.timer already exists.",
              file=sys.stderr)
        return 1
    (state / "timers").mkdir(exist_ok=True)
    at = time.time() + after
    (state / "timers" / unit).write_text(json.dumps({"boot": _boot_id(state), "at": at,
                                                     "command": command}))
    subprocess.Popen([sys.executable, "-m", "tests.fidelity.shims", "timer", str(state), unit],
                     cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
    return 0


def fire_timer(state: Path, unit: str) -> int:
    timer = json.loads((state / "timers" / unit).read_text())
    time.sleep(max(0.0, timer["at"] - time.time()))
    if timer["boot"] != _boot_id(state):
        return 0  # the VM booted again: this boot's timer is gone
    record(state, program="systemd", unit=f"{unit}.timer", phase="elapsed", argv=timer["command"])
    return subprocess.run(timer["command"], env={"PATH": SYSTEMD_PATH}).returncode


# ---- docker ------------------------------------------------------------------------------
def dockerfile_for(image: str) -> Path | None:
    name = image.rsplit("/", 1)[-1].split("@")[0].split(":")[0]
    path = REPO / "images" / name / "Dockerfile"
    return path if path.is_file() else None


def image_config(dockerfile: Path) -> dict:
    """USER (name, uid from its `useradd --uid`), ENTRYPOINT, ENV, WORKDIR of the final stage."""
    from tests.images.test_dockerfiles import instructions

    user, entry, env, workdir, uids = None, None, {}, "/", {}
    for word, rest in instructions(dockerfile):
        if word == "FROM":
            user, entry, env, workdir = None, None, {}, "/"
        elif word == "USER":
            user = rest.split(":")[0]
        elif word == "ENTRYPOINT":
            entry = json.loads(rest)
        elif word == "WORKDIR":
            workdir = rest
        elif word == "ENV":
            for k, v in re.findall(r"(\w+)=(\"[^\"]*\"|\S+)", rest):
                env[k] = v.strip('"')
        elif word == "RUN":
            for m in re.finditer(r"useradd\s+([^&;|]*)", rest):
                words = shlex.split(m.group(1))
                uid = next((words[i + 1] for i, w in enumerate(words)
                            if w in ("--uid", "-u") and i + 1 < len(words)), None)
                if uid:
                    uids[words[-1]] = int(uid)
    return {"user": user, "uid": uids.get(user) if user else 0, "entrypoint": entry, "env": env,
            "workdir": workdir}


def parse_run(argv: list[str]) -> dict:
    out: dict = {"volumes": [], "devices": [], "gpus": None, "rm": False}
    i = 0
    with_value = {"--name": "name", "--network": "network", "--stop-timeout": "stop_timeout",
                  "--env-file": "env_file", "--gpus": "gpus"}
    while i < len(argv):
        a = argv[i]
        if a == "--rm":
            out["rm"] = True
        elif a in with_value:
            out[with_value[a]] = argv[i + 1]
            i += 1
        elif a in ("--volume", "-v"):
            out["volumes"].append(argv[i + 1])
            i += 1
        elif a == "--device":
            out["devices"].append(argv[i + 1])
            i += 1
        elif a.startswith("-"):
            raise SystemExit(f"docker shim: unknown flag {a}")
        else:
            out["image"], out["command"] = a, argv[i + 1:]
            break
        i += 1
    return out


def gpus_refused(state: Path) -> str | None:
    """What dockerd answers `docker run --gpus` on this VM, None when it would start it.
    dockerd offers `--gpus` only when nvidia-container-toolkit's `nvidia-container-runtime-hook`
    is on its PATH (moby daemon/nvidia_linux.go), which only the AMI's GPU variant carries
    (`STATE/image.json`, tests/fidelity/amis.py); the hook then needs the NVIDIA kernel module
    loaded, and the lab has no GPU."""
    path = state / "image.json"
    image = json.loads(path.read_text()) if path.exists() else {}
    if not image.get("nvidia_hook"):
        return ('docker: Error response from daemon: could not select device driver "" with '
                "capabilities: [[gpu]].")
    if not Path("/dev/nvidia0").exists():
        return ("docker: Error response from daemon: failed to create task for container: "
                "OCI runtime create failed: nvidia-container-cli: initialization error: "
                "nvml error: driver not loaded: unknown.")
    return None


def read_env_file(path: str) -> dict[str, str]:
    env = {}
    for line in Path(path).read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        env[key] = value if sep else os.environ.get(key, "")
    return env


def docker(state: Path, argv: list[str]) -> int:
    if argv[:2] == ["rm", "-f"]:
        record(state, program="docker", argv=argv)
        print(f"Error response from daemon: No such container: {argv[2]}", file=sys.stderr)
        return 1
    if argv[:1] == ["login"]:
        password = sys.stdin.read().strip()
        host = argv[-1]
        ok = (".dkr.ecr." not in host or
              (argv[1:3] == ["--username", "AWS"] and password == ECR_PASSWORD))
        record(state, program="docker", argv=argv, password_given=bool(password), ok=ok)
        if not ok:
            print("Error response from daemon: login attempt failed: no basic auth credentials",
                  file=sys.stderr)
            return 1
        login(state, host)
        return 0
    if argv[:1] != ["run"]:
        record(state, program="docker", argv=argv)
        print(f"docker shim: unsupported {argv}", file=sys.stderr)
        return 125
    run = parse_run(argv[1:])
    record(state, program="docker", argv=argv, run=run)
    dockerfile = dockerfile_for(run["image"])
    user_image = dockerfile is None and run["image"] in user_images(state)
    if dockerfile is None and not (user_image and run["command"]):
        print(f"Unable to find image '{run['image']}' (no images/<name>/Dockerfile)", file=sys.stderr)
        return 125
    network = run.get("network", "bridge")
    if network not in ("host", "bridge") or (network != "host" and not user_image):
        print(f"docker shim: --network {network}: spotbench's images need --network host, "
              "a user's image runs on host or docker's default bridge", file=sys.stderr)
        return 125
    if run["gpus"]:
        refused = gpus_refused(state)
        if refused:
            print(refused, file=sys.stderr)
            return 125
    for dev in run["devices"]:
        if not Path(dev).exists():
            print(f"docker: error gathering device information for {dev}", file=sys.stderr)
            return 125
        if not stat.S_ISCHR(os.stat(dev).st_mode) and not stat.S_ISBLK(os.stat(dev).st_mode):
            print(f"docker: error gathering device information while adding custom device "
                  f"{dev!r}: not a device node", file=sys.stderr)
            return 125
    host = run["image"].split("/", 1)[0]
    private = ".dkr.ecr." in host or host.endswith(("pkg.dev", "gcr.io"))
    if private and host not in logins(state):
        print(f"Unable to find image '{run['image']}' locally\ndocker: Error response from "
              f"daemon: pull access denied / no basic auth credentials for {host}", file=sys.stderr)
        return 125
    cfg = USER_IMAGE if dockerfile is None else image_config(dockerfile)
    env = {k: v for k, v in cfg["env"].items() if k != "PATH"}
    env.update(read_env_file(run["env_file"]))
    env.update({"PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": f"/home/{cfg['user']}",
                "HOSTNAME": os.uname().nodename, "PYTHONPATH": str(REPO)})
    if dockerfile is None:  # a user's image: nothing of this checkout on its paths
        env.update({"PATH": "/usr/local/bin:/usr/bin:/bin"})
        env.pop("PYTHONPATH")
    spec = {"run": run, "image": cfg, "env": env}
    (state / "container.json").write_text(json.dumps(spec))
    unshare = ["unshare", "--mount", "--propagation", "private"]
    if network == "bridge":  # its own network namespace, plugged into docker0 once it has it
        unshare.append("--net")
        subprocess.Popen([sys.executable, "-m", "tests.fidelity.shims", "bridge", str(state),
                          str(os.getpid())], env={"PATH": SYSTEMD_PATH, "PYTHONPATH": str(REPO)},
                         start_new_session=True, stdout=subprocess.DEVNULL)
    os.execvpe("unshare", [*unshare, sys.executable, "-m", "tests.fidelity.shims", "container",
                           str(state)], {"PATH": SYSTEMD_PATH, "PYTHONPATH": str(REPO)})
    return 127


BRIDGE_IP, BRIDGE_GATEWAY = "172.17.0.2", "172.17.0.1"  # docker0 (tests/fidelity/vm.py)


def bridge(pid: int, timeout: float = 20) -> int:
    """dockerd's part of `--network bridge`: once process `pid` (the container, after its
    `unshare --net`) has its own network namespace, a veth pair from docker0 into it."""
    own = os.stat("/proc/self/ns/net").st_ino
    deadline = time.monotonic() + timeout
    while True:
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino != own:
                break
        except FileNotFoundError:
            return 1
        if time.monotonic() > deadline:
            return 1
        time.sleep(0.02)
    host = f"sbv{pid}"[:15]
    subprocess.run(["ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns",
                    str(pid)], check=True)
    subprocess.run(["ip", "link", "set", host, "master", "docker0", "up"], check=True)
    return 0


def _bridge_inside(timeout: float = 20) -> None:
    """The container's side of docker0: its address and the gateway as default route."""
    deadline = time.monotonic() + timeout
    while subprocess.run(["ip", "link", "show", "eth0"], capture_output=True).returncode:
        if time.monotonic() > deadline:
            raise SystemExit("docker shim: the bridge never plugged eth0 in")
        time.sleep(0.02)
    for argv in (["link", "set", "lo", "up"], ["addr", "add", f"{BRIDGE_IP}/16", "dev", "eth0"],
                 ["link", "set", "eth0", "up"],
                 ["route", "add", "default", "via", BRIDGE_GATEWAY]):
        subprocess.run(["ip", *argv], check=True)


def expose_interpreter(state: Path) -> None:
    """Let the image's uid reach this checkout's Python, as it reaches the image's own.

    On a dev machine the interpreter may live under a root-only folder (~root/.pyenv); in the
    container's mount namespace that folder is replaced by a tmpfs holding only the path to
    the interpreter. An image's python (/usr/local/bin) needs no such help.
    """
    real = Path(os.path.realpath(sys.executable))
    for parent in reversed(real.parents):
        if parent == Path("/") or os.stat(parent).st_mode & 0o001:
            continue
        child = real.relative_to(parent).parts[0]
        keep = state / "keep"
        keep.mkdir(exist_ok=True)
        subprocess.run(["mount", "--bind", str(parent / child), str(keep)], check=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(parent)],
                       check=True)
        (parent / child).mkdir()
        subprocess.run(["mount", "--move", str(keep), str(parent / child)], check=True)
        return


def container(state: Path) -> int:
    """Inside the container's mount namespace: mounts, the image's user, then its ENTRYPOINT."""
    spec = json.loads((state / "container.json").read_text())
    run, image = spec["run"], spec["image"]
    uid = image["uid"]
    user = image["user"]
    if run.get("network", "bridge") == "bridge":
        _bridge_inside()
    # a container has a root file system of its own, writable and executable (the host's may
    # be read-only, its /var noexec: COS); the volumes keep their host mounts' flags, as bind
    # mounts do
    for path, flags in (("/", "rw"), ("/var", "exec")):
        subprocess.run(["mount", "-o", f"remount,bind,{flags}", path], capture_output=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/home"], check=True)
    if (state / "gpus").exists():
        docker_dev(state, run["devices"])
    home = Path(f"/home/{user}")
    home.mkdir()
    os.chown(home, uid, uid)
    passwd = state / "container-passwd"
    lines = [line for line in Path("/etc/passwd").read_text().splitlines()
             if line.split(":")[2] != str(uid)]
    passwd.write_text("\n".join([*lines, f"{user}:x:{uid}:{uid}::{home}:/bin/sh"]) + "\n")
    subprocess.run(["mount", "--bind", str(passwd), "/etc/passwd"], check=True)
    for volume in run["volumes"]:
        src, dst, *mode = volume.split(":")
        Path(dst).mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "--bind", src, dst], check=True)
        if mode == ["ro"]:
            subprocess.run(["mount", "-o", "remount,bind,ro", dst], check=True)
    if image.get("user_image"):  # the command as given, as a process
        # the image ships its own curl (here: the real one, not this VM's shim)
        for shim_dir in ("/usr/bin", "/usr/local/bin"):
            if Path(shim_dir, "curl").exists():
                subprocess.run(["mount", "--bind", str(state / "lower-usrbin" / "curl"),
                                f"{shim_dir}/curl"], check=True)
        os.chdir("/")
        os.execvpe("setpriv", ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                               "--", *run["command"]], spec["env"])
    expose_interpreter(state)
    entry = list(image["entrypoint"]) + list(run.get("command") or [])
    if Path(entry[0]).name in ("python", "python3"):
        entry[0] = sys.executable
    os.chdir(REPO)
    os.execvpe("setpriv", ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                           "--", *entry], spec["env"])
    return 127


DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")


def docker_dev(state: Path, devices: list[str]) -> None:
    """docker's /dev for a container: a tmpfs with the usual nodes, a fresh shm, the host's
    pts, and of the host's other devices only those given with `--device`."""
    host = state / "container-host-dev"
    host.mkdir(exist_ok=True)
    subprocess.run(["mount", "--rbind", "/dev", str(host)], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/dev"], check=True)
    for node in [f"/dev/{n}" for n in DEV_NODES] + list(devices):
        Path(node).touch()
        subprocess.run(["mount", "--bind", str(host / Path(node).name), node], check=True)
    Path("/dev/shm").mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm"], check=True)
    Path("/dev/pts").mkdir()
    subprocess.run(["mount", "--rbind", str(host / "pts"), "/dev/pts"], check=True)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"),
                         ("ptmx", "pts/ptmx")):
        os.symlink(target, f"/dev/{name}")


def install_gpu_driver(state: Path) -> None:
    """What COS's GPU installer leaves on a VM with GPUs (see the module's docstring)."""
    count = int((state / "gpus").read_text())
    for sub in ("lib64", "bin"):
        for src in sorted((state / "driver" / sub).glob("*")):
            shutil.copy2(src, Path("/var/lib/nvidia", sub, src.name))
    nodes = [(f"/dev/nvidia{i}", 195, i) for i in range(count)]
    nodes += [("/dev/nvidiactl", 195, 255), ("/dev/nvidia-uvm", 510, 0)]
    for path, major, minor in nodes:
        if not Path(path).exists():
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))


def user_images(state: Path) -> set[str]:
    """The users' images this VM's docker can run (the test lists them in STATE/user-images)."""
    path = state / "user-images"
    return set(path.read_text().split()) if path.exists() else set()


def logins(state: Path) -> set[str]:
    path = state / "docker-logins"
    return set(path.read_text().split()) if path.exists() else set()


def login(state: Path, host: str) -> None:
    with open(state / "docker-logins", "a") as fh:
        fh.write(host + "\n")


def curl(state: Path, argv: list[str]) -> int:
    url = next((a for a in argv if a.startswith(("http://", "https://"))), "")
    host = url.split("/")[2] if "//" in url else ""
    if host == "secretmanager.googleapis.com":
        from tests.fidelity.hub import HUB_IP, SECRETS_PORT

        local = f"http://{HUB_IP}:{SECRETS_PORT}"
        argv = [a.replace(f"https://{host}", local) if a == url else a for a in argv]
        record(state, program="curl", argv=argv, secret_manager=url)
    if host.startswith("ssm.") and host.endswith(".amazonaws.com"):
        from tests.fidelity import aws_ssm

        return aws_ssm.answer(state, argv, record)
    if not host.startswith("api.ecr."):
        os.execv(str(state / "lower-usrbin" / "curl"), ["curl", *argv])
    from tests.fidelity.hub import CREDS

    def opt(name: str) -> list[str]:
        return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == name]

    headers = dict(h.split(": ", 1) for h in opt("-H"))
    region = host.split(".")[2]
    checks = {
        "sigv4": opt("--aws-sigv4") == [f"aws:amz:{region}:ecr"],
        "user": opt("--user") == [f"{CREDS['AccessKeyId']}:{CREDS['SecretAccessKey']}"],
        "session": headers.get("X-Amz-Security-Token") == CREDS["Token"],
        "target": headers.get("X-Amz-Target", "").endswith(".GetAuthorizationToken"),
    }
    record(state, program="curl", argv=argv, ecr=checks)
    if not all(checks.values()):
        print('{"__type":"UnrecognizedClientException"}')
        return 22  # curl -f on an HTTP error
    import base64

    token = base64.b64encode(f"AWS:{ECR_PASSWORD}".encode()).decode()
    print(json.dumps({"authorizationData": [{"authorizationToken": token,
                                              "proxyEndpoint": f"https://{host}"}]}))
    return 0


def main(name: str, state: str, argv: list[str]) -> int:
    st = Path(state)
    if name == "curl":
        return curl(st, argv)
    if name == "docker-credential-gcr":
        record(st, program=name, argv=argv)
        for a in argv:
            if a.startswith("--registries="):
                for host in a.split("=", 1)[1].split(","):
                    login(st, host)
        return 0
    if name == "systemctl":
        return systemctl(st, argv)
    if name == "systemd-run":
        return systemd_run(st, argv)
    if name == "docker":
        return docker(st, argv)
    record(st, program=name, argv=argv)
    if name == "cos-extensions" and argv[:2] == ["install", "gpu"]:
        for sub in ("lib64", "bin"):  # where COS puts the driver (no device nodes here)
            Path("/var/lib/nvidia", sub).mkdir(parents=True, exist_ok=True)
        if (st / "gpus").exists():  # a VM with GPUs: the driver and its device nodes
            install_gpu_driver(st)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "unit":
        sys.exit(run_unit(Path(sys.argv[2]), sys.argv[3]))
    if sys.argv[1] == "container":
        sys.exit(container(Path(sys.argv[2])))
    if sys.argv[1] == "bridge":
        sys.exit(bridge(int(sys.argv[3])))
    if sys.argv[1] == "timer":
        sys.exit(fire_timer(Path(sys.argv[2]), sys.argv[3]))
    sys.exit(2)

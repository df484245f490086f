"""One simulated VM boot: `python -m tests.fidelity.vm STATE_DIR` run by `boot.Lab` inside the
member's own network namespace and a fresh mount + UTS namespace (root on this machine).

What the VM sees, built from the state dir (`vm.json` says cloud, hostname, ip, boot number):
- `/etc` is an overlay (upper in the state dir; wiped per boot on gcp, where COS's /etc is
  not persistent, kept on aws), with the member's own `/etc/hosts` lines (its name, and
  `metadata.google.internal` → 169.254.169.254 served by the lab's hub);
- `/var/lib` is the state dir's own (persistent) folder: `/var/lib/spotbench` is the VM's;
- `/usr/bin` (and `/usr/local/bin`) are overlays holding the shims (`docker`, `systemctl`, `cos-extensions`,
  `docker-credential-gcr`) written by `boot.Lab`;
- `/proc/sys/kernel/random/boot_id` is a fresh id per boot;
- a VM with GPUs attached (`STATE/gpus`, written by `boot.attach_gpus`) has a `/dev` of its
  own (an overlay on this machine's, its submounts bound back), where the driver's installer
  (the `cos-extensions` shim) makes the NVIDIA device nodes, as on the cloud;
- on gcp, Container-Optimized OS's file system (`cos_mounts`): `/var` and `/home` noexec
  except COS's executable folders (`/var/lib/{google,docker,toolbox}`, `/var/lib/cloud`),
  the root file system read-only;
- its host firewall (`host_firewall`), rebuilt at each boot as a reboot does: on gcp COS's
  INPUT policy (drop, except ESTABLISHED/RELATED, lo, ICMP and ssh on 22), on aws none
  (AL2023 ships no host firewall rules); on both the network dockerd sets up when it starts
  (`docker0` 172.17.0.1/16, FORWARD policy drop, the `DOCKER-USER` chain first in FORWARD,
  masquerade of the bridge), so a container on docker's bridge reaches out through NAT.

Then it does what cloud-init does with the user-data (write_files with their modes and
owners, then runcmd as one `/bin/sh` script) — every boot on gcp (COS re-applies them),
the first boot only on aws — starts the units `systemctl enable`d earlier (systemd would at
boot), and waits for the units to end. SIGTERM (the instance being stopped) is passed to
the running units, as systemd does at shutdown.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import yaml

from tests.fidelity import shims


def sh(*argv: str) -> None:
    subprocess.run(list(argv), check=True)


def overlay(target: str, state: Path, name: str, fresh: bool) -> Path:
    upper, work = state / f"{name}-upper", state / f"{name}-work"
    if fresh:
        shutil.rmtree(upper, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    upper.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    sh("mount", "-t", "overlay", "overlay", "-o",
       f"lowerdir={target},upperdir={upper},workdir={work}", target)
    return upper


# COS: what `iptables -S` shows on a fresh boot (INPUT policy drop; ssh, ICMP, loopback and
# replies to the host's own connections only); AL2023: no rules.
COS_FILTER = """:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -i lo -j ACCEPT
-A INPUT -p icmp -j ACCEPT
-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT
"""
AL2023_FILTER = """:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
"""
DOCKER_BRIDGE, DOCKER_GATEWAY = "172.17.0.0/16", "172.17.0.1"
# what dockerd adds when it starts (bridge driver, iptables on): its user chain first
DOCKERD_FILTER = """:DOCKER-USER - [0:0]
-P FORWARD DROP
-A FORWARD -j DOCKER-USER
-A FORWARD -i docker0 ! -o docker0 -j ACCEPT
-A FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
"""
DOCKERD_NAT = f"""*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A POSTROUTING -s {DOCKER_BRIDGE} ! -o docker0 -j MASQUERADE
COMMIT
"""
# COS's executable, stateful folders under the noexec /var (/var/lib/cloud, executable and
# stateless, is a tmpfs of its own)
COS_EXEC_VAR = ("/var/lib/google", "/var/lib/docker", "/var/lib/toolbox")


def host_firewall(cos: bool) -> None:
    """The host's iptables as a fresh boot has them (the netns outlives a lab reboot, its
    rules must not: `iptables-restore` replaces the whole tables), then dockerd's."""
    base = COS_FILTER if cos else AL2023_FILTER
    rules = "*filter\n" + base + DOCKERD_FILTER + "COMMIT\n" + DOCKERD_NAT
    subprocess.run(["iptables-restore"], input=rules, text=True, check=True)
    if subprocess.run(["ip", "link", "show", "docker0"], capture_output=True).returncode:
        sh("ip", "link", "add", "docker0", "type", "bridge")
        sh("ip", "addr", "add", f"{DOCKER_GATEWAY}/16", "dev", "docker0")
    sh("ip", "link", "set", "docker0", "up")
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")


def remount(path: str, flags: str) -> None:
    sh("mount", "--bind", path, path)
    sh("mount", "-o", f"remount,bind,{flags}", path)


def cos_mounts(state: Path) -> None:
    """Container-Optimized OS's file system, in this boot's mount namespace: /var and /home
    writable but noexec (stateful: the state dir's folders), COS's executable /var/lib
    folders, /var/lib/cloud a fresh tmpfs (stateless), the root file system read-only.
    /tmp stays as it is (the lab's own folders live there; COS's is a noexec tmpfs)."""
    home = state / "home"
    home.mkdir(exist_ok=True)
    sh("mount", "--bind", str(home), "/home")
    sh("mount", "-o", "remount,bind,noexec,nosuid,nodev", "/home")
    remount("/var", "noexec,nosuid,nodev")
    sh("mount", "--bind", str(state / "var-lib"), "/var/lib")
    sh("mount", "-o", "remount,bind,noexec,nosuid,nodev", "/var/lib")
    for path in COS_EXEC_VAR:
        Path(path).mkdir(parents=True, exist_ok=True)
        remount(path, "exec")
    Path("/var/lib/cloud").mkdir(exist_ok=True)
    sh("mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/var/lib/cloud")
    remount("/tmp", "exec")  # a mount of its own, so it stays writable below
    sh("mount", "-o", "remount,bind,ro", "/")


def private_dev(state: Path) -> None:
    """This boot's own /dev (GPU VMs): an overlay on the machine's (upper on a tmpfs, which
    takes device nodes), /dev/pts, /dev/shm, /dev/mqueue bound back; nodes made in it stay
    in this boot's mount namespace."""
    keep, rw = state / "machine-dev", state / "dev-rw"
    for path in (keep, rw):
        path.mkdir(exist_ok=True)
    sh("mount", "--rbind", "/dev", str(keep))
    sh("mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(rw))
    (rw / "upper").mkdir()
    (rw / "work").mkdir()
    sh("mount", "-t", "overlay", "overlay", "-o",
       f"lowerdir=/dev,upperdir={rw / 'upper'},workdir={rw / 'work'}", "/dev")
    for sub in ("pts", "shm", "mqueue"):
        if os.path.ismount(keep / sub):
            sh("mount", "--rbind", str(keep / sub), f"/dev/{sub}")


def chown_by_name(path: Path, owner: str) -> None:
    """cloud-init's `owner: user[:group]` (names, resolved on the host)."""
    user, _, group = owner.partition(":")
    uid = pwd.getpwnam(user).pw_uid if user else -1
    gid = grp.getgrnam(group).gr_gid if group else -1
    os.chown(path, uid, gid)


def cloud_init(userdata: str, journal: Path) -> int:
    assert userdata.startswith("#cloud-config\n"), "user-data must start with #cloud-config"
    doc = yaml.safe_load(userdata) or {}
    for f in doc.get("write_files", []):
        path = Path(f["path"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f.get("content", ""))
        os.chmod(path, int(str(f.get("permissions", "0644")), 8))
        chown_by_name(path, f.get("owner", "root:root"))
    script = "#!/bin/sh\n" + "".join(
        (c if isinstance(c, str) else " ".join(map(shims.quote, c))) + "\n"
        for c in doc.get("runcmd", []))
    with open(journal, "a") as log:
        return subprocess.run(["/bin/sh", "-c", script], stdout=log, stderr=log).returncode


def main(state: Path) -> int:
    vm = json.loads((state / "vm.json").read_text())
    boot = int(vm["boot"])
    journal = state / "journal.log"
    sh("hostname", vm["hostname"])
    gcp = vm["cloud"] == "gcp"
    overlay("/etc", state, "etc", fresh=gcp)
    with open("/etc/hosts", "a") as hosts:
        hosts.write(f"{vm['ip']} {vm['hostname']}\n169.254.169.254 metadata.google.internal\n")
    varlib = state / "var-lib"
    varlib.mkdir(exist_ok=True)
    if (state / "gpus").exists():
        private_dev(state)
    if gcp:
        cos_mounts(state)
    else:
        sh("mount", "--bind", str(varlib), "/var/lib")
    host_firewall(cos=gcp)
    lower = state / "lower-usrbin"  # the real programs, for shims that pass through (curl)
    lower.mkdir(exist_ok=True)
    sh("mount", "--bind", "/usr/bin", str(lower))
    uppers = [overlay("/usr/bin", state, "usrbin", fresh=True)]
    if Path("/usr/local/bin").is_dir():  # earlier on PATH: shadow this machine's own tools
        uppers.append(overlay("/usr/local/bin", state, "usrlocalbin", fresh=True))
    for upper in uppers:
        for name in shims.SHIMS:
            target = upper / name
            target.write_text(shims.launcher(name, state))
            target.chmod(0o755)
    boot_id = state / "boot_id"
    boot_id.write_text(f"{uuid.uuid4()}\n")
    sh("mount", "--bind", str(boot_id), "/proc/sys/kernel/random/boot_id")
    with open(journal, "a") as log:
        log.write(f"--- boot {boot} of {vm['hostname']}\n")

    runners: list[subprocess.Popen] = []
    stopping = []

    def on_term(*_: object) -> None:
        stopping.append(True)
        for proc in shims.running_units(state):
            try:
                os.kill(proc, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, on_term)
    if gcp or not (state / "cloud-init.done").exists():
        rc = cloud_init((state / "user-data").read_text(), journal)
        (state / "cloud-init.done").write_text(str(rc))
    for unit in shims.enabled_units(state):
        runners.append(shims.start_unit(state, unit))
    # units started by `systemctl start` (runcmd) run as children of the shim: wait for all
    while True:
        alive = shims.running_units(state)
        if not alive:
            break
        if (state / "poweroff").exists() and not stopping:
            on_term()
        time.sleep(0.2)
    for r in runners:
        r.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))

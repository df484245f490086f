"""The cloud-init user-data of one VM (Container-Optimized OS).

It writes the container's env file (the member's `SPOTBENCH_CONTEXT` and friends), the MPI
ssh public keys when given — the private ones (and a `container` group's secret env) are
fetched from the sweep's `grant` function by `fetch-keys` (`fetch_keys_script`) before each
start, with the VM's instance identity token (the function hands them to that group's
instances only), never written into the metadata — and a systemd unit that — on every boot, since COS re-applies
cloud-init's write_files/runcmd on each boot (its /etc is not persistent) — installs the
GPU driver (`cos-extensions install gpu`) when a GPU is attached, then runs the workload
image with `docker run --network host --env-file …`. COS's host file system and firewall
shape it (docs/platform.md, "The boot image"): `/var` is noexec, so the unit runs its
scripts through `/bin/sh`; the host firewall admits only ssh, so the unit opens it to the
group's peers at every start (`host_firewall`). `docker run` stays in the foreground,
so the ACPI shutdown of a preemption reaches the workload as SIGTERM (GCE allows ~30 s).
Not `gce-container-declaration` (deprecated).
"""

from __future__ import annotations

import ipaddress
import shlex
from collections.abc import Mapping, Sequence

from spotbench import limits
from spotbench.image_ref import check_image

from infra import cloud_config, user_image as ui
from infra.gcp.network import IAP_RANGE
from infra.keys import FETCH_KEYS_PREAMBLE, SSH_DIR_IN_CONTAINER, SshKeys, key_owner_command, ssh_files
from infra.units import env_file, workload_unit

STATE_DIR = "/var/lib/spotbench"
ENV_FILE = f"{STATE_DIR}/env"
SSH_DIR = f"{STATE_DIR}/ssh"
FETCH_KEYS = f"{STATE_DIR}/fetch-keys"
PICK_MEMBER = f"{STATE_DIR}/pick-member"
METADATA_NAME = "http://metadata.google.internal/computeMetadata/v1/instance/name"
METADATA_IDENTITY = ("http://metadata.google.internal/computeMetadata/v1/instance/"
                     "service-accounts/default/identity")
UNIT = "spotbench.service"
CONTAINER = "spotbench"
IPTABLES = "/sbin/iptables"


def docker_command(image: str, *, gpu_count: int, ssh: bool, name: str = CONTAINER,
                   env: str = ENV_FILE, volumes: tuple[str, ...] = (),
                   network: str = "host") -> list[str]:
    cmd = ["/usr/bin/docker", "run", "--rm", "--name", name, "--network", network,
           "--stop-timeout", "25", "--env-file", env]
    if ssh:
        cmd += ["--volume", f"{SSH_DIR}:{SSH_DIR_IN_CONTAINER}:ro"]
    for volume in volumes:
        cmd += ["--volume", volume]
    if gpu_count:
        cmd += ["--volume", "/var/lib/nvidia/lib64:/usr/local/nvidia/lib64",
                "--volume", "/var/lib/nvidia/bin:/usr/local/nvidia/bin",
                "--device", "/dev/nvidia-uvm", "--device", "/dev/nvidiactl"]
        for i in range(gpu_count):
            cmd += ["--device", f"/dev/nvidia{i}"]
    return cmd + [shlex.quote(check_image(image))]


def fetch_keys_script(secrets: Mapping[str, str], grant_url: str, ssh_dir: str = SSH_DIR,
                      files: Mapping[str, str] | None = None) -> str:
    """The boot step that puts the group's private keys in `ssh_dir`, 0600: the VM's instance
    identity token (`format=full`, audience = the grant URL) from the metadata server, then
    each file (`secrets`: key file name → the file's id at the `grant` function) as the
    `data` (base64) of the function's JSON answer. COS has curl, sed and base64 (no jq, no
    python). Any failure stops the unit before the container starts and powers the VM off
    (it would otherwise idle, billing, until `max_run_duration`). A guest power-off only
    stops a VM, whatever its termination action: in the created lifecycle the stopped member
    (its disk) is deleted by the next stop or at `max_run_duration` (DELETE)."""
    fetches = "".join(f"fetch {shlex.quote(file_id)} {shlex.quote(f'{ssh_dir}/{key_file}')}\n"
                      for key_file, file_id in sorted(secrets.items()))
    # `files`: absolute path → file id (a `container` group's env file, infra/user_image.py)
    fetches += "".join(f"fetch {shlex.quote(file_id)} {shlex.quote(path)}\n"
                       for path, file_id in sorted((files or {}).items()))
    identity = f"{METADATA_IDENTITY}?audience={grant_url}&format=full"
    return f"""#!/bin/sh
# spotbench: this run group's ssh private keys (and secret env), from the sweep's grant
# function (it answers this instance with its own group's only), into {ssh_dir} (mode 0600;
# the unit then gives them to the image's user).
set -eu
umask 077
{FETCH_KEYS_PREAMBLE}token=$(curl -fsS --retry 10 --retry-connrefused --retry-delay 2 -H 'Metadata-Flavor: Google' \\
  {shlex.quote(identity)})
if [ -z "$token" ]; then
  echo "spotbench: the metadata server gave no identity token" >&2
  exit 1
fi
fetch() {{
  # every error retried for about a minute: the function may be starting
  answer=$(curl -fsS --retry 12 --retry-all-errors --retry-delay 5 -X POST \\
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \\
    --data "{{\\"file\\": \\"$1\\"}}" {shlex.quote(grant_url)})
  printf '%s\\n' "$answer" | sed -n 's/.*"data" *: *"\\([^"]*\\)".*/\\1/p' | base64 -d > "$2.new"
  if [ ! -s "$2.new" ]; then
    echo "spotbench: file $1 is empty or not granted" >&2
    exit 1
  fi
  mv -f "$2.new" "$2"
}}
mkdir -p {shlex.quote(ssh_dir)}
{fetches}"""


GROUP_ENV_FILE = f"{ENV_FILE}.group"
METADATA_FLAGS = {"google-logging-enabled": "true", "enable-oslogin": "TRUE",
                  "block-project-ssh-keys": "TRUE"}  # every VM's and template's other keys


def check_metadata(where: str, document: str) -> None:
    """A VM's (or template's) metadata within GCE's limits: the boot document as one value,
    and every key and value together (spotbench.limits)."""
    limits.require("gce.metadata.value", f"{where}: metadata user-data", limits.nbytes(document))
    items = {"user-data": document, **METADATA_FLAGS}
    limits.require("gce.metadata.total", f"{where}: metadata", limits.metadata_bytes(items))


def check_names(where: str, name: str, labels: Mapping[str, str]) -> None:
    """A GCE resource's name and label count within GCE's limits (spotbench.limits)."""
    limits.require("gce.name", f"{where}: name {name}", len(name))
    limits.require("gce.labels.count", f"{where}: labels", len(labels))


def pick_member_script(members: Mapping[str, Mapping[str, str]] | Sequence[str]) -> str:
    """The ExecStartPre script of a VM made from a template (`lifecycle: created`): the
    template carries the group's env file once (`env.group`) and, per member, the few lines
    that are its own (`members`: name → `SPOTBENCH_MEMBER`, role, rank); the instance's own
    name, from the metadata server, picks them: the container's env file is the group's plus
    its own lines. A name that is no member of the template stops the unit. Linear in the
    members (each member's whole env would make one document grow with the square)."""
    own = members if isinstance(members, Mapping) else {n: {} for n in members}
    for n in own:  # lands in a root script: member names only ([a-z0-9-])
        if not n or not all(c.isalnum() or c == "-" for c in n) or n.lower() != n:
            raise ValueError(f"member name {n!r} is not a GCE instance name")
    cases = "".join(
        f"  {n}) cp -f {GROUP_ENV_FILE} {ENV_FILE}.new"
        + "".join(f" && printf '%s\\n' {shlex.quote(f'{k}={v}')} >> {ENV_FILE}.new"
                  for k, v in lines.items())
        + f" && mv -f {ENV_FILE}.new {ENV_FILE} ;;\n"
        for n, lines in own.items())
    return (f"name=$(curl -fsS --retry 5 -H 'Metadata-Flavor: Google' {METADATA_NAME})\n"
            f'umask 077\ncase "$name" in\n{cases}'
            f'  *) echo "spotbench: instance $name is no member of this template" >&2; exit 1 ;;\n'
            "esac\n")


def host_firewall(peers: Sequence[str], operator_ports: Sequence[str]) -> list[str]:
    """ExecStartPre commands opening COS's host firewall to what the group needs. COS drops
    every inbound connection but ssh on 22 (and replies), and `docker run --network host`
    puts the workload behind it; rules made with iptables last until the next reboot, so
    the unit adds them at each start: TCP and UDP from each peer of the group, any port
    (MPI and TF listen on ephemeral ports), as the group's VPC rule does, and the operator's
    ports other than 22 (an MPI workload's sshd) from IAP's forwarding range."""
    lines = []
    for peer in peers:  # an address, or a range (created VMs: the sweep's subnet)
        # lands in a root unit: an address or a network, nothing else
        address = ipaddress.ip_network(peer if "/" in peer else f"{peer}/32")
        for protocol in ("tcp", "udp"):
            lines.append(f"{IPTABLES} -w -A INPUT -s {address} -p {protocol} -j ACCEPT")
    ports = [str(int(p)) for p in operator_ports if str(p) != "22"]  # 22: open on COS
    if ports:
        lines.append(f"{IPTABLES} -w -A INPUT -s {IAP_RANGE} -p tcp -m multiport "
                     f"--dports {','.join(ports)} -j ACCEPT")
    return lines


def _unit(image: str, *, gpu_count: int, ssh: bool, user: ui.UserStep | None = None,
          fetch: bool = False, firewall: Sequence[str] = (), pick: bool = False) -> str:
    images = [image] + ([user.image] if user else [])
    registries = sorted({i.split("/", 1)[0] for i in images if "/" in i})
    pre = ([f"/bin/sh {PICK_MEMBER}"] if pick else []) + list(firewall)
    if gpu_count:
        pre += ["/usr/bin/cos-extensions install gpu",
                "/bin/mount --bind /var/lib/nvidia /var/lib/nvidia",
                "/bin/mount -o remount,exec /var/lib/nvidia"]
    for registry in registries:
        if registry.endswith(("pkg.dev", "gcr.io")):
            pre.append("/usr/bin/docker-credential-gcr configure-docker "
                       f"--registries={shlex.quote(registry)}")
    if fetch:  # /var is noexec on COS: through its interpreter
        pre.append(f"/bin/sh {FETCH_KEYS}")
    if ssh:
        pre.append(key_owner_command(SSH_DIR))
    pre.append(f"-/usr/bin/docker rm -f {CONTAINER}")
    start = docker_command(image, gpu_count=gpu_count, ssh=ssh)
    if user:  # the user's image runs the command; this image (the runner) checks and collects
        pre.append(f"-/usr/bin/docker rm -f {ui.CONTAINER}")
        start = ["/bin/sh", ui.SCRIPT]
    return workload_unit(pre=pre, start=start, home=STATE_DIR, timeout_stop_s=28)


def user_data(
    *, image: str, env: Mapping[str, str], gpu_count: int = 0, ssh: SshKeys | None = None,
    user: ui.UserStep | None = None, secrets: Mapping[str, str] | None = None,
    peers: Sequence[str] = (), operator_ports: Sequence[str] = (),
    user_env_secret: str | None = None, grant_url: str = "",
    member_envs: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """The `#cloud-config` document for one member (`image` must be a valid OCI reference:
    it lands in a root systemd unit). `user`: the user's own image runs the command first
    and `image` (spotbench's runner) checks and collects around it (infra/user_image.py).
    With `secrets` (key file name → its file id at the `grant` function, `grant_url`) the
    private keys are fetched at boot instead of written here; `user_env_secret` (the file id
    of the user's env file, required when `user.secret`) likewise. `peers`: the other members'
    addresses and `operator_ports` the ports operators reach through IAP, which the host
    firewall opens (`host_firewall`)."""
    check_image(image)
    if user is not None and user.secret and not user_env_secret:
        raise ValueError("the user's env holds secret values: give user_env_secret (they never "
                         "go in the metadata)")
    fetched = {ui.ENV_FILE: user_env_secret} if user is not None and user.secret else {}
    if member_envs:  # a template's document: the group's env once, each member's own lines
        files = [{"path": GROUP_ENV_FILE, "permissions": "0600", "owner": "root",
                  "content": env_file(env)},
                 {"path": PICK_MEMBER, "permissions": "0700", "owner": "root",
                  "content": pick_member_script(member_envs)}]
    else:
        files = [{"path": ENV_FILE, "permissions": "0600", "owner": "root",
                  "content": env_file(env)}]
    if ssh:
        files += ssh_files(SSH_DIR, ssh, private=not secrets)
    if (ssh and secrets) or fetched:
        files.append({"path": FETCH_KEYS, "permissions": "0700", "owner": "root",
                      "content": fetch_keys_script(secrets if ssh and secrets else {},
                                                   grant_url, files=fetched)})
    if user:
        files += ui.write_files(
            user, runner=docker_command(image, gpu_count=0, ssh=False, volumes=ui.RUNNER_VOLUMES),
            user=docker_command(user.image, gpu_count=gpu_count, ssh=False, name=ui.CONTAINER,
                                env=ui.ENV_FILE, volumes=ui.USER_VOLUMES,
                                network=ui.USER_NETWORK))
    files.append({"path": f"/etc/systemd/system/{UNIT}", "permissions": "0644",
                  "content": _unit(image, gpu_count=gpu_count, ssh=ssh is not None, user=user,
                                   fetch=bool(ssh and secrets) or bool(fetched),
                                   firewall=host_firewall(peers, operator_ports),
                                   pick=bool(member_envs))})
    doc = {
        "write_files": files,
        "runcmd": ["systemctl daemon-reload", f"systemctl start --no-block {UNIT}"],
    }
    # multi-line strings as `|` blocks, so the user-data reads like the files it writes
    return cloud_config.render(doc, literal=True)

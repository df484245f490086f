"""The cloud-init user-data of one VM (Container-Optimized OS).

It writes the container's env file (the member's `SPOTBENCH_CONTEXT` and friends), the MPI
ssh keys when given, and a systemd unit that — on every boot, since COS re-applies
cloud-init's write_files/runcmd on each boot (its /etc is not persistent) — installs the
GPU driver (`cos-extensions install gpu`) when a GPU is attached, then runs the workload
image with `docker run --network host --env-file …`. `docker run` stays in the foreground,
so the ACPI shutdown of a preemption reaches the workload as SIGTERM (GCE allows ~30 s).
Not `gce-container-declaration` (deprecated).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

import yaml

from spotbench.image_ref import check_image

from infra import user_image as ui
from infra.keys import SSH_DIR_IN_CONTAINER, SshKeys, key_owner_command, ssh_files
from infra.units import env_file, workload_unit

STATE_DIR = "/var/lib/spotbench"
ENV_FILE = f"{STATE_DIR}/env"
SSH_DIR = f"{STATE_DIR}/ssh"
UNIT = "spotbench.service"
CONTAINER = "spotbench"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as `|` blocks, so the user-data reads like the files it writes."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def docker_command(image: str, *, gpu_count: int, ssh: bool, name: str = CONTAINER,
                   env: str = ENV_FILE, volumes: tuple[str, ...] = ()) -> list[str]:
    cmd = ["/usr/bin/docker", "run", "--rm", "--name", name, "--network", "host",
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


def _unit(image: str, *, gpu_count: int, ssh: bool, user: ui.UserStep | None = None) -> str:
    images = [image] + ([user.image] if user else [])
    registries = sorted({i.split("/", 1)[0] for i in images if "/" in i})
    pre = []
    if gpu_count:
        pre += ["/usr/bin/cos-extensions install gpu",
                "/bin/mount --bind /var/lib/nvidia /var/lib/nvidia",
                "/bin/mount -o remount,exec /var/lib/nvidia"]
    for registry in registries:
        if registry.endswith(("pkg.dev", "gcr.io")):
            pre.append("/usr/bin/docker-credential-gcr configure-docker "
                       f"--registries={shlex.quote(registry)}")
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
    user: ui.UserStep | None = None,
) -> str:
    """The `#cloud-config` document for one member (`image` must be a valid OCI reference:
    it lands in a root systemd unit). `user`: the user's own image runs the command first
    and `image` (spotbench's runner) checks and collects around it (infra/user_image.py)."""
    check_image(image)
    files = [{"path": ENV_FILE, "permissions": "0600", "owner": "root", "content": env_file(env)}]
    if ssh:
        files += ssh_files(SSH_DIR, ssh)
    if user:
        files += ui.write_files(
            user, runner=docker_command(image, gpu_count=0, ssh=False, volumes=ui.RUNNER_VOLUMES),
            user=docker_command(user.image, gpu_count=gpu_count, ssh=False, name=ui.CONTAINER,
                                env=ui.ENV_FILE, volumes=ui.USER_VOLUMES))
    files.append({"path": f"/etc/systemd/system/{UNIT}", "permissions": "0644",
                  "content": _unit(image, gpu_count=gpu_count, ssh=ssh is not None, user=user)})
    doc = {
        "write_files": files,
        "runcmd": ["systemctl daemon-reload", f"systemctl start --no-block {UNIT}"],
    }
    return "#cloud-config\n" + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=10_000)

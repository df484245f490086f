"""The cloud-init user-data of one member (the ECS-optimized Amazon Linux 2023 AMI: docker
preinstalled; its GPU variant adds the NVIDIA driver and nvidia-container-toolkit, whose
kernel module `GPU_DRIVER_UNIT` loads at boot; cloud-init 22.2: docs/platform.md).

First boot (at `pulumi up`; it ends with cloud-init powering the instance off) only
*installs*: the
container's env file (the member's `SPOTBENCH_CONTEXT` and friends), the MPI ssh *public*
key files when given, and a systemd unit, enabled but not run — the unit refuses to start in the boot
whose id was recorded at install, so creating the stack never runs (or bills as a run) a
benchmark. Every later boot — each scheduler or control start — runs the workload image
with `docker run --network host --env-file …` in the foreground, so stopping the instance
(done, deadline, or a spot interruption with `stop` behaviour) reaches the workload as
SIGTERM with time to store what it has.

ECR login uses only what the ECS-optimized AMIs ship (curl ≥ 7.75, sed, base64, docker):
`ecr-login` reads the instance role's credentials from IMDSv2 and calls ECR's
GetAuthorizationToken signed with `curl --aws-sigv4` — those AMIs have no `aws` CLI.
The group's ssh private keys are never in user-data (readable through
`DescribeInstanceAttribute` and IMDS): the unit's `fetch-keys` step asks the sweep's function
for them the same way (a POST to its URL's `/keys`, signed with the instance role; the
function derives the group's keys from the sweep's one seed, infra/aws/secrets.py) into the key folder, 0600,
before the folder is handed to the image's uid.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

import yaml

from spotbench.auth.group_keys import KEY_FILES
from spotbench import limits
from spotbench.image_ref import check_image

from infra import cloud_config, user_image as ui
from infra.keys import FETCH_KEYS_PREAMBLE, SSH_DIR_IN_CONTAINER, SshKeys, key_owner_command, ssh_files
from infra.units import env_file, workload_unit
from infra.aws.secrets import USER_ENV

STATE_DIR = "/var/lib/spotbench"
ENV_FILE = f"{STATE_DIR}/env"
SSH_DIR = f"{STATE_DIR}/ssh"
FIRST_BOOT = f"{STATE_DIR}/first-boot-id"
ECR_LOGIN = f"{STATE_DIR}/ecr-login"
FETCH_KEYS = f"{STATE_DIR}/fetch-keys"
IMDS = "http://169.254.169.254/latest"
UNIT = "spotbench.service"
CONTAINER = "spotbench"
STOP_TIMEOUT_S = 90  # EC2 gives a stopping instance ~2 min; keep inside it
# The dead-man switch: every boot that runs the workload powers itself off this long after
# the unit starts, deadline + grace, whether or not the stop tick or `done` ever arrives (EC2
# has no run-duration limit; GCE's max_run_duration is this switch's counterpart)
DEADMAN_UNIT = "spotbench-deadline"
DEADMAN_GRACE_S = 300  # the stop tick's own retries and the workload's 90 s to store
# The ECS-optimized AL2023 GPU AMI loads the NVIDIA kernel module at boot from this unit
# (its open, proprietary or GRID build, chosen by the GPU's PCI ids), ordered before
# ecs.service only; a GPU member's unit waits for it, or `docker run --gpus` races the load
GPU_DRIVER_UNIT = "nvidia-kmod-load.service"


def deadman_command(max_run_s: int) -> str:
    """ExecStartPre arming a transient systemd timer (`systemd-run --on-active`, systemd ≥
    218: AL2023 ships 252) that powers the instance off `max_run_s` after this boot's
    unit started; a second start in the same boot keeps the first timer."""
    arm = (f"systemctl is-active --quiet {DEADMAN_UNIT}.timer || systemd-run "
           f"--unit={DEADMAN_UNIT} --on-active={int(max_run_s)}s "
           "--timer-property=AccuracySec=1s /usr/bin/systemctl poweroff")
    return f"/bin/sh -c {shlex.quote(arm)}"


def ecr_registry(image: str) -> tuple[str, str] | None:
    """(registry host, region) when `image` lives in ECR."""
    host = image.split("/", 1)[0]
    if ".dkr.ecr." in host and host.endswith(".amazonaws.com"):
        return host, host.split(".")[3]
    return None


# the instance role's credentials from IMDSv2, as key/secret/session (sh, `set -eu`)
_IMDS_CREDENTIALS = f"""imds={IMDS}
token=$(curl -fsS -X PUT "$imds/api/token" -H "X-aws-ec2-metadata-token-ttl-seconds: 300")
role=$(curl -fsS -H "X-aws-ec2-metadata-token: $token" "$imds/meta-data/iam/security-credentials/")
creds=$(curl -fsS -H "X-aws-ec2-metadata-token: $token" "$imds/meta-data/iam/security-credentials/$role" | tr -d '\\n')
field() {{ printf '%s' "$creds" | sed -n "s/.*\\"$1\\" *: *\\"\\([^\\"]*\\)\\".*/\\1/p"; }}
key=$(field AccessKeyId)
secret=$(field SecretAccessKey)
session=$(field Token)
"""


def ecr_login_script(host: str, region: str) -> str:
    """`docker login` to ECR with the instance role, with curl only (no `aws` CLI)."""
    target = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"
    return f"""#!/bin/sh
# docker login to {host} with the instance role (written by spotbench's user-data).
# The ECS-optimized AMI has no aws CLI: IMDSv2 credentials + ECR GetAuthorizationToken
# signed by curl --aws-sigv4.
set -eu
{_IMDS_CREDENTIALS}answer=$(curl -fsS --aws-sigv4 "aws:amz:{region}:ecr" --user "$key:$secret" \\
  -H "X-Amz-Security-Token: $session" -H "X-Amz-Target: {target}" \\
  -H "Content-Type: application/x-amz-json-1.1" -d '{{}}' "https://api.ecr.{region}.amazonaws.com/")
printf '%s' "$answer" | sed -n 's/.*"authorizationToken" *: *"\\([^"]*\\)".*/\\1/p' | base64 -d \\
  | cut -d: -f2- | docker login --username AWS --password-stdin {host}
"""


def fetch_keys_script(region: str, keys_url: str, files: Mapping[str, str],
                      ssh_dir: str = SSH_DIR) -> str:
    """Put the group's entries (`files`: entry name → where it goes, e.g. the ssh private
    keys in the key folder) on disk, 0600, from the sweep's function: a POST to its URL's
    `/keys` path (`keys_url`) signed with the instance role by curl --aws-sigv4 (service
    `lambda`); the function answers the calling instance's own group's entries only
    (`{"group": …, "files": {name: base64}}`, functions/aws_grants.py). An entry already
    there is kept (the disk outlives a stop). Refusals and network errors are retried for
    about a minute; then the VM powers itself off (it would otherwise idle, billing, until
    the deadline stop)."""
    writes = "".join(f"put {shlex.quote(name)} {shlex.quote(path)}\n"
                     for name, path in sorted(files.items()))
    present = " && ".join(f"[ -s {shlex.quote(path)} ]" for _, path in sorted(files.items()))
    return f"""#!/bin/sh
# The run group's secret entries (ssh private keys, a container's env) from the sweep's
# function (written by spotbench's user-data; the entries themselves are never in
# user-data). IMDSv2 credentials + a POST to the function URL's /keys path signed by curl
# --aws-sigv4: the AMI has no aws CLI.
set -eu
umask 077
{FETCH_KEYS_PREAMBLE}if {present or 'false'}; then exit 0; fi
{_IMDS_CREDENTIALS}tries=0
until answer=$(curl -fsS --aws-sigv4 "aws:amz:{region}:lambda" --user "$key:$secret" \\
    -H "X-Amz-Security-Token: $session" -H "Content-Type: application/json" \\
    -d '{{}}' {shlex.quote(keys_url)}); do
  tries=$((tries + 1))
  [ "$tries" -lt 6 ] || {{ echo "fetch-keys: the function refused or is unreachable" >&2; exit 1; }}
  sleep 10
done
put() {{
  [ -s "$2" ] && return 0
  printf '%s' "$answer" | sed -n "s/.*\\"$1\\" *: *\\"\\([^\\"]*\\)\\".*/\\1/p" | base64 -d > "$2.tmp"
  [ -s "$2.tmp" ] || {{ echo "fetch-keys: no entry $1 for this group" >&2; exit 1; }}
  mv "$2.tmp" "$2"
}}
mkdir -p {shlex.quote(ssh_dir)}
{writes}"""


def docker_command(image: str, *, gpu: bool, ssh: bool, name: str = CONTAINER,
                   env: str = ENV_FILE, volumes: tuple[str, ...] = (),
                   network: str = "host") -> list[str]:
    cmd = ["/usr/bin/docker", "run", "--rm", "--name", name, "--network", network,
           "--stop-timeout", str(STOP_TIMEOUT_S), "--env-file", env]
    if ssh:
        cmd += ["--volume", f"{SSH_DIR}:{SSH_DIR_IN_CONTAINER}:ro"]
    for volume in volumes:
        cmd += ["--volume", volume]
    if gpu:
        cmd += ["--gpus", "all"]  # the AL2023 GPU AMI's nvidia-container-toolkit serves it
    return cmd + [shlex.quote(check_image(image))]


def unit(image: str, *, gpu: bool, ssh: bool, user: ui.UserStep | None = None,
         fetch: bool = False, max_run_s: int | None = None) -> str:
    not_first_boot = f"! /usr/bin/cmp -s /proc/sys/kernel/random/boot_id {FIRST_BOOT}"
    pre = [f"/bin/sh -c {shlex.quote(not_first_boot)}"]
    if max_run_s is not None:  # armed first: whatever follows may hang (ECR, SSM, docker)
        pre.append(deadman_command(max_run_s))
    ecr = ecr_registry(image)
    if ecr:
        pre.append(f"/bin/sh {ECR_LOGIN}")
    if ssh or fetch:
        pre.append(f"/bin/sh {FETCH_KEYS}")
    if ssh:
        pre.append(key_owner_command(SSH_DIR))
    pre.append(f"-/usr/bin/docker rm -f {CONTAINER}")
    start = docker_command(image, gpu=gpu, ssh=ssh)
    if user:  # the user's image runs the command; this image (the runner) checks and collects
        pre.append(f"-/usr/bin/docker rm -f {ui.CONTAINER}")
        start = ["/bin/sh", ui.SCRIPT]
    return workload_unit(pre=pre, start=start, home=STATE_DIR,
                         timeout_stop_s=STOP_TIMEOUT_S + 10, install=True,
                         after=(GPU_DRIVER_UNIT,) if gpu else ())


def user_data(*, image: str, env: Mapping[str, str], gpu: bool = False,
              ssh: SshKeys | None = None, keys_url: tuple[str, str] | None = None,
              user: ui.UserStep | None = None, max_run_s: int | None = None,
              created: bool = False) -> str:
    """The `#cloud-config` document for one member (`image` must be a valid OCI reference:
    it lands in a root systemd unit and, for ECR, its host in a login script). `user`: the
    user's own image runs the command first and `image` (spotbench's runner) checks and
    collects around it (infra/user_image.py); the ECR login is `image`'s registry's, so the
    user's image is public or in that registry. `ssh`: the group's keys, whose public files
    are written here and whose private keys the boot fetches from the sweep's function at
    `keys_url` = (region, the function URL's `/keys`), which derives them from the sweep's
    key seed (infra/aws/secrets.py); so does a `user` env with secret values
    (`user.secret`: the entry `user.env`). `max_run_s`:
    every boot that runs the workload powers off that long after its unit starts (the
    sweep's deadline + `DEADMAN_GRACE_S`), the stop function's backstop. `created`: the
    instance is made at start from a launch template (`lifecycle: created`): its first boot
    runs the workload (no install-only boot, no power-off; its shutdown terminates it)."""
    check_image(image)
    files = [{"path": ENV_FILE, "permissions": "0600", "owner": "root", "content": env_file(env)}]
    fetched = user is not None and user.secret
    if (ssh or fetched) and keys_url is None:
        raise ValueError("ssh keys and a secret env need keys_url: they never go in user-data")
    if ssh or fetched:
        region, url = keys_url
        if ssh:
            files += ssh_files(SSH_DIR, ssh, private=False)
        wanted = {file: f"{SSH_DIR}/{file}" for file in KEY_FILES} if ssh else {}
        if fetched:
            wanted[USER_ENV] = ui.ENV_FILE
        files.append({"path": FETCH_KEYS, "permissions": "0700",
                      "content": fetch_keys_script(region, url, wanted)})
    if user:
        files += ui.write_files(
            user, runner=docker_command(image, gpu=False, ssh=False, volumes=ui.RUNNER_VOLUMES),
            user=docker_command(user.image, gpu=gpu, ssh=False, name=ui.CONTAINER,
                                env=ui.ENV_FILE, volumes=ui.USER_VOLUMES,
                                network=ui.USER_NETWORK))
    ecr = ecr_registry(image)
    if ecr:
        files.append({"path": ECR_LOGIN, "permissions": "0700", "content": ecr_login_script(*ecr)})
    files.append({"path": f"/etc/systemd/system/{UNIT}", "permissions": "0644",
                  "content": unit(image, gpu=gpu, ssh=ssh is not None, user=user,
                                  fetch=bool(fetched), max_run_s=max_run_s)})
    if created:  # made at start: this first boot is the run (no boot id recorded)
        return "#cloud-config\n" + yaml.safe_dump({"write_files": files, "runcmd": [
            "systemctl disable --now ecs || true", "systemctl daemon-reload",
            f"systemctl enable {UNIT}", f"systemctl start --no-block {UNIT}"]},
            sort_keys=False, width=10_000)
    doc = {
        "write_files": files,
        "runcmd": [
            f"cp /proc/sys/kernel/random/boot_id {FIRST_BOOT}",
            "systemctl disable --now ecs || true",  # no ECS cluster: the agent would only retry
            "systemctl daemon-reload",
            f"systemctl enable {UNIT}",
        ],
        # the first boot ends stopped, after everything above ran (the instance's shutdown
        # behaviour is stop): the scheduler's first start then runs the workload
        "power_state": {"mode": "poweroff", "condition": True, "timeout": 120,
                        "message": "spotbench: installed; stopped until the scheduler starts it"},
    }
    return cloud_config.render(doc, literal=False)


def check_launch(where: str, document: str, tags: Mapping[str, str]) -> None:
    """A member's launch within EC2's limits: its user data (16 KB raw, before base64) and
    its tag count (spotbench.limits)."""
    limits.require("ec2.user_data", f"{where}: user data", limits.nbytes(document))
    limits.require("ec2.tags.count", f"{where}: tags", len(tags))

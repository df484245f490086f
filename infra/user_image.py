"""The boot of a workload that runs the user's own image (`Workload.user_image`: `container`).

The spec's image knows nothing of spotbench: it runs the user's command, writes what it
likes to `$SPOTBENCH_RESULTS_DIR`, prints on stdout. The member's unit runs `script()`
instead of one `docker run`:

1. spotbench's runner image: `check DIR` — no open run (a creation boot, a capacity restart)
   → exit `EXIT_OUTSIDE_RUN`, the unit powers the VM off; else the run's id goes to DIR/run;
2. the user's image with its command, `DIR/results` mounted (mode 0777: it may run as any
   uid), stdout and stderr to `DIR/stdout.txt`, its own env file (the spec's `env` and
   `SPOTBENCH_RESULTS_DIR`, never the member context), on docker's bridge with the
   metadata server out of its reach (`SHIELD`: no cloud identity). `env` values are
   parameters, written in the boot document; when the spec declares some secret
   (`secret_env`: tokens, passwords) that file is not in the boot document — anyone allowed to
   describe the instance reads those — but one secret per group (`env_file_text`, GCP
   Secret Manager / AWS SSM SecureString), fetched at boot by the group's own identity;
3. DIR handed to the runner's uid, then the runner: `collect DIR --exit-code N` reads the
   metrics as the local cloud does (workloads/container/metrics.py), stores them and calls
   `done`; `--stopped` when the VM was being stopped meanwhile (stored as preempted).

A SIGTERM (the VM stopping) is passed to the step running, then the script still collects:
`docker run` forwards it to its container.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from infra.units import env_file
from spotbench.image_ref import check_image
from spotbench.images import IMAGE_GID, IMAGE_UID, user_image_of
from spotbench.plan import RunGroup

STATE_DIR = "/var/lib/spotbench"
DIR = f"{STATE_DIR}/bench"  # on the VM; mounted at the same path in both containers
RESULTS = f"{DIR}/results"
ENV_FILE = f"{STATE_DIR}/user.env"
SCRIPT = f"{STATE_DIR}/run-user-image"
CONTAINER = "spotbench-user"


@dataclass(frozen=True)
class UserStep:
    """The user's image, the command it runs and that command's environment."""

    image: str
    command: list[str]
    env: dict[str, str]
    secret_keys: frozenset[str] = frozenset()  # the env keys the spec declared secret

    @property
    def secret(self) -> bool:
        """Whether the env holds a value the spec declared secret (`secret_env`): then the
        whole env file is fetched at boot, never written in the boot document."""
        return bool(self.secret_keys)

    def env_file_text(self) -> str:
        """The env file's content: what the group's secret holds."""
        return env_file(self.env)


def user_step(group: RunGroup, explicit_image: str | None) -> UserStep | None:
    """The group's user step (None: its workload's image is spotbench's alone)."""
    user = group.descriptor.user_image
    image = user_image_of(explicit_image, group.workload)
    if user is None or image is None:
        return None
    env = {**user.env(group.params), "SPOTBENCH_RESULTS_DIR": RESULTS}
    return UserStep(image=image, command=user.command(group.params), env=env,
                    secret_keys=user.secret(group.params))


RUNNER_VOLUMES = (f"{DIR}:{DIR}",)  # the runner reads and writes DIR
USER_VOLUMES = (f"{RESULTS}:{RESULTS}",)  # the user's image sees its results folder only
# The user's image runs on docker's default bridge, not the host's network, and the host
# rejects its connections to the metadata server (GCE's, and EC2's IMDS, whose hop limit of
# 2 would otherwise answer a bridged container too): the VM's cloud identity (its group's
# service account / instance role) stays with spotbench's runner on the host network. DNS
# (GCE's resolver is 169.254.169.254:53) still passes. DOCKER-USER is the chain Docker
# leaves to its users, ahead of its own rules; iptables rules last until the next reboot,
# so the script adds the rule before each run of the user's image. Not an owner match on
# the host network: the image picks its own uid (root, or the runner's 1000), so a uid
# cannot tell it from spotbench's processes. (ECS's task-role guide gives the same rule.)
USER_NETWORK = "bridge"
METADATA_IP = "169.254.169.254"
SHIELD = (f"DOCKER-USER -i docker+ -d {METADATA_IP}/32 -p tcp ! --dport 53 "
          "-j REJECT --reject-with tcp-reset")


def write_files(step: UserStep, *, runner: list[str], user: list[str]) -> list[dict[str, str]]:
    """cloud-init `write_files` entries: the user's env file (unless `step.secret`: the boot
    fetches it) and the script. `runner`, `user`: the cloud's `docker run …` up to the image,
    for spotbench's runner (`RUNNER_VOLUMES`) and for the user's image (name `CONTAINER`,
    env file `ENV_FILE`, `USER_VOLUMES`)."""
    check_image(step.image)
    command = [shlex.quote(a) for a in step.command]
    env = [] if step.secret else [
        {"path": ENV_FILE, "permissions": "0600", "owner": "root", "content": step.env_file_text()}]
    return [
        *env,
        {"path": SCRIPT, "permissions": "0700", "owner": "root",
         "content": script(runner=runner, user=user + command)},
    ]


def script(*, runner: list[str], user: list[str]) -> str:
    """The unit's ExecStart for a user-image workload. `runner`: `docker run … RUNNER_IMAGE`
    (DIR mounted at DIR), `user`: `docker run … USER_IMAGE COMMAND` (RESULTS mounted),
    both already shell-quoted."""
    run = " ".join(runner)  # written out at each step: `step` needs $! to be docker itself
    return f"""#!/bin/sh
# spotbench: your image runs your command between two steps of spotbench's runner image
# (written by spotbench's boot; see infra/user_image.py).
set -u
dir={DIR}
stopped=0
pid=
code=0
trap 'stopped=1; if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null; fi' TERM
# run "$@" in the background and wait for it, so a SIGTERM reaches it (docker run forwards it)
step() {{
  "$@" &
  pid=$!
  wait "$pid"
  code=$?
  while kill -0 "$pid" 2>/dev/null; do
    wait "$pid"
    code=$?
  done
  pid=
  return "$code"
}}
rm -rf "$dir"
mkdir -p "$dir/results"
chmod 0777 "$dir/results"
chown {IMAGE_UID}:{IMAGE_GID} "$dir"
step {run} check "$dir" || exit "$code"
if [ "$stopped" = 1 ]; then exit 143; fi
# your image gets no cloud identity: the host rejects its connections to the metadata server
if ! iptables -w -C {SHIELD} 2>/dev/null && ! iptables -w -I {SHIELD.replace("DOCKER-USER", "DOCKER-USER 1", 1)}; then
  echo "spotbench: cannot keep your image from the metadata server; not running it" >&2
  systemctl poweroff
  exit 1
fi
# the command is passed literally: a `$` in it expands inside your container, not here
# shellcheck disable=SC2016
step {" ".join(user)} >"$dir/stdout.txt" 2>&1
user_code=$code
chown -R {IMAGE_UID}:{IMAGE_GID} "$dir"
if [ "$stopped" = 1 ]; then
  step {run} collect "$dir" --exit-code "$user_code" --stopped
else
  step {run} collect "$dir" --exit-code "$user_code"
fi
exit "$code"
"""

"""What runs a member's workload on a VM (GCP cloud-init, AWS user-data alike): the systemd
unit around `docker run` and the `--env-file` it reads."""

from __future__ import annotations

import re
from collections.abc import Mapping

from spotbench.member import EXIT_OUTSIDE_RUN


def workload_unit(*, pre: list[str], start: list[str], home: str, timeout_stop_s: int,
                  install: bool = False, after: tuple[str, ...] = ()) -> str:
    """The systemd unit that runs a member's workload container (GCP cloud-init, AWS user-data).

    `pre` are ExecStartPre commands (a leading '-' lets one fail), `start` the docker command.
    When the workload exits with `EXIT_OUTSIDE_RUN` (it started with no open run, or after
    its run's deadline) the unit powers the VM off: a stopped VM bills no compute.
    `after`: units of the image the workload needs done first (wanted and ordered before it;
    systemd ignores a wanted unit the image does not have).
    """
    extra = "".join(f" {u}" for u in after)
    poweroff = f'if [ "$$EXIT_STATUS" = {EXIT_OUTSIDE_RUN} ]; then systemctl poweroff; fi'

    lines = [
        "[Unit]",
        "Description=spotbench workload",
        f"Wants=network-online.target{extra}",
        f"After=network-online.target docker.service{extra}",
        "Requires=docker.service",
        "",
        "[Service]",
        "Type=simple",
        f"Environment=HOME={home}",
        *(f"ExecStartPre={c}" for c in pre),
        "ExecStart=" + " ".join(start),
        f"ExecStopPost=/bin/sh -c '{poweroff}'",
        "TimeoutStartSec=0",
        f"TimeoutStopSec={timeout_stop_s}",
        "Restart=no",
    ]
    if install:
        lines += ["", "[Install]", "WantedBy=multi-user.target"]
    return "\n".join(lines) + "\n"


ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def env_file(env: Mapping[str, str]) -> str:
    """`docker --env-file` text: KEY=VALUE per line, values verbatim (no quoting). Keys are
    names (`[A-Za-z_][A-Za-z0-9_]*`), values one line without NUL: anything else could add
    a line (a variable) to the file, so it is refused."""
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_KEY.fullmatch(key):
            raise ValueError(f"env key {key!r}: a name of letters, digits and '_', not starting "
                             "with a digit")
        if any(c in str(value) for c in "\n\r\x00"):
            raise ValueError(f"env {key}: values cannot span lines or hold NUL")
    return "".join(f"{k}={v}\n" for k, v in env.items())

"""How `spotbench ssh|exec|collect --via iap` reaches a GCP member: `gcloud compute
start-iap-tunnel NAME PORT --listen-on-stdin` as ssh's ProxyCommand, what `gcloud compute ssh
--tunnel-through-iap` does (`GcpProvider.ssh_proxy`)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from spotbench.clouds.provider import ProxyTarget

VIA = "iap"


@dataclass(frozen=True)
class IapTunnel:
    """The tunnel's command for one member: its instance name and port, the zone the cloud
    reports it in (a created VM: any candidate of any candidate region), else the sweep's
    fixed zone (`zone`, the stopped lifecycle), and the project."""

    project: str | None = None
    zone: str | None = None

    def __call__(self, target: ProxyTarget) -> str:
        cmd = ["gcloud", "compute", "start-iap-tunnel", target.host, str(target.port),
               "--listen-on-stdin", "--verbosity=warning"]
        zone = target.zone or self.zone  # a created VM: the zone it was made in
        cmd += [f"--zone={zone}"] if zone else []
        cmd += [f"--project={self.project}"] if self.project else []
        return shlex.join(cmd)

"""How `spotbench ssh|exec|collect --via ssm` reaches an AWS member: `aws ssm start-session
--document-name AWS-StartSSHSession` as ssh's ProxyCommand (the member's name is its instance
id), asking Session Manager in the instance's own region (its zone's: a created group may run
in another candidate region than the sweep's), else the sweep's (`AwsProvider.ssh_proxy`)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from spotbench.clouds.provider import ProxyTarget

VIA = "ssm"


@dataclass(frozen=True)
class SsmSession:
    region: str | None = None  # the sweep's region: a target of unknown zone
    region_of_zone: Callable[[str], str] | None = None  # a target's zone → its region

    def session_region(self, target: ProxyTarget) -> str | None:
        """The region Session Manager must be asked in: the target's (its zone's), else
        the sweep's (SSM sessions are regional: another region does not know the id)."""
        if target.zone and self.region_of_zone is not None:
            return self.region_of_zone(target.zone)
        return self.region

    def __call__(self, target: ProxyTarget) -> str:
        cmd = ["aws", "ssm", "start-session", "--target", target.host,
               "--document-name", "AWS-StartSSHSession", "--parameters", f"portNumber={target.port}"]
        region = self.session_region(target)
        cmd += ["--region", region] if region else []
        return shlex.join(cmd)

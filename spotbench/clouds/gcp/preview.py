"""What `spotbench preview` shows of the GCP resources the stack declares, beyond the
neutral properties (`spotbench.preview`): a firewall's rules as effects, an instance
template's labels and account (`GcpProvider.preview_properties` / `preview_rules`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PACKAGE = "gcp"  # the Pulumi package of every type token the GCP stack declares
FIREWALL = "gcp:compute/firewall:Firewall"


def _ports(ports: Any) -> str:
    return ",".join(str(p) for p in ports) if ports else "all"


def rules(type_token: str, i: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A firewall's effect, one dict per (action, protocol)."""
    if type_token != FIREWALL:
        return []
    direction = i.get("direction", "INGRESS")
    sources = {k: i[k] for k in ("sourceTags", "sourceRanges", "sourceServiceAccounts") if i.get(k)}
    targets = {k: i[k] for k in ("targetTags", "targetServiceAccounts", "destinationRanges")
               if i.get(k)} or {"all instances": i.get("network")}
    return [{"action": action, "direction": direction, "protocol": a.get("protocol"),
             "ports": _ports(a.get("ports")), "sources": sources, "targets": targets}
            for action, key in (("allow", "allows"), ("deny", "denies"))
            for a in i.get(key) or []]


def properties(type_token: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """What an instance template makes VMs with (the created lifecycle): labels, account."""
    if not type_token.endswith("InstanceTemplate:RegionInstanceTemplate") and \
            not type_token.endswith("instanceTemplate:InstanceTemplate"):
        return {}
    account = inputs.get("serviceAccount")
    out: dict[str, Any] = {"labels": inputs.get("labels", {})}
    if isinstance(account, dict) and account.get("email"):
        out["serviceAccount"] = account["email"]
    return out

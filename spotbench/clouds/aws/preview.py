"""What `spotbench preview` shows of the AWS resources the stack declares, beyond the
neutral properties (`spotbench.preview`): a security-group rule's effect, an instance's IMDS
setting, a created member's launch template, the template's base64 user data
(`AwsProvider.preview_properties` / `preview_rules` / `preview_user_data`)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

PACKAGE = "aws"  # the Pulumi package of every type token the AWS stack declares
INSTANCE = "aws:ec2/instance:Instance"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SG_RULES = {"aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": "INGRESS",
            "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": "EGRESS"}


def user_data(type_token: str, inputs: Mapping[str, Any]) -> str | None:
    """A launch template's user data, decoded (it is base64); "" when it does not decode;
    None for any other resource (the neutral `userData` is read as it is)."""
    text = inputs.get("userData")
    if type_token != LAUNCH_TEMPLATE or not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""


def _imds(type_token: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    metadata = inputs.get("metadataOptions")
    # only where the call carries it (RunInstances; a spot request's launch spec cannot)
    if type_token == INSTANCE and isinstance(metadata, dict) and metadata.get("httpTokens"):
        return {"imdsTokens": metadata["httpTokens"]}
    return {}


def _on_demand(type_token: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """An instance without market options is a standard role's member (`role_provisioning`)."""
    return {"market": "on-demand"} if type_token == INSTANCE and not inputs.get("instanceMarketOptions") else {}


def _launch_template(type_token: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A launch template of `lifecycle: created`: which member, in which zone, how."""
    if type_token != LAUNCH_TEMPLATE:
        return {}
    tags = inputs.get("tags") or {}
    nics = inputs.get("networkInterfaces") or [{}]
    out = {"member": tags.get("spotbench-member"), "zone": tags.get("spotbench-zone"),
           "market": tags.get("spotbench-market"),
           "imdsTokens": (inputs.get("metadataOptions") or {}).get("httpTokens"),
           "privateIp": nics[0].get("privateIpAddress") if isinstance(nics[0], dict) else None,
           "onShutdown": inputs.get("instanceInitiatedShutdownBehavior")}
    return {k: v for k, v in out.items() if v}


def properties(type_token: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    return {**_on_demand(type_token, inputs), **_imds(type_token, inputs),
            **_launch_template(type_token, inputs)}


def _port_range(i: Mapping[str, Any]) -> str:
    lo, hi = (int(i[k]) if i.get(k) is not None else None for k in ("fromPort", "toPort"))
    if lo is None:
        return "all"
    return f"{lo}-{hi}" if hi not in (None, lo) else str(lo)


def rules(type_token: str, i: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A security-group rule's effect (one dict)."""
    direction = SG_RULES.get(type_token)
    if direction is None:
        return []
    proto = i.get("ipProtocol")
    every = proto in ("-1", "all")
    other = {k: i[k] for k in ("referencedSecurityGroupId", "cidrIpv4", "cidrIpv6",
                               "prefixListId") if i.get(k)}
    own = {"securityGroupId": i.get("securityGroupId")}
    ingress = direction == "INGRESS"
    return [{"action": "allow", "direction": direction, "protocol": "all" if every else proto,
             "ports": "all" if every else _port_range(i), "sources": other if ingress else own,
             "targets": own if ingress else other}]

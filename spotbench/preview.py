"""What an offline preview declared (`Declared`) and how it is shown: the few properties a
reviewer wants per resource (a VM's container images among them), firewall / security-group
rules as effects, JSON.

The preview itself (the Pulumi program run under mocks) is `infra.preview`: only `infra/`
imports Pulumi. `spotbench preview` (spotbench/cli/preview.py) runs it and shows the result
with these functions. What a resource of one cloud shows beyond the neutral properties is
its provider's (`Provider.preview_properties`, `preview_rules`, `preview_user_data`), found
by the type token's Pulumi package (`provider_of`).
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from spotbench.clouds import Provider, get_provider
from spotbench.facts import CLOUDS
from spotbench.labels import ROLE_LABEL


@dataclass
class Declared:
    """One resource the program registered (inputs with secrets unwrapped)."""

    type: str
    name: str
    inputs: dict[str, Any]
    custom: bool
    secrets: frozenset[str] = frozenset()  # top-level input keys that held a secret


# ---- presentation --------------------------------------------------------------------
_KEYS = (
    "machineType", "zone", "region", "location", "instanceType", "schedule", "timeZone",
    "ipCidrRange", "cidrBlock", "addressType", "desiredStatus", "accountId", "roleId",
    "role", "member", "ingressSettings", "uniformBucketLevelAccess",
    "publicAccessPrevention", "sourceTags", "targetTags", "direction",
)


_DOCKER_RUN = re.compile(r"/usr/bin/docker run (.*)$", re.M)
_DOCKER_VALUE_FLAGS = {"--name", "--network", "--stop-timeout", "--env-file", "--volume", "-v",
                       "--device", "--gpus"}


@functools.cache
def provider_of(type_token: str) -> Provider | None:
    """The provider whose stack declares resources of this type (by the token's Pulumi
    package, `Provider.pulumi_package`); None for a neutral one (`tls:`, `random:`)."""
    package = type_token.split(":", 1)[0]
    found = (get_provider(name) for name in CLOUDS)
    return next((p for p in found if p.pulumi_package == package), None)


def _boot_files(d: Declared) -> list[str]:
    """The files a VM's cloud-config writes (its units and scripts)."""
    provider = provider_of(d.type)
    text = provider.preview_user_data(d.type, d.inputs) if provider is not None else None
    if text is None:
        metadata = d.inputs.get("metadata")
        text = metadata.get("user-data") if isinstance(metadata, dict) else d.inputs.get("userData")
    if not isinstance(text, str) or not text.startswith("#cloud-config"):
        return []
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    files = doc.get("write_files") if isinstance(doc, dict) else None
    return [f["content"] for f in files or [] if isinstance(f, dict) and isinstance(f.get("content"), str)]


def boot_images(d: Declared) -> list[str]:
    """The container images a VM's boot runs (`docker run` in its rendered user-data), in
    order of first use: the workload's image, or spotbench's runner and the user's image."""
    images: list[str] = []
    for match in (m for text in _boot_files(d) for m in _DOCKER_RUN.finditer(text)):
        lexer = shlex.shlex(match.group(1), posix=True)
        lexer.whitespace_split = True
        expect_value = False
        for token in lexer:  # lazily: the command after the image may span lines
            if expect_value:
                expect_value = False
            elif token in _DOCKER_VALUE_FLAGS:
                expect_value = True
            elif not token.startswith("-"):
                if token not in images:
                    images.append(token)
                break
    return images


def key_properties(d: Declared) -> dict[str, Any]:
    """The few properties a reviewer wants to see for a resource."""
    out: dict[str, Any] = {}
    for part in _PROPERTIES:
        out.update(part(d))
    return out


def _plain(d: Declared) -> dict[str, Any]:
    return {k: d.inputs[k] for k in _KEYS if k in d.inputs}


def _images(d: Declared) -> dict[str, Any]:
    images = boot_images(d)
    return {"images": images} if images else {}


def _scheduling(d: Declared) -> dict[str, Any]:
    scheduling = d.inputs.get("scheduling")
    if not isinstance(scheduling, dict):
        return {}
    out = {k: scheduling[k] for k in ("provisioningModel", "preemptible", "instanceTerminationAction")
           if k in scheduling}
    if "maxRunDuration" in scheduling:
        out["maxRunDuration"] = f"{scheduling['maxRunDuration'].get('seconds')}s"
    return out


def _role(d: Declared) -> dict[str, Any]:
    """The member role a VM, template or launch template is for (only members carry the
    role label; its role's provisioning shows beside it: `provisioningModel` on GCP,
    `market` on AWS)."""
    tags = d.inputs.get("labels") or d.inputs.get("tags")
    role = tags.get(ROLE_LABEL) if isinstance(tags, dict) else None
    return {"role": role} if role else {}


def _market(d: Declared) -> dict[str, Any]:
    market = d.inputs.get("instanceMarketOptions")  # AWS spot members
    if not isinstance(market, dict):
        return {}
    spot = market.get("spotOptions") or {}
    return {"market": " ".join(str(v) for v in (market.get("marketType"),
                                                spot.get("spotInstanceType"),
                                                spot.get("instanceInterruptionBehavior")) if v)}


def _accelerators(d: Declared) -> dict[str, Any]:
    accels = d.inputs.get("guestAccelerators")
    if not accels:
        return {}
    return {"accelerators": [f"{int(a.get('count') or 0)}x{a.get('type')}" for a in accels]}


def _ingress(d: Declared) -> dict[str, Any]:
    service = d.inputs.get("serviceConfig")
    if isinstance(service, dict) and "ingressSettings" in service:
        return {"ingress": service["ingressSettings"]}
    return {}


def _http_target(d: Declared) -> dict[str, Any]:
    target = d.inputs.get("httpTarget")
    if not isinstance(target, dict):
        return {}
    return {"uri": target.get("uri"), "oidc": (target.get("oidcToken") or {}).get("serviceAccountEmail")}


def _permissions(d: Declared) -> dict[str, Any]:
    perms = d.inputs.get("permissions")
    return {"permissions": list(perms)} if perms else {}


def _cloud(d: Declared) -> dict[str, Any]:
    provider = provider_of(d.type)
    return provider.preview_properties(d.type, d.inputs) if provider is not None else {}


def _network(d: Declared) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d.inputs.get("tags"), list):  # GCE network tags (firewall targets)
        out["networkTags"] = list(d.inputs["tags"])
    nics = d.inputs.get("networkInterfaces")
    if isinstance(nics, list) and nics and isinstance(nics[0], dict) and "networkIp" in nics[0]:
        out["networkIp"] = nics[0]["networkIp"]
    return out


def _set(d: Declared) -> dict[str, Any]:
    return {k: d.inputs[k] for k in ("privateIp", "vpcSecurityGroupIds", "members", "condition")
            if d.inputs.get(k)}


def _iam_documents(d: Declared) -> dict[str, Any]:
    out = {}
    for k in ("policy", "assumeRolePolicy", "policyData"):  # IAM documents, whole
        if isinstance(d.inputs.get(k), str):
            try:
                out[k] = json.loads(d.inputs[k])
            except ValueError:
                out[k] = d.inputs[k]
    return out


def _rules(d: Declared) -> dict[str, Any]:
    rules = network_rules(d)
    return {"rules": rules} if rules else {}


# what `key_properties` shows, in this order
_PROPERTIES: tuple[Callable[[Declared], dict[str, Any]], ...] = (
    _plain, _role, _images, _scheduling, _market, _accelerators, _ingress, _http_target,
    _permissions, _cloud, _network, _set, _iam_documents, _rules,
)


def network_rules(d: Declared) -> list[dict[str, Any]]:
    """A firewall's / security-group rule's effect, one dict per (action, protocol):
    `{action, direction, protocol, ports, sources, targets}`; `ports` is "all" or a list
    like "2222,50000-50100"; sources/targets name tags, security groups or CIDRs (each
    cloud's rule: `Provider.preview_rules`)."""
    provider = provider_of(d.type)
    return provider.preview_rules(d.type, d.inputs) if provider is not None else []


def kind_of(type_token: str) -> str:
    """`aws:ec2/instance:Instance` → `Instance`."""
    return type_token.rsplit(":", 1)[-1] if ":" in type_token else type_token


@dataclass(frozen=True)
class TypeCount:
    """One line of the preview's summary: a resource type, how many, and what they are."""

    kind: str  # the type's last part (`Instance`)
    type: str  # the provider's type token
    count: int
    detail: str  # machine types for VMs, else the first names


def by_type(declared: list[Declared], names: int = 1) -> list[TypeCount]:
    """The declared resources per type, most numerous first: VMs by machine type
    (`2 × c5n.18xlarge`), other types by their first `names` names."""
    groups: dict[str, list[Declared]] = {}
    for d in declared:
        groups.setdefault(d.type, []).append(d)
    out = []
    for type_token, items in groups.items():
        machines: dict[str, int] = {}
        for d in items:
            machine = d.inputs.get("machineType") or d.inputs.get("instanceType")
            if isinstance(machine, str):
                machine = machine.rsplit("/", 1)[-1]
                machines[machine] = machines.get(machine, 0) + 1
        if machines:
            detail = ", ".join(f"{n} × {m}" for m, n in sorted(machines.items()))
        else:
            shown = [d.name for d in items[:names]]
            detail = ", ".join(shown) + (f" and {len(items) - len(shown)} more" if len(items) > len(shown) else "")
        out.append(TypeCount(kind_of(type_token), type_token, len(items), detail))
    return sorted(out, key=lambda t: (-t.count, t.kind))


def as_json(declared: list[Declared]) -> str:
    rows = [{"type": d.type, "name": d.name, "properties": key_properties(d)} for d in declared]
    return json.dumps(rows, indent=2, default=str)

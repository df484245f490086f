"""The network rules `spotbench preview --json` shows, evaluated and enforced.

- `hosts(rows)`: every instance row → `Host(name, ip, tags, groups)` (GCE network tags,
  EC2 security-group ids).
- `allowed(rows, src, dst, protocol, port)`: does an INGRESS allow rule let `src` reach
  `dst` there? (GCP: target tags ∩ dst tags, source tags ∩ src tags or a source range
  holding src's IP; AWS: the rule's group is one of dst's, the referenced group one of
  src's or a CIDR holding src's IP.) Anything no rule allows is denied, as on both clouds.
- `nft_ruleset(rows, dst, lab_hosts)`: the same rules as an nftables input chain for dst's
  network namespace (policy drop; replies to dst's own connections pass, as the clouds'
  stateful firewalls let them).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Host:
    name: str
    ip: str
    tags: frozenset[str] = field(default_factory=frozenset)
    groups: frozenset[str] = field(default_factory=frozenset)


INSTANCE_TYPES = ("gcp:compute/instance:Instance", "aws:ec2/instance:Instance",
                  "aws:ec2/spotInstanceRequest:SpotInstanceRequest")


def hosts(rows: list[dict[str, Any]]) -> dict[str, Host]:
    out = {}
    for r in rows:
        if r["type"] in INSTANCE_TYPES:
            p = r["properties"]
            out[r["name"]] = Host(r["name"], p.get("networkIp") or p.get("privateIp"),
                                  frozenset(p.get("networkTags") or ()),
                                  frozenset(p.get("vpcSecurityGroupIds") or ()))
    return out


def ingress_rules(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rule for r in rows for rule in r["properties"].get("rules", [])
            if rule["direction"] == "INGRESS" and rule["action"] == "allow"]


def _in_ranges(ip: str, ranges: list[str]) -> bool:
    return any(ipaddress.ip_address(ip) in ipaddress.ip_network(c) for c in ranges)


def applies_to(rule: dict, dst: Host) -> bool:
    t = rule["targets"]
    if "targetTags" in t:
        return bool(dst.tags & set(t["targetTags"]))
    if "securityGroupId" in t:
        return t["securityGroupId"] in dst.groups
    return "all instances" in t


def admits(rule: dict, src: Host) -> bool:
    s = rule["sources"]
    return (bool(src.tags & set(s.get("sourceTags", [])))
            or s.get("referencedSecurityGroupId") in src.groups
            or _in_ranges(src.ip, s.get("sourceRanges", []) + [c for c in [s.get("cidrIpv4")] if c]))


def port_ranges(ports: str) -> list[tuple[int, int]] | None:
    """'all' → None; '2222,50000-50100' → [(2222, 2222), (50000, 50100)]."""
    if ports == "all":
        return None
    out = []
    for part in ports.split(","):
        lo, _, hi = part.partition("-")
        out.append((int(lo), int(hi or lo)))
    return out


def covers(rule: dict, protocol: str, port: int) -> bool:
    if rule["protocol"] not in ("all", protocol):
        return False
    ranges = port_ranges(rule["ports"])
    return ranges is None or any(lo <= port <= hi for lo, hi in ranges)


def allowed(rows: list[dict], src: Host, dst: Host, protocol: str, port: int) -> bool:
    return any(applies_to(r, dst) and admits(r, src) and covers(r, protocol, port)
               for r in ingress_rules(rows))


def nft_ruleset(rows: list[dict], dst: Host, lab_hosts: list[Host]) -> str:
    lines = ["table inet spotbench_fw {", "  chain input {",
             "    type filter hook input priority 0; policy drop;",
             "    ct state established,related accept", '    iif "lo" accept']
    for rule in ingress_rules(rows):
        if not applies_to(rule, dst):
            continue
        sources = [h.ip for h in lab_hosts if h is not dst and admits(rule, h)]
        sources += rule["sources"].get("sourceRanges", [])
        sources += [c for c in [rule["sources"].get("cidrIpv4")] if c]
        if not sources:
            continue
        match = f"ip saddr {{ {', '.join(sources)} }}"
        if rule["protocol"] != "all":
            match += f" meta l4proto {rule['protocol']}"
        ranges = port_ranges(rule["ports"])
        if ranges is not None:
            ports = ", ".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ranges)
            match += f" th dport {{ {ports} }}"
        lines.append(f"    {match} accept")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"

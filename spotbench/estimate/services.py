"""The lines beside the VMs an estimate prices (issue #39): the functions' CPU time, the
stack's NAT, internet egress and the results bucket, each from a price row of the shipped
tables (docs/platform.md, Prices) and the cloud's facts.

- functions (CPU): calls × seconds × the vCPU the functions' memory gets
  (`CloudFacts.function_vcpu`: Cloud Run functions bill vCPU-seconds beside GiB-seconds;
  none for Lambda, whose GB-second price includes the CPU);
- NAT: Cloud NAT bills each VM using it per hour and the IP it uses while the VMs run
  (`nat="per-vm"`); an AWS NAT Gateway and its Elastic IP bill every hour they exist
  (`nat="gateway"`: a month's standing cost, 0 per run); data through either per GB;
- egress: GB to the internet per tick (results go to the bucket in the same region: free);
- bucket storage: the GB the results bucket keeps, per month.

A cloud without a row for an item (the local cloud) gets no line for it.
"""

from __future__ import annotations

import math

from spotbench.costs import Catalog, PriceRow
from spotbench.estimate.answer import Line
from spotbench.estimate.assumptions import Assumptions
from spotbench.facts import facts_of


def _row(catalog: Catalog, cloud: str, region: str | None, kind: str, item: str) -> PriceRow | None:
    return catalog.find(cloud, region, kind, item)


def function_vcpu(cloud: str, memory_mb: float) -> float:
    """The vCPU a function of `memory_mb` is billed for: the smallest listed size holding it."""
    table = facts_of(cloud).function_vcpu
    fits = [mb for mb in sorted(table) if mb >= memory_mb]
    return table[fits[0]] if fits else (table[max(table)] if table else 0.0)


def tick_lines(cloud: str, region: str | None, catalog: Catalog, a: Assumptions, *,
               invocations: float, instance_s: float, run_s: float,
               stack_s: float | None = None) -> list[Line]:
    """One tick's lines: functions' CPU, NAT (per VM-hour, its IP while running, data), egress.
    `instance_s`: billed seconds of every member; `run_s`: how long the tick's VMs run;
    `stack_s` (`schedule: once`): how long the stack stands, its NAT gateway with it."""
    out: list[Line] = []
    cpu = _row(catalog, cloud, region, "function", "vcpu-second")
    vcpu = function_vcpu(cloud, a.function_mb)
    if cpu is not None and vcpu:
        q = invocations * a.function_s_per_call * vcpu
        out.append(Line("functions (CPU)", q, "vCPU-second", cpu.usd, q * cpu.usd,
                        f"{vcpu:g} vCPU at {a.function_mb:g} MB × {a.function_s_per_call:g} s per call"))
    nat = facts_of(cloud).nat
    vm = _row(catalog, cloud, region, "network", "nat-vm")
    ip = _row(catalog, cloud, region, "network", "nat-ip")
    if nat == "per-vm" and vm is not None and ip is not None:
        out.append(Line("NAT (VMs)", instance_s / 3600, "VM-hour", vm.usd, instance_s / 3600 * vm.usd,
                        "Cloud NAT: each VM using the gateway, while it runs"))
        out.append(Line("NAT (IP)", run_s / 3600, "IP-hour", ip.usd, run_s / 3600 * ip.usd,
                        "the gateway's external IP while the VMs run"))
    if stack_s is not None:
        out += _gateway_for_the_run(cloud, region, catalog, stack_s)
    data = _row(catalog, cloud, region, "network", "nat-data")
    if nat and data is not None:
        out.append(Line("NAT (data)", a.nat_gb_per_tick, "GB", data.usd, a.nat_gb_per_tick * data.usd,
                        "--assume nat_gb_per_tick (image pulls go through it where no endpoint does)"))
    egress = _row(catalog, cloud, region, "network", "egress")
    if egress is not None:
        out.append(Line("egress", a.egress_gb_per_tick, "GB", egress.usd, a.egress_gb_per_tick * egress.usd,
                        "--assume egress_gb_per_tick (results stay in the region: free)"))
    return out


def _gateway_for_the_run(cloud: str, region: str | None, catalog: Catalog,
                         stack_s: float) -> list[Line]:
    """`schedule: once`: an AWS NAT Gateway and its IP bill only the hours the stack stands,
    each partial hour as a full one (docs/platform.md); none is left after the run."""
    gateway = _row(catalog, cloud, region, "network", "nat-gateway")
    ip = _row(catalog, cloud, region, "network", "nat-ip")
    if facts_of(cloud).nat != "gateway" or gateway is None or ip is None:
        return []
    hours = float(math.ceil(stack_s / 3600))
    note = f"{stack_s:g} s the stack stands (the run + stack_s), partial hours billed whole"
    return [Line("NAT (gateway)", hours, "hour", gateway.usd, hours * gateway.usd, note),
            Line("NAT (IP)", hours, "IP-hour", ip.usd, hours * ip.usd, "the gateway's Elastic IP, " + note)]


def month_lines(cloud: str, region: str | None, catalog: Catalog, a: Assumptions, tick: dict[str, Line],
                ticks: float) -> list[Line]:
    """A month's lines: the tick's × ticks, plus what stands all month (an AWS NAT Gateway
    and its IP, the bucket's storage)."""
    each = f"{ticks:.4g} ticks"
    out = [Line(ln.item, ln.quantity * ticks, ln.unit, ln.unit_usd, ln.usd * ticks, each)
           for item in ("functions (CPU)", "NAT (VMs)", "NAT (IP)", "NAT (data)", "egress")
           if (ln := tick.get(item)) is not None]
    hours = a.month_days * 24
    gateway = _row(catalog, cloud, region, "network", "nat-gateway")
    ip = _row(catalog, cloud, region, "network", "nat-ip")
    if facts_of(cloud).nat == "gateway" and gateway is not None and ip is not None:
        out.append(Line("NAT (gateway)", hours, "hour", gateway.usd, hours * gateway.usd,
                        "exists all month, VMs running or not (until `spotbench teardown`)"))
        out.append(Line("NAT (IP)", hours, "IP-hour", ip.usd, hours * ip.usd,
                        "the gateway's Elastic IP, all month"))
    bucket = _row(catalog, cloud, region, "storage", "bucket")
    if bucket is not None:
        out.append(Line("bucket storage", a.bucket_gb, "GB-month", bucket.usd, a.bucket_gb * bucket.usd,
                        "--assume bucket_gb: the results bucket"))
    return out

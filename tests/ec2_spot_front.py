"""EC2's spot request state machine, in front of moto_server (which starts anything).

`SpotFront(upstream)` is a local HTTP proxy: every request goes on to `upstream` (moto, or
another front) unchanged, except that for an instance launched by `RunInstances` with
persistent spot market options it keeps the instance's spot request as EC2 does
(docs/platform.md, "API state machines"):

- the request is `active`/`fulfilled` while its instance runs; `DescribeInstances` names it
  (`SpotInstanceRequestId`, which moto leaves out) and `DescribeSpotInstanceRequests` lists
  it (untagged: the provider tags the instance, never its request);
- a user stop (`StopInstances`) leaves the request `active` (`marked-for-stop`) for
  `settle_s`, then `disabled` (`instance-stopped-by-user`); `StartInstances` of an instance
  whose request is not `disabled` by a user stop answers `IncorrectSpotRequestState` (the
  whole call, as EC2 refuses a batch);
- `interrupt(id)` is EC2 reclaiming it (interruption behaviour stop): the instance stops
  with `StateReason` `Server.SpotInstanceShutdown`, the request is `disabled` with
  `instance-stopped-no-capacity`, and only EC2 may start it again (`StartInstances`:
  `IncorrectSpotRequestState`) — `restore(id)` is EC2 doing so when capacity returns;
  `interrupt(id)` of a spot instance an instant fleet launched (its `SpotOptions`
  `InstanceInterruptionBehavior`, `terminate` in the created lifecycle) terminates it: it
  stays visible `terminated` with `StateReason` `Server.SpotInstanceTermination`;
- `CancelSpotInstanceRequests` cancels it (EC2 also terminates a stopped instance of a
  cancelled request; the front records that as `terminated_by_cancel`, it does not call
  moto, which may be enforcing IAM);
- `TerminateInstances` of an instance whose persistent request is not cancelled re-opens the
  request (`open`), which is when EC2 would launch a replacement (`relaunched` lists them).

Capacity that says no (docs/platform.md, "Capacity errors and price APIs"): `exhaust(zone)` makes every
`StartInstances` of an instance in that Availability Zone, and every `RunInstances` placed
there, answer `InsufficientInstanceCapacity` (the whole call, as EC2 refuses a batch) until
`replenish(zone)`; `exhaust_calls(n)` does so for the next n such calls wherever they go. An
`open` persistent request (its instance terminated) in an exhausted zone shows status
`capacity-not-available`.

`CreateFleet` of type `instant` (docs/platform.md, "EC2 Fleet of type instant"): moto launches
from the cheapest launch-template override and ignores `Priority`, `SingleAvailabilityZone`
and capacity, so the front picks the pool itself — the overrides in `Priority` order (lowest
first), each subnet's zone from moto — and forwards a fleet of that one pool only. A pool in
an exhausted zone (or every pool, for a call `exhaust_calls` covers) is not launched: EC2
answers 200 with an `Errors` entry per refused pool (`InsufficientInstanceCapacity`, its
launch template and overrides) beside the instances it did launch, and with none launched
when no pool has capacity for `MinTargetCapacity` in one zone. `fleets` lists each call's
(chosen zone or None, refused zones); `asked` each call's zones in `Priority` order.

The launch template's network interface (docs/platform.md, "EC2 Fleet overrides and the
template's network interface"): moto launches a fleet's instances from the override's (or
the template's top-level) `SubnetId` and never reads the template's `NetworkInterfaces`.
EC2 ignores that block too when an override names a subnet (AWS's Karpenter maintainers'
report), and the front keeps that: the instance gets an address the subnet picks and the
VPC's default security group, not the template's fixed IP and groups (`nic_ignored` lists
those templates). When the chosen override names no subnet (`AvailabilityZone` only) and the
template declares interface 0, EC2 launches through it, and so does the front: it records
the fleet in moto (its tags, no capacity) and launches the instance itself with moto's
`RunInstances` from the template with that interface (its subnet, fixed private IP,
security groups, delete on termination), answered in the fleet's `fleetInstanceSet`.

Every region: like moto_server, one front serves all regions; a request's own lookups
(subnets' zones, instances' placement) go to moto in the region the request is signed for
(its SigV4 credential scope), so `exhaust(zone)` works for a zone of any region
(tests/clouds/test_aws_regions_capacity.py); `interrupt(id, region)` names the region of an
instance outside the front's own.
"""

from __future__ import annotations

import http.server
import itertools
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode
from xml.etree import ElementTree as ET

import boto3
import requests

from tests.local_http import LocalServer, read_body as _read_body, reply as _reply

NS = "http://ec2.amazonaws.com/doc/2016-11-15"  # as moto writes it (EC2 adds a final /)
ET.register_namespace("", NS)
INTERRUPTED = "instance-stopped-no-capacity"
USER_STOPPED = "instance-stopped-by-user"


def _q(tag: str) -> str:
    return f"{{{NS}}}{tag}"


@dataclass
class SpotRequest:
    id: str
    instance: str
    behavior: str = "stop"
    state: str = "active"
    status: str = "fulfilled"
    stopped_at: float | None = None  # a user stop, settling until settle_s has passed
    zone: str = ""  # the Availability Zone its instance was launched in

    def view(self, settle_s: float) -> tuple[str, str]:
        if self.stopped_at is not None and self.state == "active":
            if time.monotonic() - self.stopped_at < settle_s:
                return "active", "marked-for-stop"
            self.state, self.status, self.stopped_at = "disabled", USER_STOPPED, None
        return self.state, self.status


@dataclass
class SpotFront:
    upstream: str
    settle_s: float = 0.0
    region: str = "us-east-1"
    requests: dict[str, SpotRequest] = field(default_factory=dict)  # by request id
    relaunched: list[str] = field(default_factory=list)  # requests re-opened by a terminate
    terminated_by_cancel: list[str] = field(default_factory=list)
    refused: list[tuple[str, list[str]]] = field(default_factory=list)  # (action, instance ids)
    errors: list[str] = field(default_factory=list)
    exhausted: set[str] = field(default_factory=set)  # Availability Zones without capacity
    capacity_refused: list[tuple[str, list[str]]] = field(default_factory=list)
    calls_without_capacity: int = 0  # the next calls refused wherever they go (exhaust_calls)
    fleets: list[tuple[str | None, list[str]]] = field(default_factory=list)
    asked: list[list[str]] = field(default_factory=list)  # each CreateFleet's zones, first choice first
    fleet_spot: dict[str, str] = field(default_factory=dict)  # fleet spot instance → behaviour
    reclaimed: set[str] = field(default_factory=set)  # fleet instances EC2 terminated
    nic_ignored: list[str] = field(default_factory=list)  # templates whose NICs a SubnetId override voided
    nic_fleets: dict[str, list[str]] = field(default_factory=dict)  # fleet → instances the front made

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._server: LocalServer | None = None
        self._local = threading.local()  # the region the request being served was signed for
        self.url = ""

    # ---- lifecycle ----------------------------------------------------------------------
    def __enter__(self) -> str:
        self._server = LocalServer(self._handle)
        self.url = self._server.url
        return self.url

    def __exit__(self, *exc: object) -> None:
        if self._server:
            self._server.close()

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.relaunched.clear()
            self.terminated_by_cancel.clear()
            self.refused.clear()
            self.exhausted.clear()
            self.capacity_refused.clear()
            self.calls_without_capacity = 0
            self.fleets.clear()
            self.fleet_spot.clear()
            self.asked.clear()
            self.reclaimed.clear()
            self.nic_ignored.clear()
            self.nic_fleets.clear()

    # ---- capacity -------------------------------------------------------------------------
    def exhaust(self, zone: str) -> None:
        self.exhausted.add(zone)

    def replenish(self, zone: str) -> None:
        self.exhausted.discard(zone)

    def exhaust_calls(self, count: int) -> None:
        """The next `count` StartInstances / RunInstances calls, anywhere, get no capacity."""
        self.calls_without_capacity += count

    def _no_capacity(self, action: str, placed: dict[str, tuple[str, str]]) -> tuple[int, dict, bytes] | None:
        """EC2's capacity answer when one of `placed` (id → (zone, type)) has none."""
        short = [(i, z, t) for i, (z, t) in placed.items() if z in self.exhausted]
        with self._lock:
            if not short and self.calls_without_capacity > 0 and placed:
                self.calls_without_capacity -= 1
                short = [(i, z, t) for i, (z, t) in list(placed.items())[:1]]
        if not short:
            return None
        self.capacity_refused.append((action, [i for i, _, _ in short]))
        _, zone, itype = short[0]
        others = ", ".join(f"{self.region}{c}" for c in "abcdef"
                           if f"{self.region}{c}" != zone and f"{self.region}{c}" not in self.exhausted)
        return _error("InsufficientInstanceCapacity",
                      f"We currently do not have sufficient {itype} capacity in the Availability "
                      f"Zone you requested ({zone}). Our system will be working on provisioning "
                      f"additional capacity. You can currently get {itype} capacity by not "
                      f"specifying an Availability Zone in your request or choosing {others}.")

    def _placement(self, ids: list[str]) -> dict[str, tuple[str, str]]:
        try:
            reservations = self._ec2().describe_instances(InstanceIds=ids)["Reservations"]
        except Exception:  # noqa: BLE001 - unknown ids: let EC2 (moto) answer the call
            return {}
        return {i["InstanceId"]: (i["Placement"]["AvailabilityZone"], i["InstanceType"])
                for r in reservations for i in r["Instances"]}

    # ---- what EC2 does on its own ---------------------------------------------------------
    def _ec2(self, region: str | None = None) -> Any:
        """moto's EC2 in `region`, else the region of the request being served (its SigV4
        credential scope: one front serves every region, as EC2's endpoints do per region),
        else the front's own."""
        region = region or getattr(self._local, "region", None) or self.region
        return boto3.client("ec2", region_name=region, endpoint_url=self.upstream,
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def request_of(self, instance: str) -> SpotRequest | None:
        with self._lock:
            return next((r for r in self.requests.values() if r.instance == instance), None)

    def interrupt(self, instance: str, region: str | None = None) -> None:
        """EC2 reclaims the instance (its interruption behaviour: stop, or terminate);
        `region`: the instance's, when not the front's."""
        request = self.request_of(instance)
        if request is None and self.fleet_spot.get(instance) == "terminate":
            self._ec2(region).terminate_instances(InstanceIds=[instance])
            with self._lock:
                self.reclaimed.add(instance)
            return
        assert request is not None, f"{instance} has no persistent spot request nor a fleet's"
        self._ec2().stop_instances(InstanceIds=[instance])
        with self._lock:
            request.state, request.status, request.stopped_at = "disabled", INTERRUPTED, None

    def restore(self, instance: str) -> None:
        """Capacity is back: EC2 starts the interrupted instance itself."""
        request = self.request_of(instance)
        assert request is not None and request.status == INTERRUPTED
        self._ec2().start_instances(InstanceIds=[instance])
        with self._lock:
            request.state, request.status = "active", "fulfilled"

    # ---- the proxy ----------------------------------------------------------------------
    def _handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        body = _read_body(h)
        headers = dict(h.headers.items())
        self._local.region = _signed_region(headers)
        try:
            form = _form(body) if h.command == "POST" else {}
            action = form.get("Action", [""])[0] if form.get("Version") == ["2016-11-15"] else ""
            handler = getattr(self, f"_on_{action}", None)
            if handler is None:
                return _reply(h, *self._forward(h, headers, body))
            return _reply(h, *handler(h, headers, body, form))
        except Exception as exc:  # noqa: BLE001 - a harness gap must fail the test loudly
            self.errors.append(f"{h.command} {h.path}: {exc!r}")
            return _reply(h, 500, {"Content-Type": "text/plain"}, str(exc).encode())

    def _forward(self, h, headers: Mapping[str, str], body: bytes) -> tuple[int, dict, bytes]:
        sent = {k: v for k, v in headers.items() if k.lower() != "transfer-encoding"}
        resp = requests.request(h.command, self.upstream + h.path, headers=sent,
                                data=body, timeout=60, allow_redirects=False)
        drop = {"transfer-encoding", "connection", "content-encoding"}
        if h.command != "HEAD":  # a HEAD answer's length is the object's: keep it
            drop.add("content-length")
        return (resp.status_code, {k: v for k, v in resp.headers.items() if k.lower() not in drop},
                resp.content)

    # ---- EC2 actions the state machine changes ------------------------------------------
    def _on_RunInstances(self, h, headers, body, form):
        zone = form.get("Placement.AvailabilityZone", [""])[0]
        itype = form.get("InstanceType", ["m1.small"])[0]
        refused = self._no_capacity("RunInstances", {"(new)": (zone, itype)})
        if refused is not None:
            return refused
        status, out, content = self._forward(h, headers, body)
        spot = (form.get("InstanceMarketOptions.MarketType") == ["spot"]
                and form.get("InstanceMarketOptions.SpotOptions.SpotInstanceType") == ["persistent"])
        if status == 200 and spot:
            behavior = form.get("InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior",
                                ["terminate"])[0]
            root = ET.fromstring(content)
            with self._lock:
                for inst in root.iter(_q("item")):
                    iid = inst.find(_q("instanceId"))
                    if iid is None:
                        continue
                    az = inst.find(f"{_q('placement')}/{_q('availabilityZone')}")
                    rid = f"sir-{next(self._ids):08x}"
                    self.requests[rid] = SpotRequest(rid, iid.text or "", behavior,
                                                     zone=az.text or "" if az is not None else "")
        return status, out, content

    def _on_CreateFleet(self, h, headers, body, form):
        if form.get("Type") != ["instant"]:
            return self._forward(h, headers, body)
        pools = _fleet_pools(form)
        zones = self._subnet_zones([p["SubnetId"] for p in pools if p.get("SubnetId")])
        with self._lock:
            everywhere = self.calls_without_capacity > 0
            if everywhere:
                self.calls_without_capacity -= 1
        refused, chosen = [], None
        self.asked.append([zones.get(p.get("SubnetId", ""), p.get("AvailabilityZone", "")) for p in pools])
        for pool in pools:
            zone = zones.get(pool.get("SubnetId", ""), pool.get("AvailabilityZone", ""))
            if everywhere or zone in self.exhausted:
                refused.append((pool, zone))
            elif chosen is None:
                chosen = (pool, zone)
        self.fleets.append((chosen[1] if chosen else None, [z for _, z in refused]))
        if refused:
            self.capacity_refused.append(("CreateFleet", [z for _, z in refused]))
        if chosen is None:
            root = ET.Element(_q("CreateFleetResponse"))
            _set(root, "requestId", "front")
            _set(root, "fleetId", f"fleet-front{next(self._ids):08x}")
            ET.SubElement(root, _q("fleetInstanceSet"))
        else:
            one = _one_pool(form, chosen[0])
            nic = self._template_nic(chosen[0])
            through_nic = nic is not None and not chosen[0].get("SubnetId")
            if nic is not None and not through_nic:
                self.nic_ignored.append(chosen[0]["LaunchTemplateId"])  # EC2 drops the block
            sent = _no_capacity_form(one) if through_nic else one
            status, out, content = self._forward(h, headers, urlencode(sent, doseq=True).encode())
            if status != 200:
                return status, out, content
            root = ET.fromstring(content)
            if through_nic:
                self._launch_through_nic(form, chosen[0], nic or {}, root)
            self._note_fleet_spot(form, root)
        errors = root.find(_q("errorSet"))
        if errors is None:
            errors = ET.SubElement(root, _q("errorSet"))
        for pool, zone in refused:
            item = ET.SubElement(errors, _q("item"))
            _set(item, "errorCode", "InsufficientInstanceCapacity")
            _set(item, "errorMessage", f"We currently do not have sufficient capacity in the "
                 f"Availability Zone you requested ({zone}).")
            _set(item, "lifecycle", "spot" if form.get(
                "TargetCapacitySpecification.DefaultTargetCapacityType") == ["spot"] else "on-demand")
            lto = ET.SubElement(item, _q("launchTemplateAndOverrides"))
            spec = ET.SubElement(lto, _q("launchTemplateSpecification"))
            _set(spec, "launchTemplateId", pool.get("LaunchTemplateId", ""))
            over = ET.SubElement(lto, _q("overrides"))
            for key in ("SubnetId", "AvailabilityZone", "Priority"):
                if pool.get(key):
                    _set(over, key[0].lower() + key[1:], pool[key])
        return 200, {"Content-Type": "text/xml"}, ET.tostring(root)

    def _template_nic(self, pool: Mapping[str, str]) -> dict[str, Any] | None:
        """Interface 0 of the pool's launch template version, when it declares one."""
        version = pool.get("Version") or "$Default"
        data = self._ec2().describe_launch_template_versions(
            LaunchTemplateId=pool["LaunchTemplateId"], Versions=[version]
        )["LaunchTemplateVersions"][0]["LaunchTemplateData"]
        return next((n for n in data.get("NetworkInterfaces", [])
                     if int(n.get("DeviceIndex", 0)) == 0), None)

    def _launch_through_nic(self, form: Mapping[str, list[str]], pool: Mapping[str, str],
                            nic: Mapping[str, Any], root: ET.Element) -> None:
        """EC2's launch of `pool` through its template's interface 0: the instances, in
        the fleet's answer (`root`) as EC2 lists them."""
        keep = ("DeviceIndex", "SubnetId", "Groups", "PrivateIpAddress",
                "AssociatePublicIpAddress", "DeleteOnTermination")
        count = int(form.get("TargetCapacitySpecification.TotalTargetCapacity", ["1"])[0])
        spot = form.get("TargetCapacitySpecification.DefaultTargetCapacityType") == ["spot"]
        market = {"InstanceMarketOptions": {"MarketType": "spot", "SpotOptions": {
            "SpotInstanceType": "one-time", "InstanceInterruptionBehavior": form.get(
                "SpotOptions.InstanceInterruptionBehavior", ["terminate"])[0]}}} if spot else {}
        made = self._ec2().run_instances(
            MinCount=count, MaxCount=count, **market,
            LaunchTemplate={"LaunchTemplateId": pool["LaunchTemplateId"],
                            "Version": pool.get("Version") or "$Default"},
            NetworkInterfaces=[{k: v for k, v in nic.items() if k in keep}])["Instances"]
        listing = root.find(_q("fleetInstanceSet"))
        if listing is None:
            listing = ET.SubElement(root, _q("fleetInstanceSet"))
        item = ET.SubElement(listing, _q("item"))
        lto = ET.SubElement(item, _q("launchTemplateAndOverrides"))
        spec = ET.SubElement(lto, _q("launchTemplateSpecification"))
        _set(spec, "launchTemplateId", pool["LaunchTemplateId"])
        over = ET.SubElement(lto, _q("overrides"))
        for key in ("AvailabilityZone", "Priority"):
            if pool.get(key):
                _set(over, key[0].lower() + key[1:], pool[key])
        _set(item, "lifecycle", "spot" if spot else "on-demand")
        ids = ET.SubElement(item, _q("instanceIds"))
        for inst in made:
            ET.SubElement(ids, _q("item")).text = inst["InstanceId"]
        _set(item, "instanceType", made[0]["InstanceType"])
        fleet_id = root.find(_q("fleetId"))
        with self._lock:
            self.nic_fleets[fleet_id.text if fleet_id is not None and fleet_id.text else ""] = [
                i["InstanceId"] for i in made]

    def _terminated_fleet_instances(self, ids: list[str]) -> list[str]:
        """Which of `ids`, launched by the front through a template's interface, are
        terminated already."""
        with self._lock:
            mine = {i for made in self.nic_fleets.values() for i in made} & set(ids)
        if not mine:
            return []
        found = self._ec2().describe_instances(InstanceIds=sorted(mine))["Reservations"]
        return [i["InstanceId"] for r in found for i in r["Instances"]
                if i["State"]["Name"] == "terminated"]

    def _forward_these(self, h, headers, form, key: str, ids: list[str]):
        """Forward the request to moto with only `ids` as its `key.N` list: moto's answer
        parsed, or (status, headers, body) when moto refused it."""
        sent = {k: v for k, v in form.items() if not k.startswith(f"{key}.")}
        sent.update({f"{key}.{n}": [i] for n, i in enumerate(ids, 1)})
        status, out, content = self._forward(h, headers, urlencode(sent, doseq=True).encode())
        if status != 200:
            return status, out, content
        return ET.fromstring(content)

    def _terminate_rest(self, h, headers, form, gone: list[str]) -> tuple[int, dict, bytes]:
        rest = [i for i in _indexed(form, "InstanceId") if i not in gone]
        root = ET.Element(_q("TerminateInstancesResponse"))
        _set(root, "requestId", "front")
        listing = ET.SubElement(root, _q("instancesSet"))
        if rest:
            failed = self._forward_these(h, headers, form, "InstanceId", rest)
            if isinstance(failed, tuple):
                return failed
            for item in failed.iter(_q("instancesSet")):
                listing.extend(list(item))
        for iid in gone:
            _terminated_item(listing, iid)
        return 200, {"Content-Type": "text/xml"}, ET.tostring(root)

    def _on_DeleteFleets(self, h, headers, body, form):
        """Deleting a fleet whose instances the front launched (through the template's
        interface) terminates them, as EC2 does; moto's record of it has none to terminate."""
        ids = _indexed(form, "FleetId")
        if not ids or not all(i in self.nic_fleets for i in ids) or \
                form.get("TerminateInstances") != ["true"]:
            return self._forward(h, headers, body)
        made = [i for f in ids for i in self.nic_fleets[f]]
        self._ec2().terminate_instances(InstanceIds=made)
        status, out, content = self._forward(h, headers, urlencode(
            {**form, "TerminateInstances": ["false"]}, doseq=True).encode())
        if status != 200:
            return status, out, content
        root = ET.fromstring(content)
        for state in root.iter(_q("currentFleetState")):
            state.text = "deleted_terminating"
        return status, out, ET.tostring(root)

    def _note_fleet_spot(self, form: Mapping[str, list[str]], root: ET.Element) -> None:
        """The spot instances a fleet launched, with its interruption behaviour."""
        if form.get("TargetCapacitySpecification.DefaultTargetCapacityType") != ["spot"]:
            return
        behavior = form.get("SpotOptions.InstanceInterruptionBehavior", ["terminate"])[0]
        with self._lock:
            for ids in root.iter(_q("instanceIds")):
                for item in ids.iter(_q("item")):
                    self.fleet_spot[item.text or ""] = behavior

    def _subnet_zones(self, subnets: list[str]) -> dict[str, str]:
        if not subnets:
            return {}
        found = self._ec2().describe_subnets(SubnetIds=sorted(set(subnets)))["Subnets"]
        return {s["SubnetId"]: s["AvailabilityZone"] for s in found}

    def _on_DescribeInstances(self, h, headers, body, form):
        status, out, content = self._forward(h, headers, body)
        if status != 200 or not (self.requests or self.reclaimed):
            return status, out, content
        root = ET.fromstring(content)
        for inst in root.iter(_q("item")):
            iid = inst.find(_q("instanceId"))
            if iid is not None and iid.text in self.reclaimed:
                reason = inst.find(_q("stateReason"))
                if reason is None:
                    reason = ET.SubElement(inst, _q("stateReason"))
                _set(reason, "code", "Server.SpotInstanceTermination")
                _set(reason, "message", "Server.SpotInstanceTermination: Spot interruption")
                continue
            request = self.request_of(iid.text) if iid is not None and iid.text else None
            if request is None:
                continue
            _set(inst, "spotInstanceRequestId", request.id)
            _set(inst, "instanceLifecycle", "spot")
            if request.status == INTERRUPTED:
                reason = inst.find(_q("stateReason"))
                if reason is None:
                    reason = ET.SubElement(inst, _q("stateReason"))
                _set(reason, "code", "Server.SpotInstanceShutdown")
                _set(reason, "message", "Server.SpotInstanceShutdown: Spot interruption")
        return status, out, ET.tostring(root)

    def _on_DescribeSpotInstanceRequests(self, h, headers, body, form):
        status, out, content = self._forward(h, headers, body)
        if status != 200:
            return status, out, content
        root = ET.fromstring(content)
        listing = root.find(_q("spotInstanceRequestSet"))
        if listing is None:
            listing = ET.SubElement(root, _q("spotInstanceRequestSet"))
        for request in self._matching(form):
            state, code = request.view(self.settle_s)
            if state == "open" and request.zone in self.exhausted:
                code = "capacity-not-available"  # an open request EC2 cannot fulfil now
            item = ET.SubElement(listing, _q("item"))
            for tag, value in (("spotInstanceRequestId", request.id), ("type", "persistent"),
                               ("state", state), ("instanceId", request.instance),
                               ("instanceInterruptionBehavior", request.behavior),
                               ("productDescription", "Linux/UNIX")):
                _set(item, tag, value)
            st = ET.SubElement(item, _q("status"))
            _set(st, "code", code)
            _set(st, "message", code)
            ET.SubElement(item, _q("tagSet"))
        return status, out, ET.tostring(root)

    def _matching(self, form: Mapping[str, list[str]]) -> Iterable[SpotRequest]:
        ids = _indexed(form, "SpotInstanceRequestId")
        filters: dict[str, list[str]] = {}
        for n in itertools.count(1):
            name = form.get(f"Filter.{n}.Name")
            if not name:
                break
            filters[name[0]] = _indexed(form, f"Filter.{n}.Value")
        with self._lock:
            found = list(self.requests.values())
        for request in found:
            state, _ = request.view(self.settle_s)
            if ids and request.id not in ids:
                continue
            if any(k.startswith("tag") for k in filters):  # the requests carry no tags
                continue
            if "state" in filters and state not in filters["state"]:
                continue
            if "instance-id" in filters and request.instance not in filters["instance-id"]:
                continue
            yield request

    def _on_StartInstances(self, h, headers, body, form):
        if self.exhausted or self.calls_without_capacity:
            refused = self._no_capacity("StartInstances", self._placement(_indexed(form, "InstanceId")))
            if refused is not None:
                return refused
        held = []
        for iid in _indexed(form, "InstanceId"):
            request = self.request_of(iid)
            if request is None:
                continue
            state, code = request.view(self.settle_s)
            if state == "cancelled" or (state, code) != ("disabled", USER_STOPPED):
                held.append(iid)
        if held:
            self.refused.append(("StartInstances", held))
            return _error("IncorrectSpotRequestState",
                          f"The spot instance request of {', '.join(held)} is not in a state "
                          "that allows this operation (it must be disabled by a user stop).")
        status, out, content = self._forward(h, headers, body)
        if status == 200:
            with self._lock:
                for iid in _indexed(form, "InstanceId"):
                    request = self.request_of(iid)
                    if request is not None:
                        request.state, request.status, request.stopped_at = "active", "fulfilled", None
        return status, out, content

    def _on_StopInstances(self, h, headers, body, form):
        status, out, content = self._forward(h, headers, body)
        if status == 200:
            with self._lock:
                for iid in _indexed(form, "InstanceId"):
                    request = self.request_of(iid)
                    if request is not None and request.state == "active":
                        request.stopped_at = time.monotonic()
        return status, out, content

    def _on_CancelSpotInstanceRequests(self, h, headers, body, form):
        ids = _indexed(form, "SpotInstanceRequestId")
        mine = [i for i in ids if i in self.requests]
        if not mine:
            return self._forward(h, headers, body)
        others = [i for i in ids if i not in self.requests]
        root = ET.Element(_q("CancelSpotInstanceRequestsResponse"))
        _set(root, "requestId", "front")
        listing = ET.SubElement(root, _q("spotInstanceRequestSet"))
        if others:
            failed = self._forward_these(h, headers, form, "SpotInstanceRequestId", others)
            if isinstance(failed, tuple):
                return failed
            for item in failed.iter(_q("item")):
                listing.append(item)
        states = {i["InstanceId"]: i["State"]["Name"] for r in self._describe(mine)
                  for i in r["Instances"]}
        with self._lock:
            for rid in mine:
                request = self.requests[rid]
                request.state, request.status = "cancelled", "request-canceled-and-instance-running"
                if states.get(request.instance) == "stopped":
                    self.terminated_by_cancel.append(request.instance)
                item = ET.SubElement(listing, _q("item"))
                _set(item, "spotInstanceRequestId", rid)
                _set(item, "state", "cancelled")
        return 200, {"Content-Type": "text/xml"}, ET.tostring(root)

    def _describe(self, request_ids: list[str]) -> list[dict]:
        instances = [self.requests[r].instance for r in request_ids]
        try:
            return self._ec2().describe_instances(InstanceIds=instances)["Reservations"]
        except Exception:  # noqa: BLE001 - moto may enforce IAM on the front's own key
            return []

    def _on_TerminateInstances(self, h, headers, body, form):
        gone = self._terminated_fleet_instances(_indexed(form, "InstanceId"))
        if gone:  # EC2 answers a terminated instance again; moto fails on its deleted ENI
            return self._terminate_rest(h, headers, form, gone)
        status, out, content = self._forward(h, headers, body)
        if status == 200:
            with self._lock:
                for iid in _indexed(form, "InstanceId"):
                    request = self.request_of(iid)
                    if request is not None and request.state != "cancelled":
                        request.state, request.status = "open", "instance-terminated-by-user"
                        self.relaunched.append(request.id)
        return status, out, content


def _terminated_item(listing: ET.Element, iid: str) -> None:
    item = ET.SubElement(listing, _q("item"))
    _set(item, "instanceId", iid)
    for tag in ("currentState", "previousState"):
        state = ET.SubElement(item, _q(tag))
        _set(state, "code", "48")
        _set(state, "name", "terminated")


def _fleet_pools(form: Mapping[str, list[str]]) -> list[dict[str, str]]:
    """CreateFleet's launch-template configs × overrides, in `Priority` order (lowest first,
    then as listed), each with its config index `n` and override index `m`."""
    pools = []
    for n in itertools.count(1):
        base = f"LaunchTemplateConfigs.{n}."
        lt = form.get(base + "LaunchTemplateSpecification.LaunchTemplateId")
        if not lt:
            break
        version = form.get(base + "LaunchTemplateSpecification.Version", ["$Default"])[0]
        for m in itertools.count(1):
            over = f"{base}Overrides.{m}."
            if not any(k.startswith(over) for k in form):
                if m == 1:
                    pools.append({"n": str(n), "m": "", "LaunchTemplateId": lt[0],
                                  "Version": version})
                break
            pool = {k.removeprefix(over): v[0] for k, v in form.items() if k.startswith(over)}
            pools.append({**pool, "n": str(n), "m": str(m), "LaunchTemplateId": lt[0],
                          "Version": version})
    return sorted(pools, key=lambda p: float(p.get("Priority", "inf")))


def _one_pool(form: Mapping[str, list[str]], pool: Mapping[str, str]) -> dict[str, list[str]]:
    """The CreateFleet form with only `pool` (its config and that one override)."""
    out = {k: v for k, v in form.items() if not k.startswith("LaunchTemplateConfigs.")}
    base = f"LaunchTemplateConfigs.{pool['n']}."
    for k, v in form.items():
        if not k.startswith(base):
            continue
        rest = k.removeprefix(base)
        if rest.startswith("Overrides."):
            if not rest.startswith(f"Overrides.{pool['m']}."):
                continue
            rest = "Overrides.1." + rest.removeprefix(f"Overrides.{pool['m']}.")
        out["LaunchTemplateConfigs.1." + rest] = v
    return out


def _no_capacity_form(form: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """The CreateFleet form for moto's record of the fleet only (no instance: the front
    launches them through the template's interface)."""
    out = dict(form)
    for key in ("TargetCapacitySpecification.TotalTargetCapacity", "SpotOptions.MinTargetCapacity",
                "OnDemandOptions.MinTargetCapacity"):
        if key in out:
            out[key] = ["0"]
    return out


def _form(body: bytes) -> dict[str, list[str]]:
    try:
        return parse_qs(body.decode(), keep_blank_values=True)
    except UnicodeDecodeError:
        return {}


def _indexed(form: Mapping[str, list[str]], prefix: str) -> list[str]:
    out = []
    for n in itertools.count(1):
        value = form.get(f"{prefix}.{n}")
        if not value:
            return out
        out.append(value[0])


def _set(parent: ET.Element, tag: str, value: str) -> None:
    node = parent.find(_q(tag))
    if node is None:
        node = ET.SubElement(parent, _q(tag))
    node.text = value


def _error(code: str, message: str) -> tuple[int, dict, bytes]:
    xml = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error><Code>{code}"
           f"</Code><Message>{message}</Message></Error></Errors><RequestID>front</RequestID>"
           "</Response>")
    return 400, {"Content-Type": "text/xml"}, xml.encode()


def _signed_region(headers: Mapping[str, str]) -> str | None:
    """The region of a SigV4 request (`Credential=KEY/DATE/REGION/SERVICE/aws4_request`)."""
    auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
    scope = auth.split("Credential=", 1)[1].split(",", 1)[0].split("/") if "Credential=" in auth else []
    return scope[2] if len(scope) > 3 else None

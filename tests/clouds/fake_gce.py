"""A small local Compute Engine REST endpoint: exactly the calls `GcpCloud` makes.

Serves `aggregated/instances` (with a `labels.KEY = "VALUE"` filter), instance get / start /
stop / resume / delete (instances carry `lastStartTimestamp` / `lastStopTimestamp`), zone
operations get / wait / list (with an `operationType = "…"` filter; `preempt()` does what
GCE does to a spot VM it reclaims: TERMINATED plus a `compute.instances.preempted`
operation; a VM made from a template whose termination action is DELETE is deleted
instead, at a preemption or `reach_deadline`), and the static addresses teardown
sweeps (`aggregated/addresses`, address delete, region operations get / wait), over plain HTTP on 127.0.0.1, so the
real `google-cloud-compute` REST client can be pointed at it. Hooks let a test make the next
operation on an instance fail (e.g. ZONE_RESOURCE_POOL_EXHAUSTED), never finish, or make the
next matching request answer 503 once. Capacity that says no: `exhaust(zone)` makes every
start/resume in a zone end with GCE's resource-availability error until `replenish(zone)`;
`exhaust_calls(n)` does so for the next n starts wherever they are (docs/platform.md,
"Capacity errors and price APIs"). The created lifecycle: regional instance templates
(`add_template`, served by GET) and `regionInstances.bulkInsert`, checked up front as GCE
does (HTTP 503 `insufficientCapacity` when every allowed zone is exhausted, 403
`quotaExceeded` after `exceed_quota(region)`, 409 for a name in use), then a region
operation that makes the named instances from the template (its labels and account) in ONE
zone the location policy allows, or — `exhaust_calls` — ends `ZONE_RESOURCE_POOL_EXHAUSTED`
having made none (docs/platform.md, "Created lifecycle"). A bulkInsert is per region: a
template of another region, or a location policy naming a zone of another region, is
refused (HTTP 400) as GCE does. Every request is recorded in `calls`.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

BASE = "https://www.googleapis.com/compute/v1"
_FILTER_TERM = re.compile(r'labels\.([a-z0-9_-]+)\s*=\s*"([^"]*)"')
_ZONE = r"^/compute/v1/projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)"
_INSTANCE = re.compile(_ZONE + r"/instances/(?P<i>[^/]+)(?:/(?P<verb>\w+))?$")
_OPERATION = re.compile(_ZONE + r"/operations/(?P<o>[^/]+?)(?P<wait>/wait)?$")
_OPERATIONS = re.compile(_ZONE + r"/operations$")
_OP_TYPE = re.compile(r'operationType\s*=\s*"([^"]*)"')
_AGGREGATED = re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/aggregated/instances$")
_ADDR_AGG = re.compile(r"^/compute/v1/projects/[^/]+/aggregated/addresses$")
_ADDR = re.compile(r"^/compute/v1/projects/[^/]+/regions/(?P<r>[^/]+)/addresses/(?P<a>[^/]+)$")
_BULK = re.compile(r"^/compute/v1/projects/[^/]+/regions/(?P<r>[^/]+)/instances/bulkInsert$")
_TEMPLATE = re.compile(r"^/compute/v1/projects/[^/]+/regions/(?P<r>[^/]+)/instanceTemplates/(?P<t>[^/]+)$")
_REGION_OP = re.compile(r"^/compute/v1/projects/[^/]+/regions/(?P<r>[^/]+)/operations/(?P<o>[^/]+?)(/wait)?$")
# The status an instance is in while an operation runs, and after it succeeds.
_EFFECT = {"start": ("STAGING", "RUNNING"), "resume": ("STAGING", "RUNNING"),
           "stop": ("STOPPING", "TERMINATED"), "delete": ("STOPPING", None)}  # fmt: skip


@dataclass
class _Op:
    name: str
    zone: str
    instance: str
    kind: str
    error: tuple[str, str] | None = None  # (code, message) the op ends with
    stuck: bool = False  # never reaches DONE
    done: bool = False
    target_id: str = ""
    inserted: str = field(default_factory=lambda: _now())

    def body(self, project: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "compute#operation",
            "name": self.name,
            "operationType": self.kind,
            "status": "DONE" if self.done else "RUNNING",
            "zone": f"{BASE}/projects/{project}/zones/{self.zone}",
            "targetLink": f"{BASE}/projects/{project}/zones/{self.zone}/instances/{self.instance}",
            "targetId": self.target_id, "insertTime": self.inserted,
        }
        if self.done:
            out["endTime"] = self.inserted
        if self.done and self.error:
            out["error"] = {"errors": [{"code": self.error[0], "message": self.error[1]}]}
            out["httpErrorStatusCode"] = 503
            out["httpErrorMessage"] = "SERVICE UNAVAILABLE"
        return out


@dataclass
class FakeGce:
    project: str = "proj"
    instances: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    filters: list[str] = field(default_factory=list)  # every aggregatedList filter seen
    addresses: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)  # (region, name) → labels
    _ops: dict[str, _Op] = field(default_factory=dict)
    _fail: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    _stuck: set[tuple[str, str]] = field(default_factory=set)
    _refuse: list[tuple[str, str, int]] = field(default_factory=list)
    _exhausted: dict[str, str] = field(default_factory=dict)  # zone → error code
    _exhaust_calls: list[str] = field(default_factory=list)  # one code per next start
    templates: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (region, name)
    bulk_inserts: list[dict[str, Any]] = field(default_factory=list)  # every bulkInsert body
    _region_ops: dict[str, dict[str, Any]] = field(default_factory=dict)
    _quota: dict[str, str] = field(default_factory=dict)  # region → the exceeded quota's metric
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _server: ThreadingHTTPServer | None = None
    # serial port 1 of each instance: everything written, and the buffer GCE keeps (1 MB;
    # getSerialPortOutput answers from the oldest byte still kept when asked for older)
    serial: dict[tuple[str, str], bytes] = field(default_factory=dict)
    serial_buffer: int = 1 << 20

    # -- test set-up -------------------------------------------------------------------
    def add(self, name: str, zone: str, status: str = "TERMINATED",
            labels: dict[str, str] | None = None, ip: str | None = None,
            service_account: str | None = None, instance_id: str | None = None) -> None:  # fmt: skip
        self.instances[(zone, name)] = {"name": name, "status": status,
                                        "labels": dict(labels or {}), "ip": ip,
                                        "service_account": service_account,
                                        "id": instance_id or str(1000 + len(self.instances))}  # fmt: skip

    def fail_next(self, verb: str, name: str, code: str = "ZONE_RESOURCE_POOL_EXHAUSTED",
                  message: str = "The zone does not have enough resources.") -> None:  # fmt: skip
        """The next `verb` operation on instance `name` ends DONE with this error."""
        self._fail[(verb, name)] = (code, message)

    def exhaust(self, zone: str, code: str = "ZONE_RESOURCE_POOL_EXHAUSTED") -> None:
        """No capacity in `zone`: every start/resume there ends DONE with `code`
        (ZONE_RESOURCE_POOL_EXHAUSTED or ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS)."""
        self._exhausted[zone] = code

    def replenish(self, zone: str) -> None:
        self._exhausted.pop(zone, None)

    def exhaust_calls(self, count: int, code: str = "ZONE_RESOURCE_POOL_EXHAUSTED") -> None:
        """The next `count` start/resume operations, in any zone, end with `code`."""
        self._exhaust_calls += [code] * count

    def _capacity_error(self, kind: str, zone: str, name: str) -> tuple[str, str] | None:
        if kind not in ("start", "resume"):
            return None
        code = self._exhausted.get(zone) or (self._exhaust_calls.pop(0) if self._exhaust_calls else None)
        if code is None:
            return None
        if code.endswith("_WITH_DETAILS"):  # the message names the VM's shape, as GCE's does
            return code, (f"A VM instance {name} is currently unavailable in the {zone} zone. "
                          "Capacity changes frequently, so try your request in a different zone, "
                          "with a different VM hardware configuration, or at a later time. For "
                          "more options, see troubleshooting documentation.")
        return code, (f"The zone 'projects/{self.project}/zones/{zone}' does not have enough "
                      "resources available to fulfill the request.  Try a different zone, or try "
                      "again later.")

    def add_template(self, region: str, name: str, labels: dict[str, str],
                     service_account: str | None = None, machine_type: str = "n1-standard-4",
                     termination_action: str = "STOP", provisioning_model: str = "SPOT") -> None:
        """A regional instance template (what infra declares in the created lifecycle);
        `termination_action` (its scheduling's instanceTerminationAction, GCE's default
        STOP) is what GCE does to a VM made from it at a preemption or max_run_duration;
        `provisioning_model` (SPOT | STANDARD) what its VMs run as (only SPOT is preempted)."""
        self.templates[(region, name)] = {"labels": dict(labels), "service_account": service_account,
                                          "machine_type": machine_type,
                                          "termination_action": termination_action,
                                          "provisioning_model": provisioning_model}

    def exceed_quota(self, region: str, metric: str = "NVIDIA_T4_GPUS") -> None:
        """Every bulkInsert in `region` is refused up front: HTTP 403 `quotaExceeded`."""
        self._quota[region] = metric

    def zones_of(self, name: str) -> set[str]:
        """The zones an instance of that name is in (a created group: one)."""
        return {z for (z, n) in self.instances if n == name}

    def stick_next(self, verb: str, name: str) -> None:
        """The next `verb` operation on `name` never reaches DONE."""
        self._stuck.add((verb, name))

    def unavailable_once(self, method: str, path_suffix: str) -> None:
        """The next `method` request whose path ends with `path_suffix` gets a 503."""
        self.refuse_once(method, path_suffix, 503)

    def refuse_once(self, method: str, path_suffix: str, code: int) -> None:
        """The next `method` request whose path ends with `path_suffix` gets HTTP `code`."""
        self._refuse.append((method, path_suffix, code))

    def preempt(self, zone: str, name: str) -> None:
        """What GCE does when it reclaims a spot VM: a DONE `compute.instances.preempted`
        operation on it, and its termination action: STOP (TERMINATED, disk kept) or, made
        from a template saying DELETE, the VM and its boot disk deleted."""
        with self._lock:
            inst = self.instances[(zone, name)]
            if inst.get("provisioning_model") == "STANDARD":
                raise ValueError(f"fake GCE: {name} is a STANDARD VM: Compute Engine does not preempt it")
            op = _Op(f"operation-{next(self._ids)}", zone, name, "compute.instances.preempted",
                     done=True, target_id=inst["id"])
            self._ops[op.name] = op
            self._terminate(zone, name)

    def reach_deadline(self, zone: str, name: str) -> None:
        """The VM's max_run_duration elapsed: GCE applies its termination action (no
        preempted operation)."""
        with self._lock:
            self._terminate(zone, name)

    def _terminate(self, zone: str, name: str) -> None:
        inst = self.instances[(zone, name)]
        if inst.get("termination_action") == "DELETE":
            del self.instances[(zone, name)]
        else:
            inst["status"], inst["last_stop"] = "TERMINATED", _now()

    def status(self, zone: str, name: str) -> str | None:
        inst = self.instances.get((zone, name))
        return inst["status"] if inst else None

    def mutations(self) -> list[tuple[str, str]]:
        """Calls that would change an instance (POST/DELETE on instances)."""
        return [c for c in self.calls if c[0] in ("POST", "DELETE") and "/instances/" in c[1]]

    # -- server --------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._server is not None, "call start() first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeGce:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # -- request handling ----------------------------------------------------------------
    def handle(self, method: str, path: str, query: dict[str, list[str]],
               body: dict[str, Any] | None = None) -> tuple[int, Any]:
        with self._lock:
            self.calls.append((method, path))
            for i, (m, suffix, code) in enumerate(self._refuse):
                if m == method and path.endswith(suffix):
                    del self._refuse[i]
                    return code, _error(code, f"refused by the fake with HTTP {code}")
            if m_ := _AGGREGATED.match(path):
                return 200, self._aggregated(query.get("filter", [""])[0])
            if _ADDR_AGG.match(path):
                return 200, self._aggregated_addresses(query.get("filter", [""])[0])
            if (m_ := _ADDR.match(path)) and method == "DELETE":
                if self.addresses.pop((m_["r"], m_["a"]), None) is None:
                    return 404, _error(404, f"address {m_['a']} not found")
                return 200, self._region_op(m_["r"], f"addr-op-{m_['a']}", done=False)
            if (m_ := _BULK.match(path)) and method == "POST":
                return self._bulk_insert(m_["r"], body or {})
            if (m_ := _TEMPLATE.match(path)) and method == "GET":
                return self._template(m_["r"], m_["t"])
            if m_ := _REGION_OP.match(path):
                if m_["o"] in self._region_ops:
                    return 200, self._finish_region_op(m_["o"])
                return 200, self._region_op(m_["r"], m_["o"])
            if (m_ := _OPERATIONS.match(path)) and method == "GET":
                wanted = _OP_TYPE.findall(query.get("filter", [""])[0])
                items = [op.body(self.project) for op in self._ops.values()
                         if op.zone == m_["z"] and (not wanted or op.kind in wanted)]
                return 200, {"kind": "compute#operationList", "items": items}
            if m_ := _OPERATION.match(path):
                return self._operation(m_["o"])
            if (m_ := _INSTANCE.match(path)) and method == "GET" and m_["verb"] == "serialPort":
                return self._serial_port(m_["z"], m_["i"], query)
            if m_ := _INSTANCE.match(path):
                return self._instance(method, m_["z"], m_["i"], m_["verb"])
            return 404, _error(404, f"fake GCE does not serve {method} {path}")

    def write_serial(self, zone: str, name: str, text: str) -> None:
        with self._lock:
            self.serial[(zone, name)] = self.serial.get((zone, name), b"") + text.encode()

    def _serial_port(self, zone: str, name: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        """`instances.getSerialPortOutput`: bytes from `start` (negative: the most recent
        that many), adjusted to the oldest byte kept; `next` is where the output ends."""
        if (zone, name) not in self.instances:
            return 404, _error(404, f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' was not found")
        data = self.serial.get((zone, name), b"")
        oldest = max(0, len(data) - self.serial_buffer)
        start = int(query.get("start", ["0"])[0] or 0)
        start = max(oldest, len(data) + start if start < 0 else start)
        return 200, {"kind": "compute#serialPortOutput", "contents": data[start:].decode("utf-8", "replace"),
                     "start": str(start), "next": str(len(data)),
                     "selfLink": f"{BASE}/projects/{self.project}/zones/{zone}/instances/{name}/serialPort"}

    def _aggregated(self, filter_: str) -> dict[str, Any]:
        self.filters.append(filter_)
        wanted = dict(_FILTER_TERM.findall(filter_))
        items: dict[str, Any] = {}
        for (zone, name), inst in sorted(self.instances.items()):
            if all(inst["labels"].get(k) == v for k, v in wanted.items()):
                items.setdefault(f"zones/{zone}", {"instances": []})["instances"].append(
                    self._body(zone, name)
                )
        items["zones/empty-zone-a"] = {"warning": {"code": "NO_RESULTS_ON_PAGE"}}
        return {"kind": "compute#instanceAggregatedList", "items": items}

    def _aggregated_addresses(self, filter_: str) -> dict[str, Any]:
        wanted = dict(_FILTER_TERM.findall(filter_))
        items: dict[str, Any] = {}
        for (region, name), labels in sorted(self.addresses.items()):
            if all(labels.get(k) == v for k, v in wanted.items()):
                items.setdefault(f"regions/{region}", {"addresses": []})["addresses"].append(
                    {"name": name, "labels": labels, "status": "RESERVED"})
        return {"kind": "compute#addressAggregatedList", "items": items}

    # -- the created lifecycle: templates and regionInstances.bulkInsert -----------------
    def _template(self, region: str, name: str) -> tuple[int, Any]:
        t = self.templates.get((region, name))
        if t is None:
            where = f"projects/{self.project}/regions/{region}/instanceTemplates/{name}"
            return 404, _error(404, f"The resource '{where}' was not found")
        return 200, {"kind": "compute#instanceTemplate", "name": name,
                     "region": f"{BASE}/projects/{self.project}/regions/{region}",
                     "properties": {"labels": t["labels"], "machineType": t["machine_type"]}}

    def _bulk_insert(self, region: str, body: dict[str, Any]) -> tuple[int, Any]:
        """What regionInstances.bulkInsert answers: checked up front (template, names,
        capacity, quota: an HTTP error and nothing made), then an operation that makes the
        instances (PROVISIONING, RUNNING once it is DONE) in ONE allowed zone, or ends with
        an error and makes none (min_count = count)."""
        self.bulk_inserts.append(body)
        names = list(body.get("perInstanceProperties") or {})
        source = str(body.get("sourceInstanceTemplate", ""))
        tname = source.rsplit("/", 1)[-1]
        template = self.templates.get((region, tname))
        elsewhere = _outside(region, source, body.get("locationPolicy") or {})
        if elsewhere:  # a regional request: its template and zones are in its region
            return 400, _error(400, f"Invalid value for field 'resource': {elsewhere} is not "
                               f"in region {region}", reason="invalid")
        count, least = int(body.get("count", 0)), int(body.get("minCount", body.get("count", 0)))
        if template is None:
            return 404, _error(404, f"The resource 'projects/{self.project}/regions/{region}/"
                               f"instanceTemplates/{tname}' was not found")
        if not names or count != len(names) or least > count:
            return 400, _error(400, "Invalid value for field 'resource.count'", reason="invalid")
        taken = [n for n in names if self.zones_of(n)]
        if taken:
            return 409, _error(409, f"The resource '{taken[0]}' already exists", reason="alreadyExists")
        if region in self._quota:
            return 403, _error(403, f"Quota '{self._quota[region]}' exceeded.  Limit: 0.0 in "
                               f"region {region}.", reason="quotaExceeded")
        zones = [z for z in _allowed_zones(region, body.get("locationPolicy") or {})
                 if z not in self._exhausted]
        if not zones:
            return 503, _error(503, "The zone does not have enough resources available to "
                               "fulfill the request. Try a different zone, or try again later.",
                               reason="insufficientCapacity")
        zone = zones[0]
        op = {"name": f"operation-bulk-{next(self._ids)}", "region": region, "zone": zone,
              "done": False, "error": None, "names": names}
        if self._exhaust_calls:  # started, then refused: the operation ends with the code
            code = self._exhaust_calls.pop(0)
            op["error"] = (code, f"The zone 'projects/{self.project}/zones/{zone}' does not have "
                           "enough resources available to fulfill the request.")
        else:
            for n in names:
                self.add(n, zone, "PROVISIONING", template["labels"],
                         service_account=template["service_account"],
                         instance_id=str(500000 + next(self._ids)))
                self.instances[(zone, n)].update(template=tname,
                                                 termination_action=template["termination_action"],
                                                 provisioning_model=template["provisioning_model"])
        self._region_ops[op["name"]] = op
        return 200, self._region_op_body(op)

    def _finish_region_op(self, name: str) -> dict[str, Any]:
        op = self._region_ops[name]
        if not op["done"]:
            op["done"] = True
            for n in op["names"] if op["error"] is None else []:
                inst = self.instances.get((op["zone"], n))
                if inst is not None:
                    inst["status"], inst["last_start"] = "RUNNING", _now()
        return self._region_op_body(op)

    def _region_op_body(self, op: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "compute#operation", "name": op["name"], "operationType": "bulkInsert",
            "status": "DONE" if op["done"] else "RUNNING",
            "region": f"{BASE}/projects/{self.project}/regions/{op['region']}"}
        if op["done"] and op["error"]:
            out["error"] = {"errors": [{"code": op["error"][0], "message": op["error"][1]}]}
            out["httpErrorStatusCode"] = 503
        return out

    def _region_op(self, region: str, name: str, done: bool = True) -> dict[str, Any]:
        """An address delete answers RUNNING; its operation is DONE when next read."""
        return {"kind": "compute#operation", "name": name, "status": "DONE" if done else "RUNNING",
                "operationType": "delete", "region": f"{BASE}/projects/{self.project}/regions/{region}"}

    def _body(self, zone: str, name: str) -> dict[str, Any]:
        inst = self.instances[(zone, name)]
        zone_url = f"{BASE}/projects/{self.project}/zones/{zone}"
        body = {"kind": "compute#instance", "id": inst["id"], "name": name,
                "status": inst["status"], "labels": inst["labels"], "zone": zone_url}  # fmt: skip
        if inst.get("service_account"):
            body["serviceAccounts"] = [{"email": inst["service_account"],
                                        "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}]
        for key, field_ in (("last_start", "lastStartTimestamp"), ("last_stop", "lastStopTimestamp")):
            if inst.get(key):
                body[field_] = inst[key]
        if inst["ip"]:
            body["networkInterfaces"] = [{"name": "nic0", "networkIP": inst["ip"]}]
        return body

    def _instance(self, method: str, zone: str, name: str, verb: str | None) -> tuple[int, Any]:
        if (zone, name) not in self.instances:
            where = f"projects/{self.project}/zones/{zone}/instances/{name}"
            return 404, _error(404, f"The resource '{where}' was not found")
        if method == "GET" and verb is None:
            return 200, self._body(zone, name)
        kind = "delete" if method == "DELETE" and verb is None else verb
        if method not in ("POST", "DELETE") or kind not in _EFFECT:
            return 400, _error(400, f"fake GCE: unsupported {method} {verb}")
        op = _Op(f"operation-{next(self._ids)}", zone, name, kind,
                 error=self._fail.pop((kind, name), None) or self._capacity_error(kind, zone, name),
                 stuck=(kind, name) in self._stuck,
                 target_id=self.instances[(zone, name)]["id"])  # fmt: skip
        self._stuck.discard((kind, name))
        if not op.error:
            self.instances[(zone, name)]["status"] = _EFFECT[kind][0]
        self._ops[op.name] = op
        return 200, op.body(self.project)

    def _operation(self, name: str) -> tuple[int, Any]:
        op = self._ops.get(name)
        if op is None:
            return 404, _error(404, f"operation {name} not found")
        if not op.done and not op.stuck:
            op.done = True
            key = (op.zone, op.instance)
            if op.error is None and key in self.instances:
                final = _EFFECT[op.kind][1]
                if final is None:
                    del self.instances[key]
                else:
                    self.instances[key]["status"] = final
                    stamp = "last_start" if final == "RUNNING" else "last_stop"
                    self.instances[key][stamp] = _now()
        return 200, op.body(self.project)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "-00:00"


def _error(code: int, message: str, reason: str | None = None) -> dict[str, Any]:
    detail: dict[str, str] = {"message": message}
    if reason:
        detail["reason"] = reason
    return {"error": {"code": code, "message": message, "errors": [detail]}}


def _outside(region: str, template: str, policy: dict[str, Any]) -> str | None:
    """What a regionInstances.bulkInsert in `region` names of another region: its regional
    template, or a zone of its location policy (None: all in `region`)."""
    from spotbench.catalog import GCP_CATALOG

    m = re.search(r"/regions/([^/]+)/instanceTemplates/", template)
    if m and m.group(1) != region:
        return template
    zones = [k.rsplit("/", 1)[-1] for k in (policy.get("locations") or {})]
    return next((f"zones/{z}" for z in zones if GCP_CATALOG.region_of(z) != region), None)


def _allowed_zones(region: str, policy: dict[str, Any]) -> list[str]:
    """The zones a location policy lets a regional bulkInsert use: those it ALLOWs, else
    every catalog zone of the region it does not DENY (sorted)."""
    from spotbench.catalog import GCP_CATALOG

    prefs = {k.rsplit("/", 1)[-1]: v.get("preference") for k, v in
             (policy.get("locations") or {}).items()}
    allowed = sorted(z for z, p in prefs.items() if p == "ALLOW")
    if allowed:
        return allowed
    every = [GCP_CATALOG.zone_name(region, x) for x in GCP_CATALOG.zones.get(region, "")]
    return [z for z in every if prefs.get(z) != "DENY"]


class _Handler(BaseHTTPRequestHandler):
    fake: FakeGce
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # TCP_NODELAY: see tests/local_http.py (40 ms per answer)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            sent = json.loads(raw) if raw else None
        except ValueError:
            sent = None
        url = urlsplit(self.path)
        status, body = self.fake.handle(self.command, url.path, parse_qs(url.query),
                                        sent if isinstance(sent, dict) else None)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

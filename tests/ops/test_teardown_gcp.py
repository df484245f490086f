"""GCP orphan sweep with the real google-cloud-compute REST client against the project's
fake GCE endpoint (tests/clouds/fake_gce.py), extended here with static addresses."""

from __future__ import annotations

import re
from typing import Any

import pytest
from google.auth.credentials import AnonymousCredentials

from spotbench.clouds.gcp_orphans import GcpSweeper
from spotbench.ops.teardown import teardown
from tests.clouds.fake_gce import _FILTER_TERM, BASE, FakeGce

_ADDR_AGG = re.compile(r"^/compute/v1/projects/[^/]+/aggregated/addresses$")
_ADDR = re.compile(r"^/compute/v1/projects/[^/]+/regions/(?P<r>[^/]+)/addresses/(?P<a>[^/]+)$")
_REGION_OP = re.compile(r"^/compute/v1/projects/[^/]+/regions/(?P<r>[^/]+)/operations/(?P<o>[^/]+?)(/wait)?$")


class FakeGceAddresses(FakeGce):
    def __init__(self) -> None:
        super().__init__()
        self.addresses: dict[tuple[str, str], dict[str, str]] = {}

    def _op(self, region: str, name: str) -> dict[str, Any]:
        return {"kind": "compute#operation", "name": name, "status": "DONE", "operationType": "delete",
                "region": f"{BASE}/projects/{self.project}/regions/{region}"}

    def handle(self, method: str, path: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        if _ADDR_AGG.match(path):
            self.calls.append((method, path))
            wanted = dict(_FILTER_TERM.findall(query.get("filter", [""])[0]))
            items: dict[str, Any] = {}
            for (region, name), labels in sorted(self.addresses.items()):
                if all(labels.get(k) == v for k, v in wanted.items()):
                    items.setdefault(f"regions/{region}", {"addresses": []})["addresses"].append(
                        {"name": name, "labels": labels, "status": "RESERVED"})
            return 200, {"kind": "compute#addressAggregatedList", "items": items}
        if (m := _ADDR.match(path)) and method == "DELETE":
            self.calls.append((method, path))
            if self.addresses.pop((m["r"], m["a"]), None) is None:
                return 404, {"error": {"code": 404, "message": "not found"}}
            return 200, self._op(m["r"], f"addr-op-{m['a']}")
        if m := _REGION_OP.match(path):
            return 200, self._op(m["r"], m["o"])
        return super().handle(method, path, query)


@pytest.fixture
def gce():
    fake = FakeGceAddresses().start()
    yield fake
    fake.stop()


def test_instances_and_addresses_in_every_zone_are_swept(gce):
    ours = {"managed-by": "spotbench", "spotbench-sweep": "osu"}
    gce.add("osu-a-l0", "us-central1-a", "RUNNING", ours)
    gce.add("osu-b-l0", "europe-west1-b", "TERMINATED", ours)  # another region: still found
    gce.add("web", "us-central1-a", "RUNNING", {"team": "web"})
    gce.add("other-l0", "us-central1-a", "RUNNING", {"managed-by": "spotbench", "spotbench-sweep": "x"})
    gce.addresses[("us-central1", "osu-a-l0-ip")] = ours
    gce.addresses[("us-central1", "web-ip")] = {"team": "web"}
    sweeper = GcpSweeper("proj", api_endpoint=gce.url, credentials=AnonymousCredentials())

    dry = teardown("osu", sweeper, yes=False, echo=lambda _: None)
    assert sorted((r.kind, r.id, r.where) for r in dry.found) == [
        ("address", "osu-a-l0-ip", "us-central1"),
        ("instance", "osu-a-l0", "us-central1-a"),
        ("instance", "osu-b-l0", "europe-west1-b"),
    ]
    assert dry.found[-1].kind == "address"  # addresses go after the instances holding them
    assert gce.mutations() == [] and len(gce.addresses) == 2

    done = teardown("osu", sweeper, yes=True, echo=lambda _: None)
    assert not done.failed, done.failed
    assert set(gce.instances) == {("us-central1-a", "web"), ("us-central1-a", "other-l0")}
    assert set(gce.addresses) == {("us-central1", "web-ip")}

    everything = teardown(None, sweeper, yes=False, echo=lambda _: None)
    assert [r.id for r in everything.found] == ["other-l0"]


def test_a_failed_delete_is_reported_and_the_rest_removed(gce):
    ours = {"managed-by": "spotbench", "spotbench-sweep": "osu"}
    gce.add("osu-a-l0", "us-central1-a", "RUNNING", ours)
    gce.add("osu-a-p0", "us-central1-a", "RUNNING", ours)
    gce.fail_next("delete", "osu-a-l0", "RESOURCE_IN_USE", "in use by a test")
    report = teardown("osu", GcpSweeper("proj", api_endpoint=gce.url, credentials=AnonymousCredentials()),
                      yes=True, echo=lambda _: None)
    assert [r.id for r in report.removed] == ["osu-a-p0"]
    (res, why), = report.failed
    assert res.id == "osu-a-l0" and why
    assert "1 could not be removed" in report.summary() and "osu-a-l0" in report.summary()

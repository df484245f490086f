"""GCP orphan sweep with the real google-cloud-compute REST client against the project's
fake GCE endpoint (tests/clouds/fake_gce.py, which serves static addresses too)."""

from __future__ import annotations

import pytest
from google.auth.credentials import AnonymousCredentials

from spotbench.clouds.gcp.orphans import GcpSweeper
from spotbench.ops.teardown import teardown
from tests.clouds.fake_gce import FakeGce


@pytest.fixture
def gce():
    fake = FakeGce().start()
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

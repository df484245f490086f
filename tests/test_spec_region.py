"""The spec's region has one home, `CloudFacts.sweep_region`: its `region` when given, else its
zone's (the cloud's region-of-zone rule); the policy, the GCP settings, GCP preflight and the
price lookup all ask it (issue #25: it was written out three times)."""

from __future__ import annotations

import pytest

import spotbench.clouds.gcp.preflight as gcp_preflight
from spotbench.clouds.gcp import region_of
from spotbench.facts import facts_of
from spotbench.facts.base import CloudFacts
from spotbench.interfaces import Problem
from spotbench.policy import Policy, violations
from spotbench.spec import load_spec


def _gcp(**over) -> dict:
    base = {"name": "g", "cloud": "gcp", "zone": "us-central1-a", "gcp": {"project": "p"},
            "workload": {"name": "osu"}, "matrix": {"machine_type": ["e2-standard-2"]},
            "schedule": {"cron": "0 3 * * *"}, "deadline": "1h"}
    return {**base, **over}


@pytest.mark.parametrize(("cloud", "region", "zone", "expected"), [
    ("gcp", None, "europe-west4-b", "europe-west4"),  # zone only: the zone's region
    ("gcp", "europe-west4", None, "europe-west4"),  # region only: itself
    ("gcp", "europe-west4", "europe-west4-b", "europe-west4"),  # both: the region given
    ("gcp", None, None, None),  # neither
    ("aws", None, "us-east-1a", "us-east-1"),
    ("aws", "eu-west-1", None, "eu-west-1"),
    ("aws", "us-east-1", "us-east-1b", "us-east-1"),
])
def test_the_specs_region_is_its_region_else_its_zones(cloud, region, zone, expected):
    assert facts_of(cloud).sweep_region(region, zone) == expected


@pytest.mark.parametrize(("region", "zone", "expected"), [
    (None, "europe-west4-b", "europe-west4"),
    ("europe-west4", "europe-west4-b", "europe-west4"),  # (a GCP spec always gives its zone)
])
def test_policy_and_gcp_settings_read_the_same_region(region, zone, expected):
    spec = load_spec(_gcp(region=region, zone=zone))
    assert region_of(spec) == expected
    refused = violations(spec, Policy(regions=["us-central1"]))
    assert f"region {expected!r}: the policy allows regions us-central1" in refused
    assert violations(spec, Policy(regions=[expected])) == []


def test_every_reader_of_the_specs_region_asks_the_one_rule(monkeypatch):
    """Policy, the GCP settings and GCP preflight get the region from `sweep_region`: a
    different answer there is the answer everywhere."""
    asked: list[tuple[str | None, str | None]] = []

    def rule(self: CloudFacts, region: str | None, zone: str | None) -> str | None:
        asked.append((region, zone))
        return "elsewhere1"

    spec = load_spec(_gcp())
    monkeypatch.setattr(CloudFacts, "sweep_region", rule)
    assert region_of(spec) == "elsewhere1"
    assert any("region 'elsewhere1'" in v for v in violations(spec, Policy(regions=["x"])))

    seen: list[str] = []

    def project(api: object, project: str) -> tuple[Problem, None]:  # (its problem, its quotas)
        seen.append(project)
        return Problem("project", "stop here", "-"), None

    class Api:
        def __init__(self, endpoint: str | None) -> None:
            pass

    monkeypatch.setattr(gcp_preflight, "Api", Api)
    monkeypatch.setattr(gcp_preflight, "_project", project)
    before = len(asked)
    gcp_preflight.check(spec, "p")
    assert seen == ["p"] and asked[before:] == [(None, "us-central1-a")]

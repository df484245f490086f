"""Preflight per candidate location and the preview rows of `lifecycle: created` on AWS
(issue #26)."""

from __future__ import annotations

import base64

import boto3
import pytest

from spotbench.clouds.aws.preflight import zone_offerings
from spotbench.preview import Declared, boot_images, key_properties
from tests.moto_server import MotoServer

REGION = "us-east-1"


@pytest.fixture
def ec2(moto_url, monkeypatch):
    MotoServer.fresh_account(moto_url, monkeypatch, REGION)
    return boto3.client("ec2", region_name=REGION, endpoint_url=moto_url)


def test_capacity_preflight_names_a_candidate_zone_that_does_not_offer_the_type(ec2):
    # moto's offerings (from EC2's): g4dn.xlarge in us-east-1a/b/c/d/f, not in us-east-1e
    problems = zone_offerings(ec2, ["g4dn.xlarge"], [f"{REGION}a", f"{REGION}e"], REGION)
    assert [p.check for p in problems] == ["zones"]
    assert "us-east-1e does not offer g4dn.xlarge" in problems[0].message
    assert "drop us-east-1e from `zones`" in problems[0].fix
    assert zone_offerings(ec2, ["g4dn.xlarge"], [f"{REGION}a", f"{REGION}b"], REGION) == []


def test_capacity_preview_shows_a_launch_template_row():
    doc = "#cloud-config\nwrite_files:\n- content: \"/usr/bin/docker run --rm img:1\"\n"
    d = Declared("aws:ec2/launchTemplate:LaunchTemplate", "g-l0-a", {
        "instanceType": "g4dn.xlarge", "userData": base64.b64encode(doc.encode()).decode(),
        "metadataOptions": {"httpTokens": "required"},
        "instanceInitiatedShutdownBehavior": "terminate",
        "networkInterfaces": [{"privateIpAddress": "10.43.2.10"}],
        "tags": {"spotbench-member": "g-l0", "spotbench-zone": "us-east-1b",
                 "spotbench-market": "spot"}}, True)
    props = key_properties(d)
    assert props["member"] == "g-l0" and props["zone"] == "us-east-1b"
    assert props["imdsTokens"] == "required" and props["onShutdown"] == "terminate"
    assert props["privateIp"] == "10.43.2.10" and props["market"] == "spot"
    assert boot_images(d) == ["img:1"]

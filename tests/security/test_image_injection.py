"""Attack: spec values that would run commands as root on every member VM.

The spec's `image` is pasted into the member's systemd unit (ExecStart, and for a registry
ExecStartPre) on GCP and AWS, and its registry host into a login script. Each payload must be
refused where the spec is read (naming the field) and again where the boot document is
rendered; a valid reference renders as exactly one argument.
"""

from __future__ import annotations

import shlex

import pytest

from infra.aws.user_data import user_data as aws_user_data
from infra.gcp.cloud_init import user_data as gcp_user_data
from spotbench.image_ref import InvalidImage
from spotbench.spec import SpecError, load_spec

pytestmark = pytest.mark.security

INJECTIONS = {
    "command separator": "busybox; touch /tmp/pwned",
    "command substitution": "busybox$(touch /tmp/pwned)",
    "backticks": "busybox`id`",
    "newline adds a unit line": "busybox\nExecStartPre=/bin/touch /tmp/pwned",
    "space adds an argument": "busybox --privileged",
    "option instead of an image": "--privileged",
    "systemd specifier": "busybox:%h",
    "systemd variable": "busybox:${PATH}",
    "quote breaks out": "busybox' ; id '",
    "pipe": "busybox|sh",
    "redirect": "busybox>/etc/passwd",
    "ecr host with a command": "1.dkr.ecr.$(id).amazonaws.com/x:1",
    "nul byte": "busybox\x00",
}


def _spec(image: str) -> dict:
    return {"name": "inj", "cloud": "gcp", "zone": "us-central1-a", "workload": {"name": "osu"},
            "matrix": {"machine_type": ["n2-standard-2"]}, "gcp": {"project": "p"},
            "image": image}


@pytest.mark.parametrize("payload", INJECTIONS.values(), ids=INJECTIONS.keys())
def test_the_spec_refuses_the_image(payload) -> None:
    with pytest.raises(SpecError, match="image"):
        load_spec(_spec(payload))


@pytest.mark.parametrize("payload", INJECTIONS.values(), ids=INJECTIONS.keys())
def test_boot_documents_refuse_the_image(payload) -> None:
    with pytest.raises(InvalidImage):
        gcp_user_data(image=payload, env={"A": "1"})
    with pytest.raises(InvalidImage):
        aws_user_data(image=payload, env={"A": "1"})


@pytest.mark.parametrize("image", [
    "busybox", "ghcr.io/org/osu:1.0", "europe-docker.pkg.dev/p/repo/osu@sha256:" + "a" * 64,
    "123456789012.dkr.ecr.eu-west-1.amazonaws.com/spotbench/osu:1", "localhost:5000/a__b/c-d:v1",
])
def test_a_valid_reference_is_one_argument_of_exec_start(image) -> None:
    assert load_spec(_spec(image)).image == image
    for doc in (gcp_user_data(image=image, env={}), aws_user_data(image=image, env={})):
        start = next(line for line in doc.splitlines() if "ExecStart=" in line and "Pre" not in line)
        argv = shlex.split(start.split("ExecStart=", 1)[1])
        assert argv[-1] == image and argv[0] == "/usr/bin/docker"

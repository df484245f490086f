"""Every member's host-side deadline is its group's deadline + grace, not later
(`pytest -m faults`): the local cloud's (supervisor, and coreutils `timeout` when no supervisor
is left: tests/faults/test_faults.py proves it end to end) and GCE's max_run_duration on every
member the GCP program declares (GCE itself stops the VM: no function, tick or guest process
is needed). AWS's counterpart, a poweroff timer each run boot arms, is proven in
tests/fidelity/test_aws_deadman.py."""

from __future__ import annotations

import runpy
import subprocess
import time
from pathlib import Path

import pytest

from infra.gcp.vms import scheduling
from spotbench.clouds.local._local_supervisor import TIMEOUT_EXIT, host_deadline
from spotbench.localrun.deploy import member_max_run_s
from spotbench.spec import load_spec

pytestmark = pytest.mark.faults

GRACE_S = 30.0
ROOT = Path(__file__).resolve().parents[2]
GCP_EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("gcp-*.yaml"))


@pytest.mark.parametrize("deadline", ["45s", "2m", "1h"])
def test_a_members_own_limit_is_its_groups_deadline(deadline: str) -> None:
    spec = load_spec({"name": "d", "cloud": "local", "deadline": deadline, "workload": {"name": "osu"}})
    assert member_max_run_s(spec, GRACE_S) == spec.deadline.total_seconds()


@pytest.mark.parametrize("deadline", ["45s", "2m", "1h"])
def test_gcp_max_run_duration_is_not_past_deadline_plus_grace(deadline: str) -> None:
    spec = load_spec({"name": "d", "cloud": "local", "deadline": deadline, "workload": {"name": "osu"}})
    s = scheduling(spec, gpu=False, compact=False, domain=None)
    assert s["instance_termination_action"] == "STOP"
    assert spec.deadline.total_seconds() <= s["max_run_duration"]["seconds"] <= spec.deadline.total_seconds() + GRACE_S


def test_the_host_deadline_stops_a_command_that_ignores_sigterm_with_no_supervisor(tmp_path) -> None:
    """What `timeout` does around a member: SIGTERM at max_run_s, SIGKILL after the grace.

    The command marks the moment it ignores SIGTERM: a loaded machine once took longer than
    the deadline to start Python, and SIGTERM then ended it before the handler existed."""
    ready = tmp_path / "ignoring"
    stubborn = ["python3", "-S", "-c", "import signal, time, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "open(sys.argv[1], 'w').close(); time.sleep(60)", str(ready)]
    deadline, grace = 4.0, 1.0
    began = time.monotonic()
    proc = subprocess.run(host_deadline(stubborn, deadline, grace), timeout=60)
    took = time.monotonic() - began
    assert ready.exists(), "the command never got to ignore SIGTERM before its deadline"
    assert proc.returncode in (-9, 128 + 9, TIMEOUT_EXIT), proc.returncode
    assert deadline + grace - 0.2 <= took <= deadline + grace + 10.0, took


@pytest.mark.parametrize("example", GCP_EXAMPLES)
def test_every_gcp_member_is_stopped_by_gce_itself_by_deadline_plus_grace(example: str) -> None:
    """The Pulumi program of each GCP example (OSU, TF parameter server and all-reduce, GPU,
    a user's container, GPU on any zone) under mocks: every member VM carries a max run
    duration between the deadline and deadline + grace, and GCE stops (not deletes) it then;
    in the created lifecycle every template carries it, and GCE deletes the VM then."""
    from infra.preview import PROGRAM
    from tests.infra.conftest import snapshot

    path = ROOT / "examples" / example
    spec = load_spec(path)
    config = {"gcp:project": "proj-1", "gcp:region": "us-central1", "spotbench:spec": str(path)}
    declared = snapshot(lambda: runpy.run_path(str(PROGRAM), run_name="__main__"), config)
    deadline = spec.deadline.total_seconds()
    if spec.lifecycle == "created":  # no VM declared: a template per group, role and region
        vms = declared.of_type("gcp:compute/regionInstanceTemplate:RegionInstanceTemplate")
        roles = {(g.id, m.role) for g in spec.plan() for m in g.members}
        assert len(vms) == len(roles) * len(spec.candidate_regions), example
        action = "DELETE"
    else:
        vms = declared.of_type("gcp:compute/instance:Instance")
        members = {m.name for g in spec.plan() for m in g.members}
        assert {vm.inputs["name"] for vm in vms} == members, example
        action = "STOP"
    for vm in vms:
        s = vm.inputs["scheduling"]
        assert deadline <= s["maxRunDuration"]["seconds"] <= deadline + GRACE_S, (vm.inputs["name"], s)
        assert s["instanceTerminationAction"] == action, (vm.inputs["name"], s)

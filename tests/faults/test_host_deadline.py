"""Every member's host-side deadline is its group's deadline + grace, not later
(`pytest -m faults`): the local cloud's (supervisor, and coreutils `timeout` when no supervisor
is left: tests/faults/test_faults.py proves it end to end) and GCE's max_run_duration."""

from __future__ import annotations

import subprocess
import time

import pytest

from infra.gcp.vms import scheduling
from spotbench.clouds.local._local_supervisor import TIMEOUT_EXIT, host_deadline
from spotbench.localrun.deploy import member_max_run_s
from spotbench.spec import load_spec

pytestmark = pytest.mark.faults

GRACE_S = 30.0


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


def test_the_host_deadline_stops_a_command_that_ignores_sigterm_with_no_supervisor() -> None:
    """What `timeout` does around a member: SIGTERM at max_run_s, SIGKILL after the grace."""
    stubborn = ["python3", "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"]
    began = time.monotonic()
    proc = subprocess.run(host_deadline(stubborn, 1.0, 1.0), timeout=30)
    took = time.monotonic() - began
    assert proc.returncode in (-9, 128 + 9, TIMEOUT_EXIT), proc.returncode
    assert 1.8 <= took <= 6.0, took

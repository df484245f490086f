"""EC2 has no run-duration limit: if the stop tick never lands (the stop Lambda errors, is
throttled, or its asynchronous invocation is lost), an on-demand member would run — and bill —
forever. Every boot that runs the workload therefore arms a dead-man switch first: a
transient systemd timer that powers the instance off at the sweep's deadline + grace.

Static: the rendered user-data arms it, before anything that may hang. In the boot lab
(tests/fidelity/boot.py; `systemd-run` is a shim whose timer dies with its boot): the
creation boot arms nothing, each run boot arms its own, and when it fires the host powers
off with the workload still running."""

from __future__ import annotations

import functools
import re
import time

import pytest
import yaml

from infra.aws.user_data import DEADMAN_GRACE_S, DEADMAN_UNIT
from spotbench.images import IMAGE_UID
from spotbench.spec import load_spec
from tests.fidelity import aws_ssm, boot
from tests.infra.conftest import MOCKS

pytestmark = pytest.mark.fidelity
EXAMPLE = "examples/aws-osu.yaml"
FIRES_S = 3  # the lab's timer: the deadline shortened, nothing else changed


@functools.cache
def _rendered() -> tuple[tuple[boot.Rendered, ...], dict]:
    """Every member's user-data, and the SSM parameters the same declarations hold."""
    rendered, _ = boot.render(EXAMPLE, MOCKS)
    return tuple(rendered), aws_ssm.parameter_store(MOCKS.declared, rendered[0].env["AWS_REGION"])


def _members() -> tuple[boot.Rendered, ...]:
    return _rendered()[0]


def _armed_after(unit: dict[str, list[str]]) -> list[int]:
    return [int(m) for c in unit["ExecStartPre"]
            for m in re.findall(rf"systemd-run --unit={DEADMAN_UNIT} --on-active=(\d+)s", c)]


def test_every_run_boot_arms_a_poweroff_at_the_deadline_plus_grace_aws():
    deadline = int(load_spec(boot.ROOT / EXAMPLE).deadline.total_seconds())
    for r in _members():
        pre = r.unit["ExecStartPre"]
        assert _armed_after(r.unit) == [deadline + DEADMAN_GRACE_S], (r.name, pre)
        arm = next(i for i, c in enumerate(pre) if "systemd-run" in c)
        assert "boot_id" in pre[0] and arm == 1  # after the creation-boot check, before the rest
        assert "/usr/bin/systemctl poweroff" in pre[arm]
        assert f"systemctl is-active --quiet {DEADMAN_UNIT}.timer ||" in pre[arm]


def _shortened(user_data: str) -> str:
    """The member's user-data with the timer at FIRES_S and a workload that never ends."""
    doc = yaml.safe_load(user_data.removeprefix("#cloud-config\n"))
    unit = next(f for f in doc["write_files"] if f["path"].endswith(".service"))
    text, n = re.subn(r"--on-active=\d+s", f"--on-active={FIRES_S}s", unit["content"])
    assert n == 1
    unit["content"] = re.sub(r"(?m)^ExecStart=.*$", "ExecStart=/bin/sleep 600", text)
    return "#cloud-config\n" + yaml.safe_dump(doc, sort_keys=False, width=10_000)


def test_the_lab_host_powers_off_when_the_deadman_fires_on_each_run_boot_aws(lab_dir):
    member = next(r for r in _members() if r.ctx.role == "launcher")
    store = boot.shared_results(lab_dir, IMAGE_UID)
    with boot.Lab(lab_dir) as lab:
        lab.serve_secrets(_rendered()[1])
        vm = lab.vm(member.name, member.ctx.me.host, "aws",
                    _shortened(boot.localize(member, store.url, lab.done_url)), member.account,
                    member.image)
        lab.boot(vm)  # the creation boot: installs, arms nothing
        assert lab.wait(vm, 60) == 0, vm.journal
        assert vm.calls("systemd-run") == []
        boot.open_run(store, IMAGE_UID)
        for n in (1, 2):
            started = time.monotonic()
            lab.boot(vm)
            ended = lab.wait(vm, 60)
            took = time.monotonic() - started
            assert ended == 0 and vm.powered_off, (n, vm.journal[-3000:])
            assert took >= FIRES_S, took
            armed = vm.calls("systemd-run")
            assert len(armed) == n, armed  # each run boot arms its own timer
            assert f"--on-active={FIRES_S}s" in armed[-1]["argv"]
            fired = [c for c in vm.calls("systemd") if c.get("phase") == "elapsed"]
            assert len(fired) == n and fired[-1]["argv"] == ["/usr/bin/systemctl", "poweroff"]
            # the unit did not end by itself (its workload sleeps 600 s): the poweroff ended it
            mains = [c for c in vm.calls("systemd") if c.get("phase") == "main"]
            assert all(c["rc"] != 0 for c in mains), mains

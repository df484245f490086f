"""TF checkpoints on Cloud Storage, as a run group's own service account, every call checked
against the IAM policy `infra/` declares (tests/fidelity/gcp_iam.py).

A `tf-mnist` sweep with `checkpoint_every` (two run groups, `…-t1` and `…-t2`) is declared
under Pulumi mocks; the local Google endpoint refuses what the declared bindings and their
IAM conditions do not allow. The chief of group t1 runs the real `CheckpointStore` path as
its instance would: restore (nothing stored), save twice (the older checkpoint is deleted),
record a preempted attempt's progress, then a new attempt restores and a complete run clears.
The same account is then refused on group t2's checkpoints, on a name its group id prefixes,
and on deleting or overwriting records and the run ledger: checkpointing widens nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import gcsfs
import pytest

from spotbench.results import ResultStore
from tests.clouds.google_endpoint import GoogleEndpoint
from tests.fidelity.gcp_iam import DeclaredPolicy, Need
from tests.fidelity.test_gcp_permissions import PROJECT, ZONE, Deployment, Enforcer, deploy

pytestmark = pytest.mark.fidelity

RUN = "20260105T030000Z"
SPEC = {
    "name": "tfx", "cloud": "gcp", "zone": ZONE, "gcp": {"project": PROJECT},
    "workload": {"name": "tf-mnist", "strategy": "parameter_server", "workers": 1, "ps": 1,
                 "steps": 40, "checkpoint_every": 10},
    "matrix": {"machine_type": ["n1-standard-1"]}, "trials": 2,
    "schedule": {"cron": "0 3 * * *", "timezone": "UTC"}, "deadline": "45m",
}  # fmt: skip


@dataclass
class World:
    dep: Deployment
    endpoint: GoogleEndpoint
    policy: DeclaredPolicy
    enforcer: Enforcer

    def chief(self, group_suffix: str) -> str:
        return next(i["name"] for i in self.dep.instances
                    if i["labels"]["spotbench-group"].endswith(group_suffix)
                    and self.dep.context(i["name"]).role == "chief")  # fmt: skip

    def objects(self) -> dict[str, bytes]:
        return self.endpoint.gcs.buckets[self.dep.bucket]


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    dep = deploy(SPEC)
    policy = DeclaredPolicy.from_declared(dep.declared, PROJECT)
    enforcer = Enforcer(policy)
    endpoint = GoogleEndpoint(authorize=enforcer)
    enforcer.endpoint = endpoint
    endpoint.gcs.add_bucket(dep.bucket)
    yield World(dep, endpoint, policy, enforcer)
    endpoint.stop()


@pytest.fixture
def as_vm(world, monkeypatch):
    def enter(name: str) -> str:
        gcsfs.GCSFileSystem.clear_instance_cache()
        identity = world.dep.vm_sa(name)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", world.endpoint.url_for(identity))
        monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # as on the VMs
        return identity

    yield enter
    gcsfs.GCSFileSystem.clear_instance_cache()


def test_gcp_tf_checkpoints_save_restore_and_clear_as_the_groups_account(world, as_vm):
    import tensorflow as tf

    from workloads.tf_mnist import model as m
    from workloads.tf_mnist.checkpoints import CheckpointStore

    name = world.chief("-t1")
    ctx = world.dep.context(name)
    vm = as_vm(name)
    strategy = tf.distribute.get_strategy()
    store = CheckpointStore(ctx.results_url, ctx.group, RUN)
    model, step, checkpoint, start, redone = m.build_and_restore(strategy, store)
    assert (start, redone) == (0, 0)
    for at in (10, 20):
        step.assign(at)
        store.save(checkpoint, at)
    store.write_progress(27)
    store.write_progress(28)  # progress.json overwritten in place
    trained = [v.numpy().copy() for v in model.trainable_variables]
    folder = f"{ctx.results_url.removeprefix(f'gs://{world.dep.bucket}/')}/checkpoints/{ctx.group}/{RUN}/"
    assert not any(k.startswith(folder + "ckpt-10.") for k in world.objects())  # replaced

    store = CheckpointStore(ctx.results_url, ctx.group, RUN)  # the group restarted
    model, step, checkpoint, start, redone = m.build_and_restore(strategy, store)
    assert (start, redone, int(step.numpy())) == (20, 8, 20)
    assert all((a == v.numpy()).all() for a, v in zip(trained, model.trainable_variables))
    store.clear()

    calls = world.endpoint.by(vm)
    assert calls and not [c for c in calls if c.denied], [c for c in calls if c.denied]
    assert not [k for k in world.objects() if k.startswith(folder)]
    # least privilege: each permission the checkpoint grant adds is used by this path
    needs = [n for c, ns in world.enforcer.needs if c.identity == vm for n in ns]
    used = {n.permission for n in needs if n.resource.endswith(tuple(
        f"/{folder}{f}" for f in ("latest.json", "progress.json")))}  # fmt: skip
    assert {"storage.objects.create", "storage.objects.delete"} <= used, used


@pytest.mark.security
def test_gcp_group_cannot_touch_another_groups_checkpoints_or_delete_results(world, as_vm):
    """Group t1's account writes, overwrites and deletes group t2's checkpoints, a folder
    its own group id prefixes (`…-t1` → `…-t10`), and deletes or overwrites records and the
    run ledger: all refused, while its own checkpoint folder is writable."""
    name = world.chief("-t1")
    ctx = world.dep.context(name)
    mine = ctx.group
    other = mine.removesuffix("-t1") + "-t2"
    root = ctx.results_url.removeprefix("gs://")
    key = lambda path: path.split("/", 1)[1]  # noqa: E731
    theirs = f"{root}/checkpoints/{other}/{RUN}/latest.json"
    record, ledger = f"{root}/runs/{RUN}/{mine}.1.jsonl", f"{root}/runs/{RUN}/run.json"
    for path in (theirs, record, ledger):
        world.objects()[key(path)] = b"original"
    vm = as_vm(name)
    fs = ResultStore(ctx.results_url).fs  # the client the member's code uses
    writes = [theirs, f"{root}/checkpoints/{other}/{RUN}/ckpt-9.index",
              f"{root}/checkpoints/{mine}0/{RUN}/latest.json",
              f"{root}/checkpoints/x/{mine}/latest.json", record, ledger]
    for path in writes:
        with pytest.raises(OSError, match="Forbidden"):
            fs.pipe_file(path, b"forged")
    for path in (theirs, record, ledger):
        with pytest.raises(OSError, match="Forbidden"):
            fs.rm_file(path)
        assert world.objects()[key(path)] == b"original"
    assert not {key(p) for p in writes} - {key(theirs), key(record), key(ledger)} & set(world.objects())
    fs.pipe_file(f"{root}/checkpoints/{mine}/{RUN}/latest.json", b"{}")  # its own: granted
    fs.pipe_file(f"{root}/checkpoints/{mine}/{RUN}/latest.json", b"{}")  # and replaced
    fs.rm_file(f"{root}/checkpoints/{mine}/{RUN}/latest.json")
    denied = {c.denied for c in world.endpoint.by(vm) if c.denied}
    assert denied and not any(d.startswith("UNKNOWN") for d in denied), denied
    # and an osu sweep (no checkpoints) is not granted delete anywhere
    osu = deploy({**SPEC, "name": "osx", "workload": {"name": "osu", "benchmarks": ["latency"]},
                  "matrix": {"machine_type": ["n2-standard-2"]}})
    policy = DeclaredPolicy.from_declared(osu.declared, PROJECT)
    member = osu.vm_sa(osu.instances[0]["name"])
    group = osu.instances[0]["labels"]["spotbench-group"]
    obj = f"projects/_/buckets/{osu.bucket}/objects/osx/checkpoints/{group}/{RUN}/latest.json"
    assert not policy.allows(member, Need("storage.objects.delete", obj, "storage.googleapis.com/Object"))
    assert not policy.allows(member, Need("storage.objects.create", obj, "storage.googleapis.com/Object"))

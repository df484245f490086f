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

from fsspec.registry import _registry as _fsspec_registry
import gcsfs
import gcsfs.core
import pytest

from spotbench.done_client import group_storage
from spotbench.results import ResultStore
from tests.clouds.google_endpoint import GoogleEndpoint
from tests.fidelity.gcp_iam import DeclaredPolicy, Need
from tests.fidelity.gcp_grant_front import GrantFront
from workloads.common import WorkloadRun
from tests.fidelity.test_gcp_permissions import (
    PROJECT, ZONE, Deployment, Enforcer, deploy, grant_apis, grant_front,
)

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
    front: GrantFront

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
    for inst in dep.instances:
        endpoint.gce.add(inst["name"], inst["zone"], "RUNNING", labels=inst["labels"],
                         service_account=inst["serviceAccount"]["email"])
    endpoint.gce.project = PROJECT
    grant_apis(dep, endpoint)
    front = grant_front(dep, endpoint, enforcer)
    _open_run(dep, endpoint)
    yield World(dep, endpoint, policy, enforcer, front)
    front.close()
    endpoint.stop()


def _open_run(dep: Deployment, endpoint: GoogleEndpoint) -> None:
    """Run RUN open and both groups launched now, as `start` leaves them (its account)."""
    from datetime import UTC, datetime

    gcsfs.GCSFileSystem.clear_instance_cache()
    with pytest.MonkeyPatch.context() as m:
        m.setenv("STORAGE_EMULATOR_HOST", endpoint.url_for(dep.function_sa))
        m.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        store = ResultStore(dep.function_env("grant")["SPOTBENCH_RESULTS_URL"])
        assert store.open_run(datetime.strptime(RUN, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)).run == RUN
        now = datetime.now(UTC)
        for group in {i["labels"]["spotbench-group"] for i in dep.instances}:
            store.record_launch(RUN, group, now)
    gcsfs.GCSFileSystem.clear_instance_cache()


@pytest.fixture
def as_vm(world, monkeypatch):
    def enter(name: str) -> str:
        gcsfs.GCSFileSystem.clear_instance_cache()
        identity = world.dep.vm_sa(name)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", world.endpoint.url_for(identity))
        monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # as on the VMs
        # gcsfs reads that at import (this process imported it with the default, on): the
        # VMs' plain client, not the experimental one that asks Google's Storage Control
        # API (over gRPC, outside the endpoint) for the bucket type with real credentials
        monkeypatch.setitem(_fsspec_registry, "gs", gcsfs.core.GCSFileSystem)
        import spotbench.clouds.gcp as gcp_settings  # its metadata server's identity tokens

        monkeypatch.setattr(gcp_settings, "METADATA_IDENTITY", world.front.metadata_for(name))
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
    run = WorkloadRun(ctx)  # asks `grant` (its group's checkpoint token), as __main__ does
    assert run.run_id == RUN and "token" in run.storage_options
    store = CheckpointStore(ctx.results_url, ctx.group, run.run_id, **run.storage_options)
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

    run = WorkloadRun(ctx)  # the group restarted: a new grant
    store = CheckpointStore(ctx.results_url, ctx.group, run.run_id, **run.storage_options)
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


def test_gcp_a_member_asks_grant_once_for_its_records_and_its_checkpoints(world, as_vm):
    """One `grant` answer holds the group's records policy and its checkpoint token
    (functions/grant.py): a member starting, storing its records and writing a checkpoint
    asks the grant front once (it asked twice: once for the checkpoint token at start,
    again for the records' policy at the first write)."""
    from workloads.tf_mnist.checkpoints import CheckpointStore

    name = world.chief("-t2")
    ctx = world.dep.context(name)
    as_vm(name)
    before = len(world.front.answers)
    run = WorkloadRun(ctx)
    run.record("accuracy", 0.9, "ratio")
    stored = run.finish()
    store = CheckpointStore(ctx.results_url, ctx.group, run.run_id, **run.storage_options)
    store.write_progress(3)
    assert stored.endswith(f"/runs/{RUN}/{ctx.group}.1.jsonl")
    assert store.progress() == 3
    asked = world.front.answers[before:]
    assert [status for status, _ in asked] == [200], asked


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
    vm = as_vm(name)
    # the client the member's checkpoints use: its group's downscoped token from `grant`
    # (issue #29; the member account itself writes nothing, tests/fidelity/test_gcp_permissions.py),
    # asked for while the run's ledger is still the real one
    fs = ResultStore(ctx.results_url, **group_storage(ctx).checkpoint_options).fs
    for path in (theirs, record, ledger):
        world.objects()[key(path)] = b"original"
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


"""What the GCP stack declares around its functions, against what the platform does at a
first deploy (docs/platform.md): where a gen2 build reads the source, IAM's propagation
delay, Cloud Run ingress and Cloud Scheduler's URL, the APIs the code calls."""

from __future__ import annotations

import re
from pathlib import Path

import pulumi
import pytest

from spotbench import PROJECT_ROOT
from spotbench.clouds.gcp import BOOTSTRAP_APIS
from spotbench.spec import load_spec
from tests.fidelity.cloud_run_front import FUNCTION, JOB, Deployment
from tests.infra.conftest import snapshot
from tests.fidelity.gcp_iam import OBJECT_TYPE, DeclaredPolicy, Need

PROJECT, REGION, ZONE = "proj-stack", "us-central1", "us-central1-a"
PROJECT_NUMBER = "1"  # what the mocks answer for gcp.organizations.getProject
SPEC = {"name": "st", "cloud": "gcp", "zone": ZONE, "gcp": {"project": PROJECT},
        "workload": {"name": "osu", "benchmarks": ["latency"]},
        "matrix": {"machine_type": ["n2-standard-2"]}, "trials": 1,
        "schedule": {"cron": "0 3 * * *"}, "deadline": "30m"}  # fmt: skip
SLEEP = "time:index/sleep:Sleep"


@pytest.fixture(scope="module")
def stack():
    """The declared program, and each resource's explicit dependencies (by name)."""
    deps: dict[str, list[str]] = {}
    names: dict[int, str] = {}

    def record(args: pulumi.ResourceTransformationArgs):
        names[id(args.resource)] = args.name
        deps[args.name] = [d for d in (args.opts.depends_on or [])
                           if isinstance(d, pulumi.Resource)]  # type: ignore[misc]
        return None

    spec = load_spec(SPEC)

    def program():
        from infra.gcp import GcpSweep, GcpSweepArgs

        pulumi.runtime.register_stack_transformation(record)
        GcpSweep(spec.name, GcpSweepArgs(spec=spec))

    snap = snapshot(program, {"gcp:project": PROJECT, "gcp:region": REGION})
    dep = Deployment(spec, PROJECT, snap.declared)
    by_name = {n: [names.get(id(d), "?") for d in ds] for n, ds in deps.items()}
    return dep, by_name


def test_deploy_gcp_the_build_account_reads_the_source_where_gen2_builds_fetch_it(stack):
    """Old program: the build account could read the results bucket's `_spotbench/` only;
    a gen2 build fetches its copy in `gcf-v2-sources-<number>-<region>` and failed."""
    dep, _ = stack
    policy = DeclaredPolicy.from_declared(dep.declared, PROJECT)
    sources = f"gcf-v2-sources-{PROJECT_NUMBER}-{REGION}"
    policy.bucket_projects[sources] = PROJECT  # Google's bucket, in the project
    (build_sa,) = {dep.function(e)["buildConfig"]["serviceAccount"].rsplit("/", 1)[1]
                   for e in ("start", "stop", "done", "grant")}
    member = f"serviceAccount:{build_sa}"
    fetch = Need("storage.objects.get",
                 f"projects/_/buckets/{sources}/objects/st-start/function-source.zip", OBJECT_TYPE)
    assert policy.allows(member, fetch)
    other = f"gcf-v2-sources-{PROJECT_NUMBER}-europe-west1"
    policy.bucket_projects[other] = PROJECT
    assert not policy.allows(member, Need("storage.objects.get",
                                          f"projects/_/buckets/{other}/objects/x.zip", OBJECT_TYPE))
    assert not policy.allows(member, Need("storage.objects.get",
                                          "projects/_/buckets/someone-else/objects/x", OBJECT_TYPE))


def test_deploy_gcp_what_uses_new_accounts_and_bindings_waits_for_iam_to_propagate(stack):
    """Old program: the functions' builds and the VMs used accounts and bindings the moment
    they were made."""
    dep, deps = stack
    sleeps = {d.name: d.inputs for d in dep.of_type(SLEEP)}
    assert sleeps and all(int(s["createDuration"].rstrip("s")) >= 120 for s in sleeps.values())
    for fn in dep.of_type(FUNCTION):
        waits = [w for w in deps[fn.name] if w in sleeps]
        assert waits, f"{fn.name} does not wait for IAM"
        build = {d for w in waits for d in deps[w]}
        assert any(n.endswith("-build") for n in build)
        assert any("gcf-sources" in n for n in build)
    for vm in dep.of_type("gcp:compute/instance:Instance"):
        waits = [w for w in deps[vm.name] if w in sleeps]
        assert waits, f"{vm.name} does not wait for its account's bindings"
        assert any(n.endswith("-member") for w in waits for n in deps[w])


def test_deploy_gcp_scheduler_jobs_call_the_run_app_url_with_the_functions_audience(stack):
    """Cloud Run ingress counts Cloud Scheduler internal only at the run.app URL (old
    program: the jobs called the cloudfunctions.net URL and were refused, 404)."""
    dep, _ = stack
    for action in ("start", "stop"):
        target = dep.job(action)["httpTarget"]
        assert target["uri"] == dep.run_app_url(action)
        env = dep.function(action)["serviceConfig"]["environmentVariables"]
        assert target["oidcToken"]["audience"] == env["SPOTBENCH_AUDIENCE"]
    assert len(dep.of_type(JOB)) == 2


def _called_apis() -> set[str]:
    """`<api>.googleapis.com` of every Google endpoint the GCP code calls."""
    hosts = set()
    for path in (PROJECT_ROOT / "spotbench" / "clouds" / "gcp").glob("*.py"):
        hosts |= set(re.findall(r"https://([a-z0-9]+)\.googleapis\.com", Path(path).read_text()))
    return {f"{h}.googleapis.com" for h in hosts - {"www", "oauth2"}}


def test_deploy_gcp_the_stack_enables_every_api_its_code_calls(stack):
    """Old program: the grant's signBlob (IAM Credentials) and token exchange (STS) APIs
    were not among the stack's APIs."""
    dep, _ = stack
    enabled = {s.inputs["service"] for s in dep.of_type("gcp:projects/service:Service")}
    called = _called_apis()
    assert {"iamcredentials.googleapis.com", "sts.googleapis.com"} <= called
    assert called - set(BOOTSTRAP_APIS) <= enabled

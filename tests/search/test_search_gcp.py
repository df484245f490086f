"""A search on GCP's doubles (the deployed program's functions and IAM, the GCS/GCE
endpoint): the start function asks the first trial and keeps the study in the bucket with
generation-matched writes, a member's result and `done` complete its trial, and a member's
own account cannot write the study."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gcsfs
import optuna
import pytest

from functions.app import FunctionConfig, handle
from spotbench.auth import Caller
from spotbench.results import ResultStore
from workloads.common import WorkloadRun

TICK = "2026-03-02T03:00:00Z"


@pytest.fixture(scope="module")
def gcp() -> Iterator[Any]:
    from tests.clouds.google_endpoint import GoogleEndpoint
    from tests.fidelity.gcp_iam import DeclaredPolicy
    from tests.fidelity.test_gcp_permissions import (
        PROJECT, Enforcer, _spec, deploy, grant_apis, grant_front,
    )

    spec = {k: v for k, v in _spec("sx").items() if k not in ("matrix", "trials")}
    spec["search"] = {"space": {"iterations": {"choice": [100, 200]}, "machine_type": "n2-standard-2"},
                      "method": "grid", "parallel": 1,
                      "objective": {"metric": "latency", "direction": "minimize"}}
    dep = deploy(spec)
    enforcer = Enforcer(DeclaredPolicy.from_declared(dep.declared, PROJECT))
    endpoint = GoogleEndpoint(authorize=enforcer)
    enforcer.endpoint = endpoint
    endpoint.gcs.add_bucket(dep.bucket)
    for inst in dep.instances:
        endpoint.gce.add(inst["name"], inst["zone"], labels=inst["labels"],
                         service_account=inst["serviceAccount"]["email"])
    endpoint.gce.project = PROJECT
    grant_apis(dep, endpoint)
    front = grant_front(dep, endpoint, enforcer)
    yield dep, endpoint
    front.close()
    endpoint.stop()


def test_search_gcp_functions_keep_the_study_in_the_bucket_and_a_member_cannot_write_it(gcp, monkeypatch):
    dep, endpoint = gcp
    gce = endpoint.gce
    url = endpoint.url_for(dep.function_sa)
    gcsfs.GCSFileSystem.clear_instance_cache()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
    monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    scheduler = dep.jobs[0]["httpTarget"]["oidcToken"]["serviceAccountEmail"]

    def call(action: str, body: dict, caller: Caller) -> tuple[int, dict]:
        env = {**dep.function_env(action), "SPOTBENCH_GCP_API_ENDPOINT": url}
        return handle(action, body, caller, FunctionConfig(env))

    status, answer = call("start", {"sweep": "sx", "tick": TICK}, Caller("scheduler", scheduler))
    assert status == 200, answer
    (first,) = answer["started"]
    journal = [k for k in endpoint.gcs.buckets[dep.bucket] if k.endswith(".journal")]
    assert len(journal) == 1 and "/search/" in f"/{journal[0]}"
    journal_calls = [c for c in endpoint.calls if ".journal" in c.path + repr(c.query)]
    assert any(c.q("ifGenerationMatch") == "0" for c in journal_calls)  # created only if absent
    assert any(c.q("ifGenerationMatch") not in ("", "0") for c in journal_calls)  # then matched

    # the trial's launcher stores its result with its group's grant, then calls done
    member = next(i["name"] for i in dep.instances if i["labels"]["spotbench-group"] == first
                  and dep.context(i["name"]).rank == 0)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint.url_for(dep.vm_sa(member)))
    gcsfs.GCSFileSystem.clear_instance_cache()
    import spotbench.clouds.gcp as gcp_settings

    monkeypatch.setattr(gcp_settings, "METADATA_IDENTITY", dep.front + f"/metadata/{member}")
    run = WorkloadRun(dep.context(member))
    run.record("latency", 2.5, "us", size=8)
    assert run.finish()
    results = dep.function_env("start")["SPOTBENCH_RESULTS_URL"]
    with pytest.raises(OSError, match="storage.objects.create. denied"):  # the member writes no study
        ResultStore(results).write_whole(f"{results.removeprefix('gs://')}/search/x.journal", b"{}")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
    gcsfs.GCSFileSystem.clear_instance_cache()
    status, answer = call("done", {"group": first}, Caller("member", member))
    assert status == 200, answer
    assert len(answer["started"]) == 1 and answer["started"] != [first]  # the next trial asked

    body = endpoint.gcs.buckets[dep.bucket][journal[0]]
    data = body["data"] if isinstance(body, dict) else body
    lines = [ln for ln in bytes(data).decode().splitlines() if ln]
    storage = optuna.storages.JournalStorage(_Lines(lines))
    study = optuna.load_study(study_name=journal[0].rsplit("/", 1)[-1].removesuffix(".journal"),
                              storage=storage)
    states = sorted((t.user_attrs["spotbench_trial"], t.state.name, t.value) for t in study.trials)
    assert states == [(1, "COMPLETE", 2.5), (2, "RUNNING", None)]
    assert [c for c in endpoint.calls if c.denied and ".journal" in c.path] == []
    gce.instances.clear()


class _Lines(optuna.storages.journal.BaseJournalBackend):
    def __init__(self, lines: list[str]):
        import json

        self.logs = [json.loads(ln) for ln in lines]

    def read_logs(self, log_number_from: int):
        return self.logs[log_number_from:]

    def append_logs(self, logs):
        self.logs.extend(logs)


# ---- AWS: moto_server behind the front that evaluates the declared IAM documents -----------
@pytest.fixture(scope="module")
def aws() -> Iterator[Any]:
    from spotbench.spec import load_spec
    from tests.iam.account import EnforcedAccount
    from tests.iam.deployment import declare, deploy
    from tests.iam.test_aws_iam import BUCKET, REGION, SPEC
    from tests.moto_server import MotoServer

    spec = {k: v for k, v in SPEC.items() if k not in ("matrix", "trials")}
    spec.update(name="sa", results=f"s3://{BUCKET}/sa", search={
        "space": {"iterations": {"choice": [100, 200]}, "machine_type": "c5n.large"},
        "method": "grid", "parallel": 1, "objective": {"metric": "latency", "direction": "minimize"}})
    with MotoServer() as url, EnforcedAccount(url, REGION) as account:
        yield deploy(account, declare(load_spec(spec)), BUCKET)


def test_search_aws_functions_keep_the_study_in_the_bucket_and_a_member_cannot_write_it(aws):
    import boto3

    from tests.iam.account import environment
    from tests.iam.test_aws_iam import member_env

    d, account = aws, aws.account
    starter = d.functions["sa-start"]
    env = {**account.session(starter.role, starter.name).env(), "AWS_ENDPOINT_URL": account.url,
           "AWS_REGION": account.region, "AWS_DEFAULT_REGION": account.region}
    scheduler = f"arn:aws:scheduler:{account.region}:123456789012:schedule/default/sa-start"

    def call(action: str, body: dict, caller: Caller) -> tuple[int, dict]:
        return handle(action, body, caller, FunctionConfig({**d.functions[f"sa-{action}"].env, **env}))

    with environment(env):
        status, answer = call("start", {"sweep": "sa", "tick": TICK}, Caller("scheduler", scheduler))
        assert status == 200, answer
    (first,) = answer["started"]
    launcher = next(n for n, c in d.contexts.items() if c.group == first and c.rank == 0)
    with environment(member_env(d, d.member(launcher))):
        run = WorkloadRun(d.contexts[launcher])
        run.record("latency", 2.5, "us", size=8)
        assert run.finish()
        with pytest.raises(OSError, match="Access ?Denied|AccessDenied|Forbidden|not authorized"):
            ResultStore(f"s3://{d.bucket}/sa").write_whole(f"{d.bucket}/sa/search/x.journal", b"{}")
    with environment(env):
        status, answer = call("done", {"group": first}, Caller("member", d.instance_ids[launcher]))
        assert status == 200, answer
        assert len(answer["started"]) == 1 and answer["started"] != [first]
        s3 = boto3.client("s3", endpoint_url=account.url, region_name=account.region)
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=d.bucket, Prefix="sa/search/")["Contents"]]
        (journal,) = [k for k in keys if k.endswith(".journal")]
        lines = s3.get_object(Bucket=d.bucket, Key=journal)["Body"].read().decode().splitlines()
    study = optuna.load_study(study_name=journal.rsplit("/", 1)[-1].removesuffix(".journal"),
                              storage=optuna.storages.JournalStorage(_Lines([ln for ln in lines if ln])))
    states = sorted((t.user_attrs["spotbench_trial"], t.state.name, t.value) for t in study.trials)
    assert states == [(1, "COMPLETE", 2.5), (2, "RUNNING", None)]
    denied = [(r.auth.action, r.auth.resource.rsplit("/", 1)[-1]) for r in account.denials()]
    assert denied == [("s3:PutObject", "x.journal")], denied  # the member's attempt, nothing else
    journal_calls = {r.auth.action for r in account.decisions if r.auth.resource.endswith(".journal")}
    assert "s3:PutObject" in journal_calls

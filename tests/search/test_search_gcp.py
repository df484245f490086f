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

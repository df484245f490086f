"""GCP preflight: the project's answers, over the Compute and Service Usage REST APIs.

Checks, in order (a failing step stops the ones that depend on it):
1. credentials: Application Default Credentials exist and can read the project;
2. IAM quotas: the project has room for the sweep's `SWEEP_ACCOUNTS` service accounts (of
   `SERVICE_ACCOUNT_QUOTA`) and `SWEEP_CUSTOM_ROLES` custom roles (of `CUSTOM_ROLE_QUOTA`),
   counting what it holds that is not this sweep's (IAM serviceAccounts.list, roles.list);
   the counts are the same whatever the group count (issue #29); APIs: `BOOTSTRAP_APIS` + `REQUIRED_APIS` enabled (`gcloud services enable …` otherwise);
3. machine types and accelerators exist in the spec's zone, or in every candidate zone
   (`zones`, the created lifecycle) (machineTypes.get, acceleratorTypes.get), which also
   gives each type's vCPUs;
4. quota: each candidate region's quotas (regions.get) cover the sweep's largest concurrent footprint:
   vCPUs (`PREEMPTIBLE_CPUS` for spot/preemptible when the project has that quota, else
   `CPUS`) and GPUs per model (`PREEMPTIBLE_NVIDIA_T4_GPUS` when the region grants it, else
   the standard `NVIDIA_T4_GPUS` the spot VMs then count against, said so), GPUs built into
   the machine type (G2, A2, A3) counted too; and the project's `GPUS_ALL_REGIONS` (projects.get,
   0 on many new projects) holds every GPU of the footprint, all regions together. The
   stopped lifecycle creates its VMs during `pulumi up` (they run until stopped), so there
   a GPU quota problem says it fails the deploy itself (docs/platform.md, Quotas).

`api_endpoint` (an `http://` URL, `SPOTBENCH_GCP_API_ENDPOINT`) points every call at a
local endpoint without credentials (tests); otherwise calls go to compute.googleapis.com
and serviceusage.googleapis.com as ADC's identity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import requests

from spotbench.clouds.gcp import (
    BOOTSTRAP_APIS, CUSTOM_ROLE_QUOTA, REQUIRED_APIS, SERVICE_ACCOUNT_QUOTA, SWEEP_ACCOUNTS,
    FACTS, SWEEP_CUSTOM_ROLES, enable_command,
)
from spotbench.catalog import vm_gpus
from spotbench.interfaces import Problem
from spotbench.plan import RunGroup, concurrent_footprint
from spotbench.spec import SweepSpec

COMPUTE = "https://compute.googleapis.com"
SERVICE_USAGE = "https://serviceusage.googleapis.com"
IAM = "https://iam.googleapis.com"
TIMEOUT_S = 30


def gpu_quota_metric(accelerator: str, spot: bool) -> str:
    """nvidia-tesla-t4 → NVIDIA_T4_GPUS (PREEMPTIBLE_NVIDIA_T4_GPUS for spot)."""
    model = accelerator.lower().removeprefix("nvidia-").removeprefix("tesla-")
    metric = "NVIDIA_" + model.upper().replace("-", "_") + "_GPUS"
    return ("PREEMPTIBLE_" if spot else "") + metric


class Api:
    """Compute Engine, Service Usage and IAM REST calls as ADC (or a local endpoint)."""

    def __init__(self, api_endpoint: str | None):
        self.local = api_endpoint
        if api_endpoint:
            self.session: Any = requests.Session()
        else:
            import google.auth
            from google.auth.transport.requests import AuthorizedSession

            credentials, _ = google.auth.default(
                scopes=["https://www.googleapis.com/auth/cloud-platform"])
            self.session = AuthorizedSession(credentials)

    def get(self, base: str, path: str, **params: Any) -> tuple[int, dict[str, Any]]:
        url = (self.local or base).rstrip("/") + path
        resp = self.session.get(url, params=params or None, timeout=TIMEOUT_S)
        try:
            body = resp.json()
        except ValueError:
            body = {"error": {"message": resp.text[:200]}}
        return resp.status_code, body


def _message(body: dict[str, Any]) -> str:
    return str((body.get("error") or {}).get("message") or body)[:200]


def check(spec: SweepSpec, project: str, api_endpoint: str | None = None) -> list[Problem]:
    try:
        api = Api(api_endpoint)
    except Exception as exc:  # noqa: BLE001 - google.auth's DefaultCredentialsError and kin
        return [Problem("credentials", f"no Google credentials ({type(exc).__name__})",
                        "gcloud auth application-default login")]
    zones = spec.candidate_zones or [spec.zone or ""]
    # each candidate's region (they may span several: `lifecycle: created`), not the home
    # region `region` names: a group is made where its zone is, and uses that region's quota
    regions = spec.candidate_regions or [FACTS.sweep_region(spec.region, spec.zone) or ""]
    refused, project_quotas = _project(api, project)
    if refused:
        return [refused]
    problems: list[Problem] = []
    problems += _iam_quotas(api, spec, project)
    problems += _iap_scope(api, spec, project)
    missing = _missing_apis(api, project)
    if missing:
        problems.append(Problem("apis", f"not enabled in {project}: {', '.join(missing)}",
                                enable_command(project, missing)))
    if "compute.googleapis.com" in missing:
        return problems  # nothing more can be asked of Compute Engine
    groups = spec.plan()
    cpus: dict[str, int] = {}
    accelerators: set[str] = set()
    for zone in zones:  # every candidate zone (`zones`): a group may be made in any of them
        cpus |= _machine_cpus(api, project, zone, {g.machine_type for g in groups}, problems)
        accelerators |= _accelerators(api, project, zone,
                                      {g.accelerator for g in groups if g.accelerator}, problems)
    for region in regions:  # quotas are regional: each candidate region must hold the sweep
        problems += _quota(api, spec, project, region, groups, cpus, accelerators)
    problems += _all_regions_gpus(spec, project, project_quotas, groups)
    return problems


Quotas = dict[str, tuple[float, float]]  # metric → (limit, usage)


def _quotas(body: dict[str, Any]) -> Quotas:
    return {q["metric"]: (float(q.get("limit", 0)), float(q.get("usage", 0)))
            for q in body.get("quotas", []) if "metric" in q}


def _project(api: Api, project: str) -> tuple[Problem | None, Quotas | None]:
    """Why the project cannot be read (credentials, a wrong id), or None; and its
    project-level quotas (`GPUS_ALL_REGIONS`, …) when it answered."""
    status, body = api.get(COMPUTE, f"/compute/v1/projects/{project}")
    if status in (401, 403) and "SERVICE_DISABLED" not in str(body) and "has not been used" not in str(body):
        return Problem("credentials", f"cannot read project {project}: HTTP {status} {_message(body)}",
                       f"check the project id, or ask for roles/viewer on {project} "
                       "(`gcloud auth application-default login` as the deployer)"), None
    if status == 404:
        return Problem("credentials", f"project {project} not found",
                       "set gcp.project in the spec (or SPOTBENCH_GCP_PROJECT) to an existing project id"), None
    return None, (_quotas(body) if status == 200 else None)


def _vm_gpus(group: RunGroup, member_type: str) -> tuple[str | None, int]:
    """(GPU model, count) of one member's VM: built into its type (G2, A2, A3) or attached."""
    return vm_gpus(FACTS.catalog, member_type, group.accelerator, group.accelerator_count)


def _group_gpus(group: RunGroup, model: str | None = None, spot: bool | None = None) -> int:
    """GPUs the group's VMs hold (of `model`, or of any; of its spot or standard members, or
    of all), a count unknown to the catalog as 0."""
    total = 0
    for m in group.members:
        if spot is not None and m.spot != spot:
            continue
        gpu, count = _vm_gpus(group, m.machine_type or group.machine_type)
        if gpu and count > 0 and (model is None or gpu == model):
            total += count
    return total


def _summed(first: Callable[[RunGroup], float] | None,
            then: Callable[[RunGroup], float]) -> Callable[[RunGroup], float]:
    """A group's size under one quota: `then`'s members added to `first`'s (both kinds of
    member on the standard quota where the region grants no preemptible one)."""
    return then if first is None else (lambda g: first(g) + then(g))


DEPLOY_FIX = ("the stopped lifecycle creates every VM during `pulumi up` (GCE runs each until "
              "the provider stops it): the quota must hold then too")


def _deploy_parallel(free: float, groups: list[RunGroup]) -> str:
    """`pulumi up --parallel K`: at most K VMs created at once, K × the largest VM's GPUs ≤ free."""
    per_vm = max((_vm_gpus(g, m.machine_type or g.machine_type)[1] for g in groups for m in g.members),
                 default=0)
    k = int(free // per_vm) if per_vm > 0 else 0
    return (f", or deploy {k} VM{'s' if k != 1 else ''} at a time: `pulumi up --parallel {k}`"
            if k >= 1 else "")


def _quota_url(project: str, metric: str, region: str | None) -> str:
    where = f", region {region}" if region else ""
    return (f"request more: https://console.cloud.google.com/iam-admin/quotas?project={project}"
            f" (metric {metric}{where})")


def _all_regions_gpus(spec: SweepSpec, project: str, quotas: Quotas | None,
                      groups: list[RunGroup]) -> list[Problem]:
    """`GPUS_ALL_REGIONS`: a project-level cap on the GPUs of every region together, checked
    beside the regional per-model quotas; 0 on many new projects. The stopped lifecycle
    needs every GPU VM's GPUs during `pulumi up`, the runs the concurrent footprint."""
    if quotas is None:
        return []
    run = concurrent_footprint(spec, groups, _group_gpus)
    deploy = float(sum(_group_gpus(g) for g in groups)) if spec.lifecycle == "stopped" else 0.0
    limit, usage = quotas.get("GPUS_ALL_REGIONS", (0.0, 0.0))
    free = limit - usage
    what = (f"GPUS_ALL_REGIONS (project {project}, every region together): {{}}, {free:g} free "
            f"(limit {limit:g}, {usage:g} in use; 0 on many new projects)")
    if run > free:
        return [Problem("quota", what.format(f"the sweep needs {run:g} GPUs at once"),
                        _quota_url(project, "GPUS_ALL_REGIONS", None) + ", or lower `concurrency`"
                        + ("; " + DEPLOY_FIX if deploy else ""))]
    if deploy > free:
        return [Problem("deploy", what.format(f"`pulumi up` creates all {deploy:g} GPUs' VMs of the "
                                              "stopped lifecycle"),
                        _quota_url(project, "GPUS_ALL_REGIONS", None) + _deploy_parallel(free, groups))]
    return []


def _missing_apis(api: Api, project: str) -> list[str]:
    status, body = api.get(SERVICE_USAGE, f"/v1/projects/{project}/services",
                           filter="state:ENABLED", pageSize=200)
    enabled = {s.get("config", {}).get("name") or s.get("name", "").rsplit("/", 1)[-1]
               for s in body.get("services", [])} if status == 200 else set()
    return [a for a in (*BOOTSTRAP_APIS, *REQUIRED_APIS) if a not in enabled]


def _machine_cpus(api: Api, project: str, zone: str, machines: set[str],
                  problems: list[Problem]) -> dict[str, int]:
    """vCPUs of each machine type offered in the zone; a problem for each one that is not."""
    cpus: dict[str, int] = {}
    for machine in sorted(machines):
        status, body = api.get(COMPUTE, f"/compute/v1/projects/{project}/zones/{zone}/machineTypes/{machine}")
        if status == 200:
            cpus[machine] = int(body.get("guestCpus", 0))
        else:
            problems.append(Problem("machine-types", f"{machine} is not offered in {zone} (HTTP {status})",
                                    f"pick one from `gcloud compute machine-types list --filter=zone:{zone}`"))
    return cpus


def _accelerators(api: Api, project: str, zone: str, wanted: set[str],
                  problems: list[Problem]) -> set[str]:
    """The accelerators offered in the zone; a problem for each one that is not."""
    offered: set[str] = set()
    for acc in sorted(wanted):
        status, body = api.get(COMPUTE, f"/compute/v1/projects/{project}/zones/{zone}/acceleratorTypes/{acc}")
        if status == 200:
            offered.add(acc)
        else:
            problems.append(Problem("accelerators", f"{acc} is not offered in {zone} (HTTP {status})",
                                    f"pick one from `gcloud compute accelerator-types list --filter=zone:{zone}`"))
    return offered


def _listed(api: Api, path: str, key: str) -> list[dict[str, Any]] | None:
    """Every item of an IAM list (all pages); None when the API refuses."""
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        status, body = api.get(IAM, path, pageSize=100, **({"pageToken": token} if token else {}))
        if status != 200:
            return None
        items += body.get(key, [])
        token = body.get("nextPageToken", "")
        if not token:
            return items


def _iam_quotas(api: Api, spec: SweepSpec, project: str) -> list[Problem]:
    """Room for the sweep's accounts and custom roles, beside what the project already holds
    (the sweep's own, from an earlier deploy, do not count: display names
    `spotbench <sweep>: …`, role ids `spotbench_<sweep>_…`)."""
    out = []
    own_role = "spotbench_" + spec.name.replace("-", "_") + "_"
    checks = (
        ("service-accounts", f"/v1/projects/{project}/serviceAccounts", "accounts",
         lambda a: str(a.get("displayName", "")).startswith(f"spotbench {spec.name}:"),
         SWEEP_ACCOUNTS, SERVICE_ACCOUNT_QUOTA, "service accounts",
         f"delete unused ones (`gcloud iam service-accounts list --project {project}`) or ask "
         "for more (IAM quota `Service accounts per project`)"),
        ("custom-roles", f"/v1/projects/{project}/roles", "roles",
         lambda r: str(r.get("name", "")).rsplit("/", 1)[-1].startswith(own_role),
         SWEEP_CUSTOM_ROLES, CUSTOM_ROLE_QUOTA, "custom roles",
         f"delete unused ones (`gcloud iam roles list --project {project}`; deleted roles "
         "count for 7 days) or use another project"),
    )
    for kind, path, key, own, need, quota, what, fix in checks:
        items = _listed(api, path, key)
        if items is None:
            out.append(Problem(kind, f"cannot list the {what} of {project}",
                               f"ask for roles/iam.serviceAccountAdmin and roles/iam.roleAdmin "
                               f"on {project} (docs/gcp.md, deployer roles)"))
            continue
        others = sum(1 for i in items if not own(i))
        if others + need > quota:
            out.append(Problem(kind, f"{project} holds {others} {what} of its {quota}; the sweep "
                               f"needs {need} more, whatever its group count", fix))
    return out


def _iap_scope(api: Api, spec: SweepSpec, project: str) -> list[Problem]:
    """Operators' IAP tunnels are granted by destination address (the sweep's subnet:
    infra/gcp/identity.py, docs/platform.md): another subnet of the project on an
    overlapping range (another VPC, e.g. another sweep on the default range) would be
    reachable by this sweep's operators, and this one by that sweep's."""
    if not spec.gcp.operators:
        return []
    import ipaddress

    status, body = api.get(COMPUTE, f"/compute/v1/projects/{project}/aggregated/subnetworks")
    if status != 200:
        return [Problem("iap-scope", f"cannot list the subnetworks of {project} ({status}): "
                        f"{_message(body)}", "ask for roles/compute.networkAdmin (docs/gcp.md)")]
    mine = ipaddress.ip_network(spec.gcp.network_cidr, strict=False)
    own_network = f"/networks/{spec.name}-net-vpc"  # infra/gcp/network.py
    clashes = [f"{s.get('name')} ({s.get('ipCidrRange')})"
               for scope in (body.get("items") or {}).values()
               for s in scope.get("subnetworks", [])
               if not str(s.get("network", "")).endswith(own_network)
               and mine.overlaps(ipaddress.ip_network(s.get("ipCidrRange", "0.0.0.0/32"), strict=False))]
    if not clashes:
        return []
    return [Problem("iap-scope", f"gcp.network_cidr {mine} overlaps subnet(s) "
                    f"{', '.join(sorted(clashes))} of {project}: this sweep's operators could "
                    "open IAP tunnels to their ssh ports, and theirs to this sweep's",
                    "give the sweep a free range: gcp.network_cidr (e.g. 10.43.0.0/24)")]


def _quota(api: Api, spec: SweepSpec, project: str, region: str, groups: list[RunGroup],
           cpus: dict[str, int], accelerators: set[str]) -> list[Problem]:  # fmt: skip
    """Quota for what exists (unknown types are already reported above)."""
    status, body = api.get(COMPUTE, f"/compute/v1/projects/{project}/regions/{region}")
    if status != 200:
        return [Problem("quota", f"cannot read the quotas of {region}: HTTP {status} {_message(body)}",
                        f"check that {region} is a region, and roles/compute.viewer on {project}")]
    quotas = _quotas(body)
    needs = _cpu_needs(spec, groups, quotas, cpus)
    needs.update(_gpu_needs(spec, groups, quotas, accelerators))
    out = []
    for metric, (need, deploy, note) in needs.items():
        limit, usage = quotas.get(metric, (0.0, 0.0))
        free = limit - usage
        where = f"{metric} in {region}: {{}}, {free:g} free (limit {limit:g}, {usage:g} in use){note}"
        if need > free:
            out.append(Problem(
                "quota", where.format(f"the sweep needs {need:g} at once"),
                _quota_url(project, metric, region) + ", or lower `concurrency`"
                + ("; " + DEPLOY_FIX if deploy else "")))
        elif deploy > free:
            out.append(Problem(
                "deploy", where.format(f"`pulumi up` creates the VMs of all {deploy:g} GPUs (the "
                                       "stopped lifecycle; each runs until it is stopped)"),
                _quota_url(project, metric, region) + _deploy_parallel(free, groups)))
    return out


def _gpu_metric(quotas: Quotas, accelerator: str, spot: bool) -> tuple[str, str]:
    """The quota a spot (or standard) VM's GPUs count against in a region, and what to say
    about it: spot VMs use the preemptible GPU quota where the region grants one (limit > 0),
    else the standard quota of that GPU (docs/platform.md, Quotas)."""
    preemptible = gpu_quota_metric(accelerator, True)
    standard = gpu_quota_metric(accelerator, False)
    if not spot:
        return standard, ""
    if quotas.get(preemptible, (0.0, 0.0))[0] > 0:
        return preemptible, ""
    return standard, (f"; the region grants no {preemptible} quota, so spot VMs count against the "
                      f"standard {standard} (or request {preemptible})")


Needs = dict[str, tuple[float, float, str]]  # quota metric → (at once, at deploy, note)


def _cpu_needs(spec: SweepSpec, groups: list[RunGroup], quotas: Quotas, cpus: dict[str, int]) -> Needs:
    """vCPUs per quota metric, each member where its own provisioning counts
    (`role_provisioning`: a standard role's VMs on `CPUS`, the spot roles' on the
    preemptible quota where the region grants one)."""
    preemptible_cpus = quotas.get("PREEMPTIBLE_CPUS", (0, 0))[0] > 0
    cpu_need: dict[str, Callable[[RunGroup], float]] = {}
    for spot in sorted({m.spot for g in groups for m in g.members}):
        metric = "PREEMPTIBLE_CPUS" if spot and preemptible_cpus else "CPUS"
        cpu_need[metric] = _summed(cpu_need.get(metric), lambda g, s=spot: sum(
            cpus.get(m.machine_type, 0) for m in g.members if m.spot == s))
    return {metric: (concurrent_footprint(spec, groups, size), 0.0, "")
            for metric, size in cpu_need.items()}


def _gpu_needs(spec: SweepSpec, groups: list[RunGroup], quotas: Quotas, accelerators: set[str]) -> Needs:
    """GPUs per quota metric (model × the members' provisioning), at once and at deploy."""
    attached = {g.accelerator for g in groups if g.accelerator}
    models = {gpu for g in groups for m in g.members
              for gpu, n in [_vm_gpus(g, m.machine_type or g.machine_type)] if gpu and n > 0}
    stopped = spec.lifecycle == "stopped"
    needs: Needs = {}
    for acc in sorted((models & accelerators) | (models - attached)):
        gpu_need: dict[str, tuple[Callable[[RunGroup], float], str]] = {}
        for spot in sorted({m.spot for g in groups for m in g.members}):
            metric, note = _gpu_metric(quotas, acc, spot)
            size = _summed(gpu_need.get(metric, (None, ""))[0],
                           lambda g, a=acc, s=spot: _group_gpus(g, a, spot=s))
            gpu_need[metric] = (size, gpu_need.get(metric, (None, note))[1] or note)
        for metric, (size, note) in gpu_need.items():
            deploy = float(sum(size(g) for g in groups)) if stopped else 0.0
            needs[metric] = (concurrent_footprint(spec, groups, size), deploy, note)
    return needs

"""The `gcp` cloud's settings: project, region, bucket, APIs, deployer roles, limits.

What the provider (`gcp.provider`), the scheduler (`gcp.scheduler`), preflight
(`gcp.preflight`) and infra/gcp share; it imports none of them (no SDK either).

Environment: `SPOTBENCH_GCP_PROJECT` (else the spec's `gcp.project`, else
`GOOGLE_CLOUD_PROJECT`), `SPOTBENCH_GCP_API_ENDPOINT` (a local endpoint in tests);
functions also read `SPOTBENCH_AUDIENCE`, `SPOTBENCH_SCHEDULER_ACCOUNTS` and
`SPOTBENCH_GCP_FRONT` (`cloud-run`: behind Cloud Run's front end, `spotbench.clouds.gcp.front`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from spotbench.clouds.provider import SettingMissing, env_of
from spotbench.facts.gcp import FACTS

if TYPE_CHECKING:
    from spotbench.spec import SweepSpec

# The Google APIs a sweep uses (infra/gcp/apis.py enables them; preflight checks them),
# and those that must be on before anything can be enabled.
REQUIRED_APIS = (
    "compute.googleapis.com", "storage.googleapis.com", "iam.googleapis.com",
    "cloudfunctions.googleapis.com", "run.googleapis.com", "cloudbuild.googleapis.com",
    "artifactregistry.googleapis.com", "cloudscheduler.googleapis.com",
    "logging.googleapis.com", "iap.googleapis.com", "secretmanager.googleapis.com",
    # the grant signs upload policies (signBlob) and downscopes checkpoint tokens (token exchange)
    "iamcredentials.googleapis.com", "sts.googleapis.com",
)
BOOTSTRAP_APIS = ("serviceusage.googleapis.com", "cloudresourcemanager.googleapis.com")
# What the person running `pulumi up` / `spotbench preflight|teardown` needs on the project
# (docs/gcp.md lists them with the reason; tests check every declared resource is covered).
DEPLOYER_ROLES = {
    "roles/serviceusage.serviceUsageAdmin": "enable the sweep's APIs (projects.Service); preflight reads them",
    "roles/compute.networkAdmin": "VPC, subnet, router + NAT, static internal addresses",
    "roles/compute.securityAdmin": "the members-only and IAP firewall rules",
    "roles/compute.instanceAdmin.v1": "VMs, placement policies; teardown deletes leftovers",
    "roles/iam.serviceAccountAdmin": "the member (one per sweep), scheduler, function and build accounts; who may act as the member account, and the function's signing on itself; preflight counts the project's accounts",
    "roles/iam.serviceAccountUser": "create VMs, functions, builds and scheduler jobs that run as those accounts",
    "roles/iam.roleAdmin": "the sweep's custom roles",
    "roles/resourcemanager.projectIamAdmin": "project-level grants (with IAM conditions)",
    "roles/storage.admin": "the results bucket, its grants and the functions' source object",
    "roles/cloudfunctions.admin": "the start/stop/done functions",
    "roles/run.admin": "who may invoke each function (Cloud Run service IAM)",
    "roles/cloudscheduler.admin": "the start/stop jobs; `spotbench schedule`",
    "roles/artifactregistry.admin": "the workload image repository",
    "roles/iap.admin": "operators' IAP tunnel grants (one per operator, on the project's tunnels)",
    "roles/secretmanager.admin": "the sweep's one secret (the groups' key seed, secret envs) and its one reader, the functions' account",
}
PREVIEW_PROJECT = "spotbench-preview"
# What a sweep holds of the project's IAM quotas, whatever its group count (issue #29,
# docs/identity.md): the member, scheduler, function and build service accounts (a project
# holds 100 by default, cloud.google.com/iam/quotas), and its custom roles (300 per
# project): start/stop, list, sign, and ops when it has operators. Preflight counts what
# the project already holds (spotbench/clouds/gcp/preflight.py).
SERVICE_ACCOUNT_QUOTA = 100
SWEEP_ACCOUNTS = 4
CUSTOM_ROLE_QUOTA = 300
SWEEP_CUSTOM_ROLES = 4


def enable_command(project: str, apis: tuple[str, ...] | list[str] = REQUIRED_APIS) -> str:
    return f"gcloud services enable {' '.join(apis)} --project {project}"
  # the project name an offline preview shows
METADATA_IDENTITY = (
    "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/identity"
)




def project_of(spec: SweepSpec | None = None, env: Mapping[str, str] | None = None) -> str:
    env = env_of(env)
    project = env.get("SPOTBENCH_GCP_PROJECT") or (spec.gcp.project if spec else None)
    project = project or env.get("GOOGLE_CLOUD_PROJECT")
    if not project:
        raise SettingMissing(
            "no GCP project: set gcp.project in the spec or SPOTBENCH_GCP_PROJECT in the environment"
        )
    return project


def bucket_name(spec: SweepSpec, project: str) -> str:
    """The results bucket: the spec's gs:// bucket, else `spotbench-<sweep>-<project>`
    (≤ 63 chars) — the name infra/gcp/bucket.py declares."""
    if spec.results and spec.results.startswith("gs://"):
        return spec.results.removeprefix("gs://").split("/", 1)[0]
    name = re.sub(r"[^a-z0-9-]", "-", f"spotbench-{spec.name}-{project}".lower())
    return name[:63].rstrip("-")


def results_url(spec: SweepSpec, project: str) -> str:
    """Where members write: the spec's gs:// URL (a bare bucket gets `/<sweep>`), else
    gs://<bucket_name>/<sweep>."""
    if spec.results and spec.results.startswith("gs://"):
        url = spec.results.rstrip("/")
        return url if "/" in url.removeprefix("gs://") else f"{url}/{spec.name}"
    return f"gs://{bucket_name(spec, project)}/{spec.name}"


def first_zone(spec: SweepSpec) -> str | None:
    """The sweep's one zone (`zone`), else its first candidate (`zones: [a, …]`, `any`):
    what every reader of "the" zone uses (the stopped lifecycle's VMs, IAP, preflight)."""
    return spec.first_zone


def region_of(spec: SweepSpec) -> str:
    """The sweep's region: `region`, else its (first candidate) zone's
    (`CloudFacts.sweep_region`)."""
    region = FACTS.sweep_region(spec.region, first_zone(spec))
    if region:
        return region
    raise SettingMissing(f"{spec.name}: give 'region' or 'zone' in the spec")


def template_name(group: str, role: str) -> str:
    """The instance template of `group`'s members of `role` (`lifecycle: created`): what
    infra declares and the driver creates from (a GCE name: at most 63 characters)."""
    name = f"{group}-{role}"
    if len(name) > 63:
        raise ValueError(f"template name {name!r} is longer than GCE's 63 characters: "
                         "shorten the sweep's `name`")
    return name


def member_accounts(value: str) -> list[str]:
    """The service account(s) member VMs run as, from `SPOTBENCH_MEMBER_ACCOUNTS`
    (comma-separated emails: the sweep's one member account, infra/gcp/functions.py)."""
    return [a.strip() for a in value.split(",") if a.strip()]


def identity_token(audience: str, timeout: float = 10) -> str:
    """The VM's identity token from the metadata server (`format=full`: the function reads
    the instance name and zone from its claims)."""
    import requests

    resp = requests.get(
        METADATA_IDENTITY,
        params={"audience": audience, "format": "full"},
        headers={"Metadata-Flavor": "Google"},
        timeout=timeout,
    )
    resp.raise_for_status()
    return resp.text.strip()

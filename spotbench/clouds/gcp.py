"""The `gcp` provider: Compute Engine VMs, Cloud Scheduler, Cloud Functions gen2.

Nothing here imports google-cloud at module level; each part loads its SDK when built:
the driver (`gce`), the schedule control (`gcp_scheduler`), the orphan finder
(`gcp_orphans`) and the caller verifier (`spotbench.auth.gcp`, google-auth).

Environment: `SPOTBENCH_GCP_PROJECT` (else the spec's `gcp.project`, else
`GOOGLE_CLOUD_PROJECT`), `SPOTBENCH_GCP_API_ENDPOINT` (a local endpoint in tests);
functions also read `SPOTBENCH_AUDIENCE`, `SPOTBENCH_SCHEDULER_ACCOUNTS` and
`SPOTBENCH_GCP_FRONT` (`cloud-run`: behind Cloud Run's front end, `spotbench.auth.gcp_front`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotbench.catalog import GCP_CATALOG
from spotbench.clouds.provider import FunctionSettings, Provider, SettingMissing, env_of

if TYPE_CHECKING:
    import requests

    from spotbench.auth import Caller
    from spotbench.clouds.base import Sweeper
    from spotbench.clouds.gce import GcpCloud
    from spotbench.clouds.gcp_grants import GcpGrants
    from spotbench.clouds.gcp_member_grant import GrantedWriter
    from spotbench.clouds.gcp_scheduler import GcpSchedule
    from spotbench.member import MemberContext
    from spotbench.spec import SweepSpec

# The Google APIs a sweep uses (infra/gcp/apis.py enables them; preflight checks them),
# and those that must be on before anything can be enabled.
REQUIRED_APIS = (
    "compute.googleapis.com", "storage.googleapis.com", "iam.googleapis.com",
    "cloudfunctions.googleapis.com", "run.googleapis.com", "cloudbuild.googleapis.com",
    "artifactregistry.googleapis.com", "cloudscheduler.googleapis.com",
    "logging.googleapis.com", "iap.googleapis.com", "secretmanager.googleapis.com",
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
    "roles/iap.admin": "operators' IAP tunnel grants on each VM",
    "roles/secretmanager.admin": "the sweep's one secret (the groups' key seed, secret envs) and its one reader, the functions' account",
}
PREVIEW_PROJECT = "spotbench-preview"
# What a sweep holds of the project's IAM quotas, whatever its group count (issue #29,
# docs/identity.md): the member, scheduler, function and build service accounts (a project
# holds 100 by default, cloud.google.com/iam/quotas), and its custom roles (300 per
# project): start/stop, list, sign, and ops when it has operators. Preflight counts what
# the project already holds (spotbench/clouds/gcp_preflight.py).
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


def region_of_zone(zone: str) -> str:
    """us-central1-a → us-central1."""
    return zone.rsplit("-", 1)[0]


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


def region_of(spec: SweepSpec) -> str:
    """The sweep's region: `region`, else its zone's."""
    if spec.region:
        return spec.region
    if spec.zone:
        return region_of_zone(spec.zone)
    raise SettingMissing(f"{spec.name}: give 'region' or 'zone' in the spec")


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


class GcpProvider(Provider):
    name = "gcp"
    location = "zone"
    location_example = "us-central1-a"
    stack_component = "infra.gcp:GcpSweep"  # the Pulumi component infra/__main__.py declares
    scheduler_item = "cloud-scheduler-job"
    catalog = GCP_CATALOG
    # cloud.google.com/scheduler/pricing (3 jobs per billing account), /functions/pricing
    free_tier = {"scheduler jobs": 3, "functions (invocations)": 2_000_000,
                 "functions (GB-seconds)": 400_000}

    setup_extras = "gcp,infra,ops"
    needs_modules = {"gcp": ("google.cloud.compute_v1", "google.cloud.scheduler_v1", "gcsfs"),
                     "infra": ("pulumi", "pulumi_gcp", "pulumi_tls", "pulumi_random")}
    tools = (
        ("pulumi", "`pulumi up`", "https://www.pulumi.com/docs/install/"),
        ("gcloud", "`gcloud auth application-default login` and `gcloud services enable`",
         "https://cloud.google.com/sdk/docs/install"),
        ("docker", "`make images`", "https://docs.docker.com/engine/install/"),
    )
    double_env = "SPOTBENCH_GCP_API_ENDPOINT"

    def region_of_zone(self, zone: str) -> str:
        return region_of_zone(zone)

    def disk(self, spec: SweepSpec) -> tuple[str, float]:
        return "pd-balanced", float(spec.gcp.boot_disk_gb)

    def results_url(self, spec: SweepSpec, env: Mapping[str, str] | None = None) -> str:
        if spec.results and not spec.results.startswith("gs://"):
            return spec.results_url()  # e.g. a local copy the user points at
        return results_url(spec, project_of(spec, env))

    def driver(self, **options: Any) -> GcpCloud:
        from spotbench.clouds.gce import GcpCloud

        return GcpCloud(**options)

    def cloud(self, spec: SweepSpec, env: Mapping[str, str] | None = None, *,
              root: Path | str | None = None, state_dir: Path | None = None) -> GcpCloud:
        env = env_of(env)
        return self.driver(project=project_of(spec, env), zones=[spec.zone],
                           api_endpoint=env.get("SPOTBENCH_GCP_API_ENDPOINT") or None)

    def authenticate(self, headers: Mapping[str, str], settings: FunctionSettings) -> Caller:
        """The caller of a function: the scheduler's OIDC token, or a member VM's ID token
        running as the sweep's member account (`SPOTBENCH_MEMBER_ACCOUNTS`; unset: no member
        may call). Which group the VM is comes from the sweep's own records, never from the
        token (`spotbench.auth.instance.group_of`; `control.done` checks zone and id)."""
        from spotbench.auth.gcp import identify

        env = settings.env
        return identify(
            headers,
            audience=settings.need("SPOTBENCH_AUDIENCE"),
            scheduler_accounts=[a for a in env.get("SPOTBENCH_SCHEDULER_ACCOUNTS", "").split(",") if a],
            project=env.get("SPOTBENCH_GCP_PROJECT") or settings.spec.gcp.project or "",
            member_accounts=member_accounts(env.get("SPOTBENCH_MEMBER_ACCOUNTS", "")),
            certs_url=env.get("SPOTBENCH_GCP_CERTS_URL") or None,
            front=env.get("SPOTBENCH_GCP_FRONT") or None,
        ).caller

    def record_writer(self, ctx: MemberContext) -> GrantedWriter | None:
        """A VM writes its group's records with the POST policy `grant` mints for it."""
        if not ctx.done_url or not ctx.results_url.startswith("gs://"):
            return None
        from spotbench.clouds.gcp_member_grant import GrantedWriter, grant_url_of

        return GrantedWriter(grant_url_of(ctx.done_url), identity_token)

    def grants(self, spec: SweepSpec, env: Mapping[str, str]) -> GcpGrants:
        """The `grant` function's minting: `SPOTBENCH_GCP_SIGNER` (its own account),
        `SPOTBENCH_GCP_SECRET`, `SPOTBENCH_GCP_GRANT_ENDPOINT`/`_TOKEN` (a local double)."""
        from spotbench.clouds.gcp_grants import GcpGrants, GoogleGrantApis

        signer, secret = env.get("SPOTBENCH_GCP_SIGNER"), env.get("SPOTBENCH_GCP_SECRET")
        if not signer or not secret:
            raise SettingMissing("the grant function needs SPOTBENCH_GCP_SIGNER and "
                                 "SPOTBENCH_GCP_SECRET (infra/gcp/functions.py sets them)")
        apis = GoogleGrantApis(signer, endpoint=env.get("SPOTBENCH_GCP_GRANT_ENDPOINT") or None,
                               token=env.get("SPOTBENCH_GCP_GRANT_TOKEN") or None)
        return GcpGrants(apis, secret, self.results_url(spec, env))

    def schedule(self, spec: SweepSpec, root: Path | str | None = None, **options: Any) -> GcpSchedule:
        from spotbench.clouds.gcp_scheduler import GcpSchedule

        return GcpSchedule.for_spec(spec, **options)

    def credentials_problem(self, env: Mapping[str, str] | None = None) -> str | None:
        from spotbench.clouds.credentials import gcp_problem

        env = env_of(env)
        return None if env.get("SPOTBENCH_GCP_API_ENDPOINT") else gcp_problem(env)

    def preflight(self, spec: SweepSpec, env: Mapping[str, str] | None = None) -> list:
        from spotbench.clouds.gcp_preflight import check

        env = env_of(env)
        return check(spec, project_of(spec, env), env.get("SPOTBENCH_GCP_API_ENDPOINT") or None)

    def orphans(self, spec: SweepSpec | None = None, *, root: Path | str | None = None,
                regions: list[str] | None = None, project: str | None = None) -> Sweeper:
        from spotbench.clouds.gcp_orphans import GcpSweeper

        return GcpSweeper(project or project_of(spec))

    def stack_config(self, spec: SweepSpec, project: str | None = None,
                     region: str | None = None) -> dict[str, str]:
        return {
            "gcp:project": project or spec.gcp.project or PREVIEW_PROJECT,
            "gcp:region": region or region_of(spec),
        }

    def access_options(self, spec: SweepSpec, via: str) -> dict[str, Any]:
        # `gcloud compute start-iap-tunnel` needs the instance's project and zone
        return {"gcp_project": project_of(spec), "gcp_zone": spec.zone} if via == "iap" else {}

    def post_done(self, ctx: MemberContext, body: dict, timeout: float) -> requests.Response:
        import requests

        headers = {"Authorization": f"Bearer {identity_token(ctx.done_url)}"}
        return requests.post(ctx.done_url, json=body, headers=headers, timeout=timeout)


PROVIDER = GcpProvider()

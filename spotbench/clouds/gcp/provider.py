"""The `gcp` provider: Compute Engine VMs, Cloud Scheduler, Cloud Functions gen2.

Nothing here imports google-cloud at module level; each part loads its SDK when built:
the driver (`gce`), the schedule control (`scheduler`), the orphan finder (`orphans`),
preflight (`preflight`) and the caller verifier (`spotbench.clouds.gcp.identity`, google-auth). Its
settings (project, region, bucket, the VM's identity token) are the package's
(`spotbench.clouds.gcp`).

Environment: `SPOTBENCH_GCP_PROJECT` (else the spec's `gcp.project`, else
`GOOGLE_CLOUD_PROJECT`), `SPOTBENCH_GCP_API_ENDPOINT` (a local endpoint in tests);
functions also read `SPOTBENCH_AUDIENCE`, `SPOTBENCH_SCHEDULER_ACCOUNTS` and
`SPOTBENCH_GCP_FRONT` (`cloud-run`: behind Cloud Run's front end, `spotbench.clouds.gcp.front`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotbench.clouds import gcp as settings
from spotbench.clouds.gcp import (
    PREVIEW_PROJECT, first_zone, identity_token, member_accounts, project_of, region_of,
    results_url,
)
from spotbench.clouds.provider import (
    FunctionSettings, GroupStorage, Provider, SettingMissing, env_of,
)
from spotbench.facts.gcp import FACTS
from spotbench.interfaces import Problem

if TYPE_CHECKING:
    import requests

    from spotbench.auth import Caller
    from spotbench.clouds.base import Sweeper
    from spotbench.clouds.gcp.gce import GcpCloud
    from spotbench.clouds.gcp.grants import GcpGrants
    from spotbench.clouds.gcp.lease_objects import GcsObjects
    from spotbench.clouds.gcp.scheduler import GcpSchedule
    from spotbench.clouds.gcp.ssh import IapTunnel
    from spotbench.member import MemberContext
    from spotbench.spec import SweepSpec


def roster_of(spec: SweepSpec) -> dict[str, dict[str, list[str]]]:
    """group → role → member names, in rank order: what the created lifecycle makes from
    each role's template (`spotbench.clouds.gcp.created`)."""
    out: dict[str, dict[str, list[str]]] = {}
    for g in spec.plan():
        for m in g.members:
            out.setdefault(g.id, {}).setdefault(m.role, []).append(m.name)
    return out


class GcpProvider(Provider):
    prices_module = "spotbench.clouds.gcp.prices"
    prices_needs = ("google.cloud.billing_v1",)
    catalog_module = "spotbench.clouds.gcp.catalog"

    def results_url(self, spec: SweepSpec, env: Mapping[str, str] | None = None) -> str:
        if spec.results and not spec.results.startswith("gs://"):
            return spec.results_url()  # e.g. a local copy the user points at
        return results_url(spec, project_of(spec, env))

    def driver(self, **options: Any) -> GcpCloud:
        from spotbench.clouds.gcp.gce import GcpCloud

        return GcpCloud(**options)

    def cloud(self, spec: SweepSpec, env: Mapping[str, str] | None = None, *,
              root: Path | str | None = None, state_dir: Path | None = None) -> GcpCloud:
        env = env_of(env)
        endpoint = env.get("SPOTBENCH_GCP_API_ENDPOINT") or None
        if spec.lifecycle != "created":
            return self.driver(project=project_of(spec, env), zones=[first_zone(spec)],
                               api_endpoint=endpoint)
        return self.driver(project=project_of(spec, env), zones=spec.candidate_zones,
                           api_endpoint=endpoint, lifecycle="created", roster=roster_of(spec),
                           # a member lives at most its max_run_duration (+ GCE's slack)
                           max_run_s=max(30.0, spec.deadline.total_seconds()) + 600)

    def lease_objects(self, fs: Any) -> GcsObjects:
        """The control lease on GCS: generation-matched requests through the store's gcsfs."""
        from spotbench.clouds.gcp.lease_objects import GcsObjects

        return GcsObjects(fs)

    def authenticate(self, headers: Mapping[str, str], settings: FunctionSettings) -> Caller:
        """The caller of a function: the scheduler's OIDC token, or a member VM's ID token
        running as its own run group's account (`SPOTBENCH_MEMBER_ACCOUNTS`; unset: no member
        may call). Its zone and instance id are checked against the instance by `control.done`."""
        from spotbench.clouds.gcp.identity import identify

        env = settings.env
        return identify(
            headers,
            audience=settings.need("SPOTBENCH_AUDIENCE"),
            scheduler_accounts=[a for a in env.get("SPOTBENCH_SCHEDULER_ACCOUNTS", "").split(",") if a],
            project=self.function_account(settings),
            member_accounts=member_accounts(env.get("SPOTBENCH_MEMBER_ACCOUNTS", "")),
            certs_url=env.get("SPOTBENCH_GCP_CERTS_URL") or None,
            front=env.get("SPOTBENCH_GCP_FRONT") or None,
        ).caller

    def function_account(self, settings: FunctionSettings, context: Any = None) -> str:
        """The sweep's project: `SPOTBENCH_GCP_PROJECT`, else the spec's `gcp.project`."""
        project: str = settings.env.get("SPOTBENCH_GCP_PROJECT") or settings.spec.gcp.project or ""
        return project

    def group_storage(self, ctx: MemberContext) -> GroupStorage:
        """A VM's group grants, from one `grant` answer (`member_grant.MemberGrant`, kept and
        renewed before it ends): records through the POST policy (a writer; the store reads
        as the member), checkpoints through the downscoped token (gcsfs `token=`)."""
        if not ctx.done_url or not ctx.results_url.startswith("gs://"):
            return GroupStorage()
        from spotbench.clouds.gcp.member_grant import (
            GrantedWriter, MemberGrant, checkpoint_credentials, grant_url_of,
        )

        url = grant_url_of(ctx.done_url)
        grant = MemberGrant(url, identity_token)
        answer = grant.answer()  # asked once at start: a refusal shows before any work
        options = {"token": checkpoint_credentials(grant)} if answer.get("checkpoints") else {}
        return GroupStorage(writer=GrantedWriter(url, identity_token, grant),
                            checkpoint_options=options)

    def grants(self, spec: SweepSpec, env: Mapping[str, str]) -> GcpGrants:
        """The `grant` function's minting: `SPOTBENCH_GCP_SIGNER` (its own account),
        `SPOTBENCH_GCP_SECRET`, `SPOTBENCH_GCP_GRANT_ENDPOINT`/`_TOKEN` (a local double)."""
        from spotbench.clouds.gcp.grants import GcpGrants, GoogleGrantApis

        signer, secret = env.get("SPOTBENCH_GCP_SIGNER"), env.get("SPOTBENCH_GCP_SECRET")
        if not signer or not secret:
            raise SettingMissing("the grant function needs SPOTBENCH_GCP_SIGNER and "
                                 "SPOTBENCH_GCP_SECRET (infra/gcp/functions.py sets them)")
        apis = GoogleGrantApis(signer, endpoint=env.get("SPOTBENCH_GCP_GRANT_ENDPOINT") or None,
                               token=env.get("SPOTBENCH_GCP_GRANT_TOKEN") or None)
        return GcpGrants(apis, secret, self.results_url(spec, env))

    def schedule(self, spec: SweepSpec, root: Path | str | None = None, **options: Any) -> GcpSchedule:
        from spotbench.clouds.gcp.scheduler import GcpSchedule

        return GcpSchedule.for_spec(spec, **options)

    def credentials_problem(self, env: Mapping[str, str] | None = None) -> str | None:
        from spotbench.clouds.gcp.credentials import gcp_problem

        env = env_of(env)
        return None if env.get("SPOTBENCH_GCP_API_ENDPOINT") else gcp_problem(env)

    def preflight(self, spec: SweepSpec, env: Mapping[str, str] | None = None) -> list[Problem]:
        from spotbench.clouds.gcp.preflight import check

        env = env_of(env)
        return check(spec, project_of(spec, env), env.get("SPOTBENCH_GCP_API_ENDPOINT") or None)

    def orphans(self, spec: SweepSpec | None = None, *, root: Path | str | None = None,
                regions: list[str] | None = None, project: str | None = None) -> Sweeper:
        from spotbench.clouds.gcp.orphans import GcpSweeper

        return GcpSweeper(project or project_of(spec))

    def stack_config(self, spec: SweepSpec, project: str | None = None,
                     region: str | None = None) -> dict[str, str]:
        return {
            "gcp:project": project or spec.gcp.project or PREVIEW_PROJECT,
            "gcp:region": region or region_of(spec),
        }

    ssh_vias = ("iap",)

    def ssh_proxy(self, spec: SweepSpec, via: str) -> IapTunnel | None:
        """`gcloud compute start-iap-tunnel` needs the instance's project and zone: the fixed
        zone (stopped lifecycle); a created VM's is the one the cloud reports it in (each
        `Target.zone`, spotbench.ops.remote), any candidate of any candidate region."""
        from spotbench.clouds.gcp.ssh import VIA, IapTunnel

        if via != VIA:
            return None
        fixed = first_zone(spec) if spec.lifecycle != "created" else None
        return IapTunnel(project=project_of(spec), zone=fixed)

    pulumi_package = "gcp"

    def preview_properties(self, type_token: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        from spotbench.clouds.gcp.preview import properties

        return properties(type_token, inputs)

    def preview_rules(self, type_token: str, inputs: Mapping[str, Any]) -> list[dict[str, Any]]:
        from spotbench.clouds.gcp.preview import rules

        return rules(type_token, inputs)

    def post_done(self, ctx: MemberContext, body: dict, timeout: float) -> requests.Response:
        import requests

        headers = {"Authorization": f"Bearer {settings.identity_token(ctx.done_url)}"}
        return requests.post(ctx.done_url, json=body, headers=headers, timeout=timeout)


PROVIDER = GcpProvider(FACTS)

"""The `start`, `stop`, `done` and `grant` Cloud Functions (gen2) and who may invoke them.

One source archive (`functions/` + `spotbench/` + `workloads/` + requirements + a `main.py` shim),
uploaded to the results bucket under `_spotbench/` with its content digest in the name.

Nobody is `allUsers`: `roles/run.invoker` goes to the scheduler account on start/stop and to
the sweep's member account on done and grant, on each function's Cloud Run service only
(four bindings whatever the group count; which group a VM is, the function decides from
its instance identity token and the sweep's records, `spotbench.auth.instance`). Ingress is
`ALLOW_INTERNAL_ONLY` for all of them: VMs reach `done` through the VPC (Private Google
Access), and Cloud Scheduler in the same project counts as internal for Cloud Run ingress
when it calls the service's run.app URL (`service_uris`, what the jobs target; never the
cloudfunctions.net URL), so start/stop need no public path either. Cloud Run's front end is the token verifier
(signature, audience, expiry, `run.invoker`); it strips the signature before the request
reaches the function, which — told so by `SPOTBENCH_GCP_FRONT=cloud-run` — reads the claims
it checked and checks issuer, audience (`SPOTBENCH_AUDIENCE` = its own URL), expiry and
the caller's identity again (`spotbench.clouds.gcp.front`, docs/security.md).

Builds run as the sweep's own build service account (new projects no longer give the
default Cloud Build account the roles a function build needs): `roles/logging.logWriter`
and `roles/artifactregistry.writer` on the project (build logs, the image in
`gcf-artifacts`), read access to the source archive's `_spotbench/` prefix, and read access
to the bucket a gen2 build actually fetches the source from: Cloud Functions copies it to
`gcf-v2-sources-<project number>-<region>` (Google's bucket in the project, made by the
first deploy) and the build reads it there as the build account — granted on the project,
conditioned on that bucket's name, as the bucket may not exist yet
(https://cloud.google.com/functions/docs/building; docs/platform.md).

URLs use the deterministic `https://REGION-PROJECT.cloudfunctions.net/NAME` form, so the
VMs' done URL and the OIDC audiences are known before the functions exist (no cycle).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.function_source import ENTRY_POINTS, function_source
from infra.gcp.bucket import prefix_condition
from infra.gcp.identity import account_id, propagated
from spotbench import limits
from spotbench.clouds.gcp.front import CLOUD_RUN, FRONT_ENV
from spotbench.plan import sweep_labels
from spotbench.spec import SweepSpec

MEMBER_ENTRY_POINTS = ("done", "grant")  # what the member account may invoke
RUNTIME = "python312"
INGRESS = "ALLOW_INTERNAL_ONLY"

SOURCE_PREFIX = "_spotbench"
# gcsfs ≥ 2025 probes every bucket's storage layout over the Storage Control API by default
# (experimental HNS support): a call outside the permissions the accounts are given and
# tested for, refused and logged on every operation. spotbench's buckets are flat: off.
GCSFS_ENV = {"GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
BUILD_PROJECT_ROLES = ("roles/logging.logWriter", "roles/artifactregistry.writer")


def gcf_sources_bucket(project_number: str, region: str) -> str:
    """Where a gen2 build reads the function's source (default encryption)."""
    return f"gcf-v2-sources-{project_number}-{region}"


def gcf_sources_condition(project_number: str, region: str) -> dict[str, str]:
    bucket = gcf_sources_bucket(project_number, region)
    return {"title": "gen2 function sources",
            "description": f"read the functions' source copies in {bucket}",
            "expression": f'resource.name.startsWith("projects/_/buckets/{bucket}")'}


def function_name(sweep: str, entry: str) -> str:
    return f"{sweep}-{entry}"


def function_url(region: str, project: str, sweep: str, entry: str) -> str:
    return f"https://{region}-{project}.cloudfunctions.net/{function_name(sweep, entry)}"


@dataclass
class GcpFunctionsArgs:
    spec: SweepSpec
    project: str
    region: str
    bucket: pulumi.Input[str]
    results_url: str
    function_account: pulumi.Input[str]  # email the functions run as
    scheduler_account: pulumi.Input[str]  # email allowed to call start/stop
    member_account: pulumi.Input[str]  # the email every VM of the sweep runs as
    secret: str  # the sweep's secret (key seed, secret envs): the functions read it alone


class GcpFunctions(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: GcpFunctionsArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotbench:gcp:Functions", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        spec = args.spec
        archive, digest = function_source("gcp")
        self.source = gcp.storage.BucketObject(
            f"{name}-source",
            bucket=args.bucket,
            name=f"{SOURCE_PREFIX}/functions-{digest}.zip",
            source=archive,
            opts=child,
        )
        grants = [propagated(f"{name}-build-iam", self._build_account(name, args, child),
                             child)]
        self.urls = {e: function_url(args.region, args.project, spec.name, e)
                     for e in ENTRY_POINTS}
        self.functions: dict[str, gcp.cloudfunctionsv2.Function] = {}
        self.service_uris: dict[str, pulumi.Output[str]] = {}
        for entry in ENTRY_POINTS:
            # the one value that grows with the spec; the rest are names and URLs (and a
            # dozen variables of Cloud Run's 1,000): spotbench.limits, `cloudrun.env.value`
            limits.require("cloudrun.env.value", f"function {function_name(spec.name, entry)}: "
                           "SPOTBENCH_SPEC", limits.nbytes(spec.model_dump_json()))
            fn = gcp.cloudfunctionsv2.Function(
                f"{name}-{entry}",
                name=function_name(spec.name, entry),
                location=args.region,
                project=args.project,
                description=f"spotbench {spec.name}: {entry}",
                labels=sweep_labels(spec.name),
                build_config={
                    "service_account": self.build.email.apply(
                        lambda e: f"projects/{args.project}/serviceAccounts/{e}"),
                    "runtime": RUNTIME,
                    "entry_point": entry,
                    "source": {"storage_source": {
                        "bucket": args.bucket, "object": self.source.name,
                    }},
                },
                service_config={
                    "max_instance_count": 3,
                    "available_memory": "512M",
                    "timeout_seconds": 300,
                    "ingress_settings": INGRESS,
                    "all_traffic_on_latest_revision": True,
                    "service_account_email": args.function_account,
                    "environment_variables": {
                        "SPOTBENCH_CLOUD": "gcp",
                        **GCSFS_ENV,
                        "SPOTBENCH_SPEC": spec.model_dump_json(),
                        "SPOTBENCH_RESULTS_URL": args.results_url,
                        "SPOTBENCH_GCP_PROJECT": args.project,
                        "SPOTBENCH_AUDIENCE": self.urls[entry],
                        # Cloud Run's front end checks the token and run.invoker, then strips
                        # the signature: the function reads the claims it checked
                        FRONT_ENV: CLOUD_RUN,
                        "SPOTBENCH_SCHEDULER_ACCOUNTS": args.scheduler_account,
                        # done/grant: a VM's token must carry the sweep's member account
                        "SPOTBENCH_MEMBER_ACCOUNTS": args.member_account,
                        # grant: what it reads (keys, envs) and signs as (POST policies)
                        "SPOTBENCH_GCP_SECRET": args.secret,
                        "SPOTBENCH_GCP_SIGNER": args.function_account,
                    },
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=grants),
            )
            self.functions[entry] = fn
            # the Cloud Run service's run.app URL: what Cloud Scheduler must call, as Cloud
            # Run ingress counts its requests internal only there (docs/platform.md)
            self.service_uris[entry] = fn.service_config.apply(lambda c: c.uri if c else None)
            invoker = (args.member_account if entry in MEMBER_ENTRY_POINTS
                       else args.scheduler_account)
            gcp.cloudrunv2.ServiceIamMember(
                f"{name}-{entry}-invoker",
                name=fn.name,
                location=args.region,
                project=args.project,
                role="roles/run.invoker",
                member=pulumi.Output.from_input(invoker).apply(lambda e: f"serviceAccount:{e}"),
                opts=child,
            )
        self.register_outputs({f"{e}_url": u for e, u in self.urls.items()})

    def _build_account(self, name: str, args: GcpFunctionsArgs,
                       child: pulumi.ResourceOptions) -> list[pulumi.Resource]:  # fmt: skip
        """The build service account and its grants (the functions wait for them to
        propagate: the build runs as the account the moment the function is created)."""
        sweep = args.spec.name
        self.build = gcp.serviceaccount.Account(
            f"{name}-build",
            account_id=account_id(sweep, "build"),
            display_name=f"spotbench {sweep}: Cloud Build of the functions",
            project=args.project,
            opts=child,
        )
        member = self.build.email.apply(lambda e: f"serviceAccount:{e}")
        grants: list[pulumi.Resource] = [self.build] + [
            gcp.projects.IAMMember(
                f"{name}-build-{role.split('/')[1].replace('.', '-')}",
                project=args.project, role=role, member=member, opts=child,
            )
            for role in BUILD_PROJECT_ROLES
        ]
        number = gcp.organizations.get_project_output(project_id=args.project).number
        grants.append(gcp.projects.IAMMember(
            f"{name}-build-gcf-sources", project=args.project, role="roles/storage.objectViewer",
            member=member, condition=number.apply(lambda n: gcf_sources_condition(n, args.region)),
            opts=child,
        ))
        grants.append(gcp.storage.BucketIAMMember(
            f"{name}-build-source",
            bucket=args.bucket,
            role="roles/storage.objectViewer",
            member=member,
            condition=pulumi.Output.from_input(args.bucket).apply(
                lambda b: prefix_condition(b, SOURCE_PREFIX, "functions source")),
            opts=child,
        ))
        return grants

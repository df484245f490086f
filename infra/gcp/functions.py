"""The `start`, `stop`, `done` and `grant` Cloud Functions (gen2) and who may invoke them.

One source archive (`functions/` + `spotbench/` + `workloads/` + requirements + a `main.py` shim),
uploaded to the results bucket under `_spotbench/` with its content digest in the name.

Nobody is `allUsers`: `roles/run.invoker` goes to the scheduler account on start/stop and to
the sweep's member account on done and grant, on each function's Cloud Run service only
(four bindings whatever the group count; which group a VM is, the function decides from
its instance identity token and the sweep's records, `spotbench.auth.instance`). Ingress is
`ALLOW_INTERNAL_ONLY` for all three: VMs reach `done` through the VPC (Private Google
Access), and Cloud Scheduler in the same project counts as internal for Cloud Run ingress,
so start/stop need no public path either. Cloud Run's front end is the token verifier
(signature, audience, expiry, `run.invoker`); it strips the signature before the request
reaches the function, which — told so by `SPOTBENCH_GCP_FRONT=cloud-run` — reads the claims
it checked and checks issuer, audience (`SPOTBENCH_AUDIENCE` = its own URL), expiry and
the caller's identity again (`spotbench.clouds.gcp.front`, docs/security.md).

Builds run as the sweep's own build service account (new projects no longer give the
default Cloud Build account the roles a function build needs): `roles/logging.logWriter`
and `roles/artifactregistry.writer` on the project (build logs, the image in
`gcf-artifacts`) and read access to the source archive's `_spotbench/` prefix only, as
https://cloud.google.com/functions/docs/securing/build-custom-sa describes.

URLs use the deterministic `https://REGION-PROJECT.cloudfunctions.net/NAME` form, so the
VMs' done URL and the OIDC audiences are known before the functions exist (no cycle).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.function_source import function_source
from infra.gcp.bucket import prefix_condition
from infra.gcp.identity import account_id
from spotbench import limits
from spotbench.clouds.gcp.front import CLOUD_RUN, FRONT_ENV
from spotbench.plan import sweep_labels
from spotbench.spec import SweepSpec

ENTRY_POINTS = ("start", "stop", "done", "grant")
MEMBER_ENTRY_POINTS = ("done", "grant")  # what the member account may invoke
RUNTIME = "python312"
INGRESS = "ALLOW_INTERNAL_ONLY"
SOURCE_PREFIX = "_spotbench"
# gcsfs ≥ 2025 probes every bucket's storage layout over the Storage Control API by default
# (experimental HNS support): a call outside the permissions the accounts are given and
# tested for, refused and logged on every operation. spotbench's buckets are flat: off.
GCSFS_ENV = {"GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
BUILD_PROJECT_ROLES = ("roles/logging.logWriter", "roles/artifactregistry.writer")


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
        grants = self._build_account(name, args, child)
        self.urls = {e: function_url(args.region, args.project, spec.name, e)
                     for e in ENTRY_POINTS}
        self.functions: dict[str, gcp.cloudfunctionsv2.Function] = {}
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
        """The build service account and its grants (the functions depend on them)."""
        sweep = args.spec.name
        self.build = gcp.serviceaccount.Account(
            f"{name}-build",
            account_id=account_id(sweep, "build"),
            display_name=f"spotbench {sweep}: Cloud Build of the functions",
            project=args.project,
            opts=child,
        )
        member = self.build.email.apply(lambda e: f"serviceAccount:{e}")
        grants: list[pulumi.Resource] = [
            gcp.projects.IAMMember(
                f"{name}-build-{role.split('/')[1].replace('.', '-')}",
                project=args.project, role=role, member=member, opts=child,
            )
            for role in BUILD_PROJECT_ROLES
        ]
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

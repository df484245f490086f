"""Service accounts and the function's custom role (least privilege).

- VM account: runs the workload; may write/read the results bucket, read Artifact
  Registry images, write logs, and invoke `done` — granted on those resources in
  bucket.py / functions.py, plus `roles/artifactregistry.reader` and
  `roles/logging.logWriter` on the project (an image may live in any repository).
- Scheduler account: only `roles/run.invoker` on `start` and `stop` (functions.py).
- Function account: the custom role below (exactly the compute permissions the
  start/stop/done code paths call), the results bucket (bucket.py), and
  `roles/iam.serviceAccountUser` on the VM account only (starting an instance that runs
  as a service account requires acting as it).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

# spotbench.clouds.gce: instances.aggregatedList (needs .list) → get → start/stop →
# zoneOperations.get while waiting. Nothing else: no create/delete/setMetadata.
FUNCTION_COMPUTE_PERMISSIONS = (
    "compute.instances.get",
    "compute.instances.list",
    "compute.instances.start",
    "compute.instances.stop",
    "compute.zoneOperations.get",
)
VM_PROJECT_ROLES = ("roles/artifactregistry.reader", "roles/logging.logWriter")


def custom_role_id(sweep: str) -> str:
    return "spotbench_" + sweep.replace("-", "_")


def account_id(sweep: str, kind: str) -> str:
    """A service-account id (6–30 chars, lowercase) for `kind` of `sweep`."""
    suffix = {"vm": "-vm", "scheduler": "-sch", "function": "-fn"}[kind]
    return f"sb-{sweep}"[: 30 - len(suffix)].rstrip("-") + suffix


@dataclass
class GcpIdentitiesArgs:
    sweep: str
    project: str


class GcpIdentities(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: GcpIdentitiesArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotbench:gcp:Identities", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        accounts = {}
        for kind, what in (
            ("vm", "workload VMs"),
            ("scheduler", "Cloud Scheduler → start/stop"),
            ("function", "start/stop/done functions"),
        ):
            accounts[kind] = gcp.serviceaccount.Account(
                f"{name}-{kind}",
                account_id=account_id(args.sweep, kind),
                display_name=f"spotbench {args.sweep}: {what}",
                project=args.project,
                opts=child,
            )
        self.vm, self.scheduler, self.function = (
            accounts["vm"], accounts["scheduler"], accounts["function"]
        )
        self.role = gcp.projects.IAMCustomRole(
            f"{name}-function-role",
            role_id=custom_role_id(args.sweep),
            title=f"spotbench {args.sweep} start/stop",
            description="start, stop and list the sweep's instances; nothing else",
            permissions=list(FUNCTION_COMPUTE_PERMISSIONS),
            project=args.project,
            opts=child,
        )
        gcp.projects.IAMMember(
            f"{name}-function-compute",
            project=args.project,
            role=self.role.role_id.apply(lambda rid: f"projects/{args.project}/roles/{rid}"),
            member=self.function.email.apply(lambda e: f"serviceAccount:{e}"),
            opts=child,
        )
        gcp.serviceaccount.IAMMember(
            f"{name}-function-actas-vm",
            service_account_id=self.vm.name,
            role="roles/iam.serviceAccountUser",
            member=self.function.email.apply(lambda e: f"serviceAccount:{e}"),
            opts=child,
        )
        for role in VM_PROJECT_ROLES:
            gcp.projects.IAMMember(
                f"{name}-vm-{role.split('/')[1].replace('.', '-')}",
                project=args.project,
                role=role,
                member=self.vm.email.apply(lambda e: f"serviceAccount:{e}"),
                opts=child,
            )
        self.register_outputs({
            "vm": self.vm.email,
            "scheduler": self.scheduler.email,
            "function": self.function.email,
            "role": self.role.name,
        })

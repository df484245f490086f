"""The Google APIs a GCP sweep uses, enabled by the stack itself (`projects.Service`).

Every other resource of the sweep depends on them (a transformation on the `GcpSweep`
component adds the dependency), so a fresh project gets its APIs before the first VM,
bucket or function is created. Enabling an API needs `serviceusage.googleapis.com` and
`cloudresourcemanager.googleapis.com` themselves — the line to run by hand once is
`spotbench.clouds.gcp.enable_command()`; `spotbench preflight` prints it when they are off. `disable_on_destroy`
is off: other stacks in the project may use the same APIs.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from spotbench.clouds.gcp import BOOTSTRAP_APIS, REQUIRED_APIS, enable_command  # noqa: F401


class GcpApis(pulumi.ComponentResource):
    def __init__(self, name: str, project: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotbench:gcp:Apis", name, None, opts)
        self.services = [
            gcp.projects.Service(
                f"{name}-{api.split('.')[0]}",
                project=project,
                service=api,
                disable_on_destroy=False,
                disable_dependent_services=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for api in REQUIRED_APIS
        ]
        self.register_outputs({"apis": list(REQUIRED_APIS)})

    def after(self) -> pulumi.ResourceTransformation:
        """A transformation making every resource it sees (but the services) wait for them."""
        services = self.services

        def transform(args: pulumi.ResourceTransformationArgs):
            if args.type_ == "gcp:projects/service:Service":
                return None
            opts = pulumi.ResourceOptions.merge(
                args.opts, pulumi.ResourceOptions(depends_on=services))
            return pulumi.ResourceTransformationResult(args.props, opts)

        return transform

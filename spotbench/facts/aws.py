"""The `aws` cloud's facts: EC2 in a region, its catalog, its spec section `aws:`."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from spotbench.catalog import AWS_CATALOG
from spotbench.facts.base import CloudFacts
from spotbench.facts.options import CloudOptions


# The members' image: the ECS-optimized Amazon Linux 2023 AMI (docker preinstalled), its
# GPU variant (NVIDIA driver, nvidia-container-toolkit) on GPU types, found through AWS's
# public SSM parameters (docs/platform.md, "AWS boot image"). The AL2 variants reached their
# end of life on 2026-06-30 and the boot document is written (and booted in the lab) for
# AL2023 only.
ECS_AMI_PARAMETERS = "/aws/service/ecs/optimized-ami"
CPU_AMI_PARAMETER = f"{ECS_AMI_PARAMETERS}/amazon-linux-2023/recommended/image_id"
GPU_AMI_PARAMETER = f"{ECS_AMI_PARAMETERS}/amazon-linux-2023/gpu/recommended/image_id"
AL2_END_OF_LIFE = "2026-06-30"
_AL2_PARAMETER = re.compile(r"^/aws/service/(ecs/optimized-ami/amazon-linux-2/|"
                            r"ami-amazon-linux-latest/amzn2-)")


def has_gpu(machine_type: str, accelerator: str | None = None) -> bool:
    """GPU instance families (g4dn, g5, p3, …); an accelerator in the spec implies one."""
    return bool(accelerator) or bool(re.match(r"^(g|p)\d", machine_type))


def ami_parameter(override: str | None, gpu: bool) -> str:
    """The public SSM parameter naming a member's AMI: `aws.ami_ssm_parameter`, else the
    ECS-optimized AL2023 one (its GPU variant when `gpu`)."""
    return override or (GPU_AMI_PARAMETER if gpu else CPU_AMI_PARAMETER)


class AwsOptions(CloudOptions):
    ami_ssm_parameter: str | None = Field(
        None, description="the public SSM parameter naming the members' AMI (default: the "
                          "ECS-optimized Amazon Linux 2023 AMI, its GPU variant on GPU types)")
    vpc_cidr: str = "10.43.0.0/16"
    subnet_cidr: str = "10.43.1.0/24"
    root_volume_gb: int = Field(30, ge=8)
    spot_valid_days: int = Field(
        90, ge=1, le=1095,
        description="days the members' persistent spot requests stay valid after `pulumi up`: "
                    "EC2 restarts interrupted members only until then (redeploy to renew)",
    )

    @field_validator("ami_ssm_parameter")
    @classmethod
    def _not_amazon_linux_2(cls, value: str | None) -> str | None:
        if value and _AL2_PARAMETER.match(value):
            raise ValueError(
                "it names an Amazon Linux 2 AMI, past its end of life "
                f"({AL2_END_OF_LIFE}); the members' boot document is made for Amazon Linux "
                f"2023: drop aws.ami_ssm_parameter (spotbench picks {CPU_AMI_PARAMETER}, or "
                f"{GPU_AMI_PARAMETER} on GPU types) or name an AL2023 one")
        return value


FACTS = CloudFacts(
    name="aws",
    provider="spotbench.clouds.aws.provider",
    location="region",
    location_example="us-east-1",
    stack_component="infra.aws:AwsSweep",  # the Pulumi component infra/__main__.py declares
    scheduler_item="eventbridge-schedule",
    catalog=AWS_CATALOG,
    region_of_zone=AWS_CATALOG.region_of,
    # aws.amazon.com/eventbridge/pricing (14 M scheduler invocations), /lambda/pricing
    free_tier={"scheduler jobs": 14_000_000, "functions (invocations)": 1_000_000,
               "functions (GB-seconds)": 400_000, "egress": 100},  # aws.amazon.com/ec2/pricing/on-demand/
    nat="gateway",  # infra/aws/network.py: one NAT Gateway and its Elastic IP, all month
    options=AwsOptions,
    disk_item="gp3",
    disk_gb_option="root_volume_gb",
    setup_extras="aws,infra,ops",
    needs_modules={"aws": ("boto3", "s3fs"), "infra": ("pulumi", "pulumi_aws", "pulumi_tls")},
    tools=(
        ("pulumi", "`pulumi up`", "https://www.pulumi.com/docs/install/"),
        ("aws", "`aws configure` or `aws sso login`",
         "https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html"),
        ("docker", "`make images`", "https://docs.docker.com/engine/install/"),
    ),
    double_env="AWS_ENDPOINT_URL",
)

"""The `aws` cloud's facts: EC2 in a region, its catalog, its spec section `aws:`."""

from __future__ import annotations

from pydantic import Field

from spotbench.catalog import AWS_CATALOG
from spotbench.facts.base import CloudFacts
from spotbench.facts.options import CloudOptions


class AwsOptions(CloudOptions):
    ami_ssm_parameter: str | None = None
    vpc_cidr: str = "10.43.0.0/16"
    subnet_cidr: str = "10.43.1.0/24"
    root_volume_gb: int = Field(30, ge=8)
    spot_valid_days: int = Field(
        90, ge=1, le=1095,
        description="days the members' persistent spot requests stay valid after `pulumi up`: "
                    "EC2 restarts interrupted members only until then (redeploy to renew)",
    )


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

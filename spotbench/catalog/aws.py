"""AWS's catalog: zones, instance families and sizes, GPU families and counts, placement
groups, Graviton families, EventBridge's cron rules."""

from __future__ import annotations

import re
from datetime import timedelta

from spotbench.catalog.base import (
    IMAGE_ARCHITECTURE,
    KNOWN,
    UNKNOWN_COUNT,
    Check,
    CloudCatalog,
    did_you_mean,
)
from spotbench.cron import aws_cron, shift_cron

AWS_ZONE = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d+[a-z]$")
AWS_REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d+$")

AWS_ZONES: dict[str, str] = {
    "us-east-1": "abcdef", "us-east-2": "abc", "us-west-1": "abc", "us-west-2": "abcd",
    "ca-central-1": "abd", "ca-west-1": "abc", "eu-central-1": "abc", "eu-central-2": "abc",
    "eu-west-1": "abc", "eu-west-2": "abc", "eu-west-3": "abc", "eu-north-1": "abc",
    "eu-south-1": "abc", "eu-south-2": "abc", "ap-south-1": "abc", "ap-south-2": "abc",
    "ap-northeast-1": "acd", "ap-northeast-2": "abcd", "ap-northeast-3": "abc",
    "ap-southeast-1": "abc", "ap-southeast-2": "abc", "ap-southeast-3": "abc",
    "ap-southeast-4": "abc", "ap-east-1": "abc", "sa-east-1": "abc", "me-south-1": "abc",
    "me-central-1": "abc", "af-south-1": "abc", "il-central-1": "abc",
    "us-gov-west-1": "abc", "us-gov-east-1": "abc",
}

AWS_TYPE = re.compile(r"^(?P<family>[a-z]+\d+[a-z\-]*)\.(?P<size>[a-z0-9\-]+)$")
AWS_SIZE = re.compile(r"^(nano|micro|small|medium|large|xlarge|\d+xlarge|metal(-\d+xl)?)$")
AWS_FAMILIES = frozenset({
    "t2", "t3", "t3a", "t4g", "m5", "m5a", "m5n", "m5zn", "m6i", "m6a", "m6g", "m6in", "m7i",
    "m7a", "m7g", "c5", "c5a", "c5n", "c6i", "c6a", "c6g", "c6gn", "c6in", "c7i", "c7a", "c7g",
    "c7gn", "r5", "r5a", "r5n", "r6i", "r6a", "r6g", "r7i", "r7g", "hpc6a", "hpc7g", "g4dn",
    "g4ad", "g5", "g5g", "g6", "p3", "p3dn", "p4d", "p5", "inf2", "trn1",
})
AWS_GPU_FAMILIES: dict[str, str] = {  # family → the GPU its types carry
    "g4dn": "nvidia-tesla-t4", "g4ad": "amd-radeon-v520", "g5": "nvidia-a10g",
    "g5g": "nvidia-t4g", "g6": "nvidia-l4", "p3": "nvidia-tesla-v100", "p3dn": "nvidia-tesla-v100",
    "p4d": "nvidia-a100", "p5": "nvidia-h100",
}
# GPUs per instance of the AWS GPU types (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html).
AWS_GPU_COUNTS: dict[str, int] = {
    **{f"g4dn.{s}": 1 for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")},
    "g4dn.12xlarge": 4, "g4dn.metal": 8,
    **{f"g4ad.{s}": 1 for s in ("xlarge", "2xlarge", "4xlarge")}, "g4ad.8xlarge": 2,
    "g4ad.16xlarge": 4,
    **{f"g5.{s}": 1 for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")},
    "g5.12xlarge": 4, "g5.24xlarge": 4, "g5.48xlarge": 8,
    **{f"g5g.{s}": 1 for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge")}, "g5g.16xlarge": 2,
    "g5g.metal": 2,
    **{f"g6.{s}": 1 for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")},
    "g6.12xlarge": 4, "g6.24xlarge": 4, "g6.48xlarge": 8,
    "p3.2xlarge": 1, "p3.8xlarge": 4, "p3.16xlarge": 8, "p3dn.24xlarge": 8,
    "p4d.24xlarge": 8, "p5.48xlarge": 8,
}
# Accelerators that are not GPUs, built into their types: a policy that forbids or caps GPUs
# forbids or caps them too (issue 38). Chips per instance: Inferentia, Trainium and Gaudi
# (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html).
AWS_ACCELERATOR_FAMILIES: dict[str, str] = {
    "inf1": "aws-inferentia", "inf2": "aws-inferentia2", "trn1": "aws-trainium",
    "trn1n": "aws-trainium", "trn2": "aws-trainium2", "dl1": "habana-gaudi", "dl2q": "qualcomm-ai100",
}
AWS_ACCELERATOR_COUNTS: dict[str, int] = {
    "inf1.xlarge": 1, "inf1.2xlarge": 1, "inf1.6xlarge": 4, "inf1.24xlarge": 16,
    "inf2.xlarge": 1, "inf2.8xlarge": 1, "inf2.24xlarge": 6, "inf2.48xlarge": 12,
    "trn1.2xlarge": 1, "trn1.32xlarge": 16, "trn1n.32xlarge": 16, "trn2.48xlarge": 16,
    "dl1.24xlarge": 8,
}
# Cluster placement groups do not take burstable T2 instances.
AWS_NO_CLUSTER = frozenset({"t2"})
# the attribute letter `g` after the generation means AWS Graviton (c7g, m6gd, g5g, hpc7g):
# docs.aws.amazon.com/ec2/latest/instancetypes/instance-type-names.html
AWS_GRAVITON = re.compile(r"^[a-z]+\d+[a-z\-]*g[a-z\-]*$")


class AwsCatalog(CloudCatalog):
    cloud = "aws"
    zone_pattern, region_pattern = AWS_ZONE, AWS_REGION
    zones = AWS_ZONES
    zone_example, region_example = "us-east-1a", "us-east-1"
    machine_example, scheduler_name = "c5.large", "EventBridge Scheduler"

    def check_crons(self, cron: str, deadline: timedelta) -> None:
        stop = shift_cron(cron, deadline)
        aws_cron(cron)  # EventBridge's own cron rules, for the start and the stop
        aws_cron(stop)

    def zone_name(self, region: str, letter: str) -> str:
        return f"{region}{letter}"

    def region_of(self, zone: str) -> str:
        """us-east-1a → us-east-1; a region (us-east-1) is its own (the one home of this rule)."""
        return zone[:-1] if zone[-1:].isalpha() else zone

    arm_name = "AWS Graviton"

    def family(self, machine_type: str) -> str:
        return machine_type.split(".", 1)[0].lower()

    def architecture(self, machine_type: str) -> str:
        return "arm64" if AWS_GRAVITON.match(self.family(machine_type)) else IMAGE_ARCHITECTURE

    def built_in_gpus(self, machine_type: str) -> tuple[str, int] | None:
        mt = machine_type.lower()
        family = mt.split(".", 1)[0]
        if family in AWS_GPU_FAMILIES or family.startswith(("p", "g")) and family[1:2].isdigit():
            return AWS_GPU_FAMILIES.get(family, "unknown"), AWS_GPU_COUNTS.get(mt, UNKNOWN_COUNT)
        if family in AWS_ACCELERATOR_FAMILIES:  # not GPUs, but what a GPU policy is about
            return AWS_ACCELERATOR_FAMILIES[family], AWS_ACCELERATOR_COUNTS.get(mt, UNKNOWN_COUNT)
        return None

    def check_name(self, machine_type: str, priced: set[str]) -> Check:
        if machine_type in priced:
            return KNOWN
        hint = did_you_mean(machine_type, priced)
        m = AWS_TYPE.match(machine_type)
        if not m:
            return Check("bad", "not an EC2 instance type (like 'c5.large')" + hint)
        if not AWS_SIZE.match(m.group("size")):
            return Check("bad", f"{m.group('size')!r} is not an EC2 size (large, xlarge, 2xlarge, …)" + hint)
        if m.group("family") not in AWS_FAMILIES and hint:
            return Check("bad", f"unknown instance family {m.group('family')!r}" + hint)
        return self.unlisted_type(machine_type)

    def check_accelerator(self, machine_type: str, accelerator: str, count: int) -> Check:
        family = self.family(machine_type)
        carried = AWS_GPU_FAMILIES.get(family)
        if carried is None:
            return Check("bad", f"EC2 {machine_type} has no GPU and EC2 attaches none: GPUs come "
                         f"with the instance type ({', '.join(sorted(AWS_GPU_FAMILIES))})")
        if accelerator != carried:
            return Check("bad", f"EC2 {family} instances carry {carried}, not {accelerator}")
        return self.gpu_vendor_check(accelerator) or KNOWN

    def check_placement(self, machine_type: str, placement: str, spot: bool) -> Check:
        if placement == "none":
            return KNOWN
        if spot:  # EC2 places no spot instance that stops on interruption in a placement group
            return Check("bad", f"EC2 does not launch a spot instance ({machine_type}) that stops on "
                         "interruption (how spotbench runs spot) in a placement group: use "
                         "provisioning: standard, or placement: none")
        if placement == "compact" and self.family(machine_type) in AWS_NO_CLUSTER:
            return Check("bad", f"cluster placement groups do not take {machine_type} "
                         f"({self.family(machine_type)} instances)")
        return KNOWN


AWS_CATALOG = AwsCatalog()  # one per cloud, so each recognises the other's names

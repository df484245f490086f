"""The boot lab's AMIs: what AWS's public SSM parameters of the ECS-optimized AMIs name, and
what each image carries that a member's boot depends on.

`get_parameter(args)` answers the program's `aws.ssm.get_parameter` as Parameter Store does
for these public names (each its own image id); any other name fails as `ParameterNotFound`
does. `image_of(ami_id)` gives the image an instance declared: `boot.render` puts it on each
`Rendered` (`Rendered.image`) and `Lab.vm` into the VM's `vm.json`, where the lab's shims
read it (`tests/fidelity/shims.py`: `docker run --gpus` works only on an image whose
nvidia-container-toolkit gives dockerd its NVIDIA hook).

The images as of the ECS-optimized AMI release 20261113 (aws/amazon-ecs-ami, read
2026-12-07): AL2023 with Docker 25.0.18 and containerd 2.3.7, its GPU variant with NVIDIA
driver 580.178.04 and nvidia-container-toolkit, the kernel module loaded at boot by
`nvidia-kmod-load.service` (scripts/al2023/gpu/); AL2023's systemd 252 and cloud-init 22.2.2
(the AL2023 package lists). The AL2 variants (release 20260820 of the same repository:
Docker 25.0.16, NVIDIA driver 550.163.01) reached their end of life on 2026-06-30 (the
ECS-optimized AMI page); their parameters still resolve.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import date
from typing import Any

from spotbench.facts.aws import CPU_AMI_PARAMETER, ECS_AMI_PARAMETERS, GPU_AMI_PARAMETER

GET_PARAMETER = "aws:ssm/getParameter:getParameter"


@dataclass(frozen=True)
class Image:
    ami: str
    name: str
    os: str
    end_of_life: str  # ISO date
    systemd: int
    cloud_init: str
    docker: str
    nvidia_driver: str | None = None  # the GPU variants
    nvidia_hook: bool = False  # nvidia-container-toolkit's nvidia-container-runtime-hook
    driver_unit: str | None = None  # the unit that loads the NVIDIA kernel module at boot

    def supported(self, today: date | None = None) -> bool:
        return (today or date.today()) < date.fromisoformat(self.end_of_life)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


AL2023 = Image("ami-0a12023ecs20261113", "al2023-ami-ecs-hvm-2023.0.20261113-kernel-6.1-x86_64",
               "Amazon Linux 2023", "2029-06-30", 252, "22.2.2", "25.0.18")
AL2023_GPU = Image("ami-0a12023ecsgpu20261113",
                   "al2023-ami-ecs-gpu-hvm-2023.0.20261113-kernel-6.1-x86_64-ebs",
                   "Amazon Linux 2023", "2029-06-30", 252, "22.2.2", "25.0.18",
                   nvidia_driver="580.178.04", nvidia_hook=True,
                   driver_unit="nvidia-kmod-load.service")
AL2 = Image("ami-0a2ecs20260820", "amzn2-ami-ecs-hvm-2.0.20260820-x86_64-ebs", "Amazon Linux 2",
            "2026-06-30", 219, "19.3", "25.0.16")
AL2_GPU = Image("ami-0a2ecsgpu20260820", "amzn2-ami-ecs-gpu-hvm-2.0.20260820-x86_64-ebs",
                "Amazon Linux 2", "2026-06-30", 219, "19.3", "25.0.16",
                nvidia_driver="550.163.01", nvidia_hook=True)

PARAMETERS: dict[str, Image] = {
    CPU_AMI_PARAMETER: AL2023,
    GPU_AMI_PARAMETER: AL2023_GPU,
    f"{ECS_AMI_PARAMETERS}/amazon-linux-2/recommended/image_id": AL2,
    f"{ECS_AMI_PARAMETERS}/amazon-linux-2/gpu/recommended/image_id": AL2_GPU,
}


class ParameterNotFound(Exception):
    pass


def get_parameter(args: dict[str, Any]) -> dict[str, Any]:
    name = args.get("name")
    if name not in PARAMETERS:
        raise ParameterNotFound(f"An error occurred (ParameterNotFound) when calling the "
                                f"GetParameter operation: Parameter {name} not found.")
    return {"name": name, "value": PARAMETERS[name].ami, "type": "String"}


def image_of(ami: str) -> Image:
    found = [i for i in PARAMETERS.values() if i.ami == ami]
    if not found:
        raise AssertionError(f"instance declares AMI {ami!r}, which no public parameter names")
    return found[0]

"""The workloads spotbench can run, by the name a spec gives (`workload.name`): the registry.

Each entry is the workload's descriptor (`spotbench.workload.Workload`): its config model,
member roles, ports, images, metrics and report section. This dict is the registry: adding
a workload = its package under `workloads/` + one line here (docs/adding-a-workload.md).
Importing it loads the descriptors only (pydantic models), never a workload's tools.
Descriptors never import this module (nor `spotbench.workload_registry`, which reads it).
"""

from __future__ import annotations

from spotbench.workload import Workload
from workloads.container.descriptor import WORKLOAD as CONTAINER
from workloads.osu.descriptor import WORKLOAD as OSU
from workloads.tf_mnist.descriptor import WORKLOAD as TF_MNIST
from workloads.torch_cifar.descriptor import WORKLOAD as TORCH

WORKLOADS: dict[str, Workload] = {
    OSU.name: OSU,
    TF_MNIST.name: TF_MNIST,
    CONTAINER.name: CONTAINER,
    TORCH.name: TORCH,
}

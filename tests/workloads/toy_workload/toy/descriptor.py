from __future__ import annotations

from typing import Literal

from pydantic import Field

from spotbench.workload import Images, Params, Workload


class ToyParams(Params):
    """Counts to `n` on every member."""

    name: Literal["toy"] = "toy"
    n: int = Field(10, ge=1)
    members: int = Field(2, ge=1, le=8)


def roles(params: ToyParams) -> list[tuple[str, int]]:
    return [("node", i) for i in range(params.members)]


WORKLOAD = Workload(
    name="toy", params=ToyParams, module="workloads.toy", roles=roles,
    role_codes={"node": "n"}, port=4100, images=Images(cpu="toy-cpu"),
    metrics=("counted",), report="workloads.toy.report:section",
    description=ToyParams.__doc__ or "",
)

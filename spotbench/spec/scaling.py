"""A sweep's scaling axis and the amount of work behind its cost-vs-time (issue #36):
`scaling: {axis, base}` (the report's speedup, efficiency and cost per unit of work are
against the base) and `work: {epochs | steps}`; `check_scaling` holds the axis to the matrix."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from spotbench.workload import Params as _Strict  # spec sections: unknown keys are errors


class Scaling(_Strict):
    """The axis a sweep scales over and its base: the report's speedup, parallel efficiency
    and cost per unit of work are against the base (`scaling: {axis: accelerator_count, base: 1}`)."""

    axis: str = Field(description="a numeric matrix key: accelerator_count, workers, nodes, "
                                  "processes_per_vm, …")
    base: float = Field(gt=0, description="the axis value the others are set against")


class Work(_Strict):
    """The amount of work behind cost-vs-time (`work: {epochs: 1000}` or `{steps: 10000}`)."""

    epochs: float | None = Field(None, gt=0)
    steps: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one(self) -> Work:
        if (self.epochs is None) == (self.steps is None):
            raise ValueError("work: give one of epochs or steps, e.g. `work: {epochs: 1000}`")
        return self


def check_scaling(scaling: Scaling | None, matrix: dict[str, list[Any]]) -> None:
    """`scaling.axis` is a matrix key whose values are numbers and include the base."""
    if scaling is None:
        return
    axis, base = scaling.axis, scaling.base
    values = matrix.get(axis)
    if values is None:
        raise ValueError(f"scaling.axis {axis!r}: not a matrix key; sweep it, e.g. "
                         f"`matrix: {{{axis}: [1, 2, 4]}}` (matrix keys: "
                         f"{', '.join(sorted(matrix)) or 'none'})")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        raise ValueError(f"scaling.axis {axis!r}: its matrix values {values} are not all numbers")
    if base not in values:
        raise ValueError(f"scaling.base {base:g}: not among matrix.{axis} {values}; "
                         f"choose one of them (usually the smallest, {min(values)})")

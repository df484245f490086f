"""The base of a cloud's own spec section (`gcp:`, `aws:`): strict like every spec section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class CloudOptions(BaseModel):
    """Unknown keys are errors, values are frozen (like `spotbench.workload.Params`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

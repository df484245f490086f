"""Cloud drivers: `local` (processes), `gcp` (google-cloud-compute), `aws` (boto3).

Only modules in this package import cloud SDKs; import a driver through `get_cloud` so
that a user of one cloud never needs the other's SDK installed.
"""

from __future__ import annotations

from typing import Any

from spotbench.clouds.base import ACTIVE, Cloud, Instance, State, matches

__all__ = ["ACTIVE", "Cloud", "Instance", "State", "matches", "get_cloud"]


def get_cloud(name: str, **options: Any) -> Cloud:
    """The driver for `name` (`local`, `gcp`, `aws`); options go to its constructor."""
    if name == "local":
        from spotbench.clouds.local import LocalCloud

        return LocalCloud(**options)
    if name == "gcp":
        from spotbench.clouds.gcp import GcpCloud

        return GcpCloud(**options)
    if name == "aws":
        from spotbench.clouds.aws import AwsCloud

        return AwsCloud(**options)
    raise ValueError(f"unknown cloud {name!r}; choose local, gcp or aws")

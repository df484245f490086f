"""Clouds: one provider per cloud (`local` processes, `gcp` Compute Engine, `aws` EC2).

`get_provider(name)` is the one lookup by cloud name (see `spotbench.clouds.provider`).
Only modules in this package import cloud SDKs, and only when a driver, scheduler or
orphan finder is built: a user of one cloud never needs the other's SDK installed.
"""

from __future__ import annotations

from typing import Any

from spotbench.clouds.base import ACTIVE, Cloud, Instance, State, matches
from spotbench.clouds.provider import PROVIDERS, Provider, UnknownCloud, get_provider

__all__ = [
    "ACTIVE", "PROVIDERS", "Cloud", "Instance", "Provider", "State", "UnknownCloud",
    "get_cloud", "get_provider", "matches",
]


def get_cloud(name: str, **options: Any) -> Cloud:
    """The driver of cloud `name` built from explicit options (its constructor's)."""
    return get_provider(name).driver(**options)

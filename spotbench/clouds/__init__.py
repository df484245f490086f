"""Clouds: what each cloud does, one package per cloud (`local` processes, `gcp` Compute
Engine, `aws` EC2), each with its provider (`<cloud>/provider.py`).

`get_provider(name)` finds a provider through the registry of cloud facts
(`spotbench.facts.CLOUDS`; see `spotbench.clouds.provider`). The cloud packages never import
each other. Only modules in this package import cloud SDKs, and only when a driver,
scheduler or orphan finder is built: a user of one cloud never needs the other's SDK.
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

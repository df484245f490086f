"""A toy third cloud's operations: nothing but what a price estimate and a plan ask."""

from __future__ import annotations

from spotbench.clouds.provider import Provider
from toycloud.facts import FACTS


class ToyProvider(Provider):
    pass


PROVIDER = ToyProvider(FACTS)

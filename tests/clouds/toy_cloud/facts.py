"""A toy third cloud's facts: what tests/clouds/test_a_new_cloud.py plugs in."""

from __future__ import annotations

from pydantic import Field

from spotbench.facts.base import CloudFacts
from spotbench.facts.options import CloudOptions


class ToyOptions(CloudOptions):
    disk_gb: int = Field(12, ge=1)


FACTS = CloudFacts(
    name="toy",
    provider="toycloud.provider",
    location="region",
    location_example="toy-east",
    scheduler_item="toy-cron",
    boot_s=5.0,
    options=ToyOptions,
    disk_item="toy-disk",
    disk_gb_option="disk_gb",
)

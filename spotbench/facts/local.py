"""The `local` cloud's facts: every member is a process on this machine."""

from __future__ import annotations

from spotbench.facts.base import CloudFacts

FACTS = CloudFacts(
    name="local",
    provider="spotbench.clouds.local.provider",
    default_machine_type="local",
    default_zone="local",
    default_concurrency=1,  # trials must not share the machine's cores
    shares_host=True,
    boot_s=0.0,
    scheduler_item="in-process-cron",
    gpu_priced_separately=False,
    spot_label=False,
    any_price_region=True,
)

"""The clouds spotbench knows, by the name a spec gives (`cloud:`): the one registry.

    facts_of("gcp").location        # "zone": what a gcp spec must give

Each entry names the module holding the cloud's `FACTS` (a `CloudFacts`: plain data, read
by spec, plan, member, costs); those facts name the module of its operations (`provider`,
`spotbench.clouds.get_provider`). Adding a cloud = its folder (facts + provider) and one
line here. This is the only place that lists cloud names.
"""

from __future__ import annotations

import importlib

from spotbench.facts.base import CloudFacts

__all__ = ["CLOUDS", "CloudFacts", "UnknownCloud", "cloud_names", "facts_of", "known_facts"]

# cloud name → the module holding its `FACTS` (imported on first use)
CLOUDS: dict[str, str] = {
    "local": "spotbench.facts.local",
    "gcp": "spotbench.facts.gcp",
    "aws": "spotbench.facts.aws",
}


class UnknownCloud(ValueError):
    pass


def known_facts(name: str) -> CloudFacts | None:
    """The facts of cloud `name`, None when spotbench knows no such cloud (a reader of
    records, whose `cloud` is the writer's word)."""
    return facts_of(name) if name in CLOUDS else None


def cloud_names() -> tuple[str, ...]:
    return tuple(CLOUDS)


def facts_of(name: str) -> CloudFacts:
    """The facts of cloud `name`; a clear error naming the known clouds otherwise."""
    module = CLOUDS.get(name)
    if module is None:
        raise UnknownCloud(f"unknown cloud {name!r}; choose {', '.join(CLOUDS)}")
    facts = importlib.import_module(module).FACTS
    if not isinstance(facts, CloudFacts):
        raise TypeError(f"{module}.FACTS is not a CloudFacts")
    return facts

"""What a cloud means to spotbench: one `Provider` object per cloud, found by its name.

A provider bundles everything that differs between clouds — the Cloud driver configured
from the environment, how a function verifies its caller, the schedule control, the orphan
finder for teardown, the Pulumi stack's preview config, how a member calls `done`, and the
few facts estimates and plans need (boot time, disk, scheduler price item, default machine).
Everything else in spotbench asks the provider instead of comparing cloud names:

    provider = get_provider(spec.cloud)
    cloud = provider.cloud(spec)                  # the driver, configured as the functions do
    control = provider.schedule(spec, root=root)  # pause / resume / run-now

`get_provider` is the only place that looks at a cloud's name. Each provider lives in the
cloud's own module (`spotbench/clouds/{local,gcp,aws}.py`), which imports no cloud SDK at
module level: `import spotbench` and a price estimate of a GCP sweep need neither boto3 nor
google-cloud; the SDK loads when a driver, scheduler or orphan finder is built.
Adding a cloud = one provider module + one line in `PROVIDERS`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # only for annotations: providers import what they need lazily
    import requests

    from spotbench.auth import Caller
    from spotbench.catalog import CloudCatalog
    from spotbench.clouds.base import Cloud, Sweeper
    from spotbench.member import MemberContext
    from spotbench.ops.schedule import ScheduleControl
    from spotbench.preflight import Problem
    from spotbench.spec import SweepSpec

# cloud name → the module holding its `PROVIDER` (imported on first use)
PROVIDERS: dict[str, str] = {
    "local": "spotbench.clouds.local",
    "gcp": "spotbench.clouds.gcp",
    "aws": "spotbench.clouds.aws",
}


class UnknownCloud(ValueError):
    pass


class SettingMissing(ValueError):
    """A setting a provider needs is neither in the spec nor in the environment."""


def get_provider(name: str) -> Provider:
    """The provider of cloud `name`; a clear error naming the known clouds otherwise."""
    module = PROVIDERS.get(name)
    if module is None:
        raise UnknownCloud(f"unknown cloud {name!r}; choose {', '.join(PROVIDERS)}")
    return importlib.import_module(module).PROVIDER


def env_of(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


class FunctionSettings(Protocol):
    """What a function knows about its sweep (`functions/app.FunctionConfig`)."""

    env: Mapping[str, str]

    @property
    def spec(self) -> SweepSpec: ...

    @property
    def state_dir(self) -> Path: ...

    @property
    def secret(self) -> str: ...

    def need(self, key: str) -> str:
        """The environment variable's value; raises when it is not set."""
        ...


class Provider:
    """The base every cloud's provider extends; the defaults fit a real cloud."""

    name: str = ""
    # the location field a spec on this cloud must give ("zone" | "region"), with an example
    location: str | None = None
    location_example: str = ""
    default_machine_type: str | None = None  # None: the spec's matrix must name one
    default_zone: str | None = None  # the zone records carry when the spec names none
    default_concurrency: int | None = None  # groups at once unless the spec says (None: all)
    shares_host: bool = False  # a group's members run on this one machine (the local cloud)
    stack_component: str | None = None  # "module:Class" infra/__main__.py declares

    @property
    def deployed_by_stack(self) -> bool:
        """`pulumi up` of infra/ creates this cloud's resources (else `spotbench run`)."""
        return self.stack_component is not None

    boot_s: float = 60.0  # start → workload running (assumed in estimates)
    scheduler_item: str = ""  # the price catalog item of one scheduler job
    gpu_priced_separately: bool = True  # GPUs are price rows of their own (unless bundled)
    spot_label: bool = True  # the report marks spot runs ("spot" in a config's label)
    # zones, machine types, GPUs and placement rules spec validation checks (None: anything goes)
    catalog: CloudCatalog | None = None
    # monthly free tier per estimate line item (quantity in the line's unit), deducted by
    # `estimate --assume free_tier=on`
    free_tier: dict[str, float] = {}

    # ---- places and prices -----------------------------------------------------------
    def region_of_zone(self, zone: str) -> str:
        """The region a zone belongs to (us-central1-a → us-central1, us-east-1a → us-east-1)."""
        return zone

    def price_region(self, zone: str | None, region: str | None = None) -> str | None:
        """The region prices are looked up in: the given region, else the zone's."""
        if region:
            return region
        return self.region_of_zone(zone) if zone else None

    def disk(self, spec: SweepSpec) -> tuple[str, float]:
        """(price item, GB) of one member's boot disk."""
        return "local", 0.0

    # ---- operating a deployed sweep --------------------------------------------------
    def results_url(self, spec: SweepSpec, env: Mapping[str, str] | None = None) -> str:
        """Where a deployed sweep's results are: the spec's `results`, else where the stack
        puts them (raises SettingMissing, naming what to pass, when only the stack knows)."""
        return spec.results_url()

    def driver(self, **options: Any) -> Cloud:
        """The Cloud driver built from explicit options (see the driver's constructor)."""
        raise NotImplementedError(f"cloud {self.name!r} has no driver")

    def cloud(self, spec: SweepSpec, env: Mapping[str, str] | None = None, *,
              root: Path | str | None = None, state_dir: Path | None = None) -> Cloud:
        """The sweep's Cloud driver, configured from the spec and the environment (the same
        way for the CLI and the functions). Local sweeps: their state folder `state_dir`, or
        `<root>/<sweep>` (root: `SPOTBENCH_STATE_ROOT`, default `.spotbench`)."""
        raise NotImplementedError(f"cloud {self.name!r} has no driver")

    def authenticate(self, headers: Mapping[str, str], settings: FunctionSettings) -> Caller:
        """Who is calling a function over HTTP (raises Unauthorized / Forbidden)."""
        raise SettingMissing(f"on {self.name}, callers are authenticated by the function's adapter")

    def record_writer(self, ctx: MemberContext) -> Any:
        """How a member writes its group's objects when its identity may not write them
        itself (`ResultStore(writer=…)`); None: it writes directly."""
        return None

    def grants(self, spec: SweepSpec, env: Mapping[str, str]) -> Any:
        """What the `grant` function mints a group's storage grants and files with (issue #29)."""
        raise SettingMissing(f"cloud {self.name!r} has no grant function")

    def schedule(self, spec: SweepSpec, root: Path | str | None = None, **options: Any) -> ScheduleControl:
        """Pause / resume / run-now of the sweep's start/stop pair."""
        raise NotImplementedError(f"cloud {self.name!r} has no schedule control")

    def orphans(self, spec: SweepSpec | None = None, *, root: Path | str | None = None,
                regions: list[str] | None = None, project: str | None = None) -> Sweeper:
        """The orphan finder teardown uses (every spotbench-labelled object of the cloud)."""
        raise NotImplementedError(f"cloud {self.name!r} has no orphan finder")

    # what its operator commands need on this machine (spotbench/cli/extras.py says how)
    setup_extras: str = ""  # `make setup CLOUD=<name>` installs '.[<setup_extras>]'
    needs_modules: dict[str, tuple[str, ...]] = {}  # extra → modules its commands import
    tools: tuple[tuple[str, str, str], ...] = ()  # (command, the step that runs it, install URL)
    double_env: str | None = None  # env var aiming commands at a local double (no deploy tools then)

    def credentials_problem(self, env: Mapping[str, str] | None = None) -> str | None:
        """Why this machine cannot call the cloud (no credentials), in one line with the fix;
        None when it can, or when the cloud needs none (local)."""
        return None

    def preflight(self, spec: SweepSpec, env: Mapping[str, str] | None = None) -> list[Problem]:
        """What the cloud says is missing before `pulumi up` (spotbench/preflight.py):
        credentials, APIs, machine types, quota. Nothing to check by default."""
        return []

    def stack_config(self, spec: SweepSpec, project: str | None = None,
                     region: str | None = None) -> dict[str, str]:
        """Pulumi config (beyond `spotbench:spec`) the offline preview sets for this cloud."""
        return {}

    def access_options(self, spec: SweepSpec, via: str) -> dict[str, Any]:
        """Cloud settings `spotbench ssh|exec|collect` pass to `AccessConfig`."""
        return {}

    # ---- the member's side -----------------------------------------------------------
    def post_done(self, ctx: MemberContext, body: dict, timeout: float) -> requests.Response:
        """POST `body` to the member's done URL, proving who the member is."""
        import requests

        headers = {"Authorization": f"Bearer {ctx.token}"} if ctx.token else {}
        return requests.post(ctx.done_url, json=body, headers=headers, timeout=timeout)

    def __repr__(self) -> str:
        return f"<{self.name} provider>"

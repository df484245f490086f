"""What a cloud does for spotbench: one `Provider` object per cloud, found by its name.

A cloud is two things. Its *facts* (`spotbench.facts`: locations, defaults, local-or-not,
catalog, price items) are plain data at the bottom, read by spec, plan, member and costs.
Its *operations*, here, take a spec and act: the Cloud driver configured from the
environment, how a function verifies its caller, the schedule control, the orphan finder
for teardown, preflight, the Pulumi stack's preview config, how a member calls `done`.
Everything else in spotbench asks the provider instead of comparing cloud names:

    provider = get_provider(spec.cloud)
    cloud = provider.cloud(spec)                  # the driver, configured as the functions do
    control = provider.schedule(spec, root=root)  # pause / resume / run-now

A provider carries its cloud's facts (`provider.facts.boot_s`) and forwards only its region rule
(`region_of_zone`, `price_region`); every operation is a declared method.
`get_provider` finds the provider through the facts registry (`spotbench.facts.CLOUDS`, the
only list of cloud names). Provider modules import no cloud SDK at module level: `import
spotbench` and a price estimate of a GCP sweep need neither boto3 nor google-cloud; the SDK
loads when a driver, scheduler or orphan finder is built. Adding a cloud = its facts, its
provider module, and one line in `spotbench.facts.CLOUDS`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from spotbench.facts import CLOUDS, CloudFacts, UnknownCloud, facts_of
from spotbench.interfaces import Problem, ScheduleControl

if TYPE_CHECKING:  # only for annotations: providers import what they need lazily
    import requests

    from spotbench.auth import Caller
    from spotbench.clouds.base import Cloud, Sweeper
    from spotbench.lease import ConditionalObjects
    from spotbench.member import MemberContext
    from spotbench.results import ResultStore
    from spotbench.spec import SweepSpec

# cloud name → the module of its facts (the registry, `spotbench.facts.CLOUDS`)
PROVIDERS = CLOUDS

__all__ = ["PROVIDERS", "FunctionSettings", "GroupStorage", "Provider", "ProxyTarget",
           "SettingMissing", "SshProxy", "UnknownCloud", "env_of", "get_provider", "state_root"]


class ProxyTarget(Protocol):
    """The member an ssh ProxyCommand reaches (`spotbench.ops.remote.Target`)."""

    @property
    def host(self) -> str: ...  # the instance's name / id (a proxy reaches it by name)

    @property
    def port(self) -> int: ...

    @property
    def zone(self) -> str | None: ...  # where the cloud says the instance is, if known


# a cloud's ssh ProxyCommand for one member (`Provider.ssh_proxy`), as one shell line
SshProxy = Callable[[ProxyTarget], str]


def state_root(root: Path | str | None = None) -> Path:
    """The operator's state folder, every cloud's (a local sweep's state, the host keys a
    stack recorded: `<root>/<sweep>/known_hosts`): `root`, else `SPOTBENCH_STATE_ROOT`, else
    `.spotbench`."""
    return Path(root or os.environ.get("SPOTBENCH_STATE_ROOT", ".spotbench")).resolve()


@dataclass(frozen=True)
class GroupStorage:
    """How a member writes its group's objects (issue #29): one object per member, the same
    on every cloud (`Provider.group_storage`).

    - `store_options` / `writer`: its results store (`ResultStore(url, writer=…, **…)`);
      `writer(path, data)` writes records where the member's identity may only read (GCP:
      the POST policy its group's grant holds);
    - `checkpoint_options`: fsspec options of its checkpoints (GCP: the grant's downscoped
      token; AWS: the grant's STS session, the same as `store_options`).

    Credentials inside renew themselves before they end (each asks the sweep's `grant`
    again): a group that runs past one grant's lifetime keeps writing. Default: the
    member's own identity, nothing to add."""

    store_options: dict[str, Any] = field(default_factory=dict)
    writer: Callable[[str, bytes], None] | None = None
    checkpoint_options: dict[str, Any] = field(default_factory=dict)

    def store(self, url: str) -> ResultStore:
        """The results store at `url` as this member's group writes it."""
        from spotbench.results import ResultStore

        return ResultStore(url, writer=self.writer, **self.store_options)


class SettingMissing(ValueError):
    """A setting a provider needs is neither in the spec nor in the environment."""


def get_provider(name: str) -> Provider:
    """The provider of cloud `name`; a clear error naming the known clouds otherwise."""
    provider = importlib.import_module(facts_of(name).provider).PROVIDER
    if not isinstance(provider, Provider):
        raise TypeError(f"{facts_of(name).provider}.PROVIDER is not a Provider")
    return provider


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

    def __init__(self, facts: CloudFacts):
        self.facts = facts

    # what the cloud *is* stays in `self.facts` (`provider.facts.boot_s`); the provider
    # declares every operation it answers, and forwards only the region rule its own
    # operations and callers ask with a provider in hand
    def region_of_zone(self, zone: str) -> str:
        """The region a zone is in (`CloudFacts.region_of_zone`: us-central1-a → us-central1)."""
        return self.facts.region_of_zone(zone)

    def price_region(self, region: str | None, zone: str | None = None) -> str | None:
        """The region prices are looked up in (`CloudFacts.price_region`)."""
        return self.facts.price_region(region, zone)

    @property
    def name(self) -> str:
        return self.facts.name

    # `spotbench prices`: the module refreshing this cloud's price table from its own APIs
    # (`fetch(regions, items, progress) -> spotbench.prices.table.Table`; None: none), and
    # the modules it imports beyond the cloud's SDK extra
    prices_module: str | None = None
    prices_needs: tuple[str, ...] = ()
    # ... and the module listing its machine types from its own APIs (`fetch(regions, *,
    # project, progress) -> spotbench.catalog.live.LiveCatalog`, `CatalogFetchError`)
    catalog_module: str | None = None

    def disk(self, spec: SweepSpec) -> tuple[str, float]:
        """(price item, GB) of one member's boot disk."""
        option = self.facts.disk_gb_option
        if option is None:
            return self.facts.disk_item, 0.0
        return self.facts.disk_item, float(getattr(getattr(spec, self.name), option))

    # ---- operating a deployed sweep --------------------------------------------------
    def results_url(self, spec: SweepSpec, env: Mapping[str, str] | None = None) -> str:
        """Where a deployed sweep's results are: the spec's `results`, else where the stack
        puts them (raises SettingMissing, naming what to pass, when only the stack knows)."""
        url: str = spec.results_url()
        return url

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

    def function_account(self, settings: FunctionSettings, context: Any = None) -> str:
        """The project / account the sweep's instances live in, as a function knows it (the
        instance rule's `account`: `spotbench.auth.instance.Roster`); `context`: what the
        platform hands the invocation (AWS: the Lambda context, whose ARN names it). "":
        the cloud has none (local)."""
        return ""

    def authenticate_event(self, event: Mapping[str, Any], settings: FunctionSettings,
                           account: str | None = None) -> Caller:
        """Who sent a function an event its platform already authenticated (AWS: a function
        URL's IAM authorizer, a direct invocation by the scheduler); `account`: the
        function's (`function_account`). Raises Unauthorized / Forbidden."""
        raise SettingMissing(f"on {self.name}, functions are called over HTTP (`authenticate`)")

    def grants(self, spec: SweepSpec, env: Mapping[str, str]) -> Any:
        """What the `grant` function mints a group's storage grants and files with (issue #29)."""
        raise SettingMissing(f"cloud {self.name!r} has no grant function")

    def lease_objects(self, fs: Any) -> ConditionalObjects | None:
        """The conditional requests the control lease (spotbench.lease) is written with on
        this cloud's object store, through the results store's filesystem `fs`; None: no
        object store (the local cloud's folder takes a file lock). Hand it to the store:
        `ResultStore(url, lease_objects=provider.lease_objects)`."""
        return None

    def schedule(self, spec: SweepSpec, root: Path | str | None = None, **options: Any) -> ScheduleControl:
        """Pause / resume / run-now of the sweep's start/stop pair."""
        raise NotImplementedError(f"cloud {self.name!r} has no schedule control")

    def orphans(self, spec: SweepSpec | None = None, *, root: Path | str | None = None,
                regions: list[str] | None = None, project: str | None = None) -> Sweeper:
        """The orphan finder teardown uses (every spotbench-labelled object of the cloud)."""
        raise NotImplementedError(f"cloud {self.name!r} has no orphan finder")

    def run_state_removed(self, spec: SweepSpec, root: Path | str | None = None,
                          logs_to: Path | None = None) -> Path | None:
        """After a `schedule: once` run's teardown (spotbench/ops/once.py): the sweep's
        state on this machine removed, its members' logs moved to `logs_to` first; where
        they went, or None. Clouds keep no such state (the stack is gone)."""
        return None

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

    # `spotbench ssh|exec|collect --via`: the ways this cloud adds beyond `direct` and `jump`
    ssh_vias: tuple[str, ...] = ()

    def ssh_proxy(self, spec: SweepSpec, via: str) -> SshProxy | None:
        """The ProxyCommand reaching a member `via` one of `ssh_vias` (GCP: an IAP tunnel,
        AWS: a Session Manager session); None for any other way."""
        return None

    def access_options(self, spec: SweepSpec, via: str) -> dict[str, Any]:
        """Cloud settings `spotbench ssh|exec|collect` pass to `AccessConfig`: the proxy."""
        proxy = self.ssh_proxy(spec, via)
        return {"proxy": proxy} if proxy is not None else {}

    # ---- `spotbench preview`: what the cloud's declared resources show ---------------
    # the Pulumi package of the type tokens its stack declares (`gcp:compute/…`): how the
    # preview finds the provider of a resource (`spotbench.preview.provider_of`)
    pulumi_package: str | None = None

    def preview_properties(self, type_token: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The cloud's own properties of a declared resource, beside the neutral ones."""
        return {}

    def preview_rules(self, type_token: str, inputs: Mapping[str, Any]) -> list[dict[str, Any]]:
        """A firewall's / security-group rule's effect, one dict per (action, protocol):
        `{action, direction, protocol, ports, sources, targets}`; [] for anything else."""
        return []

    def preview_user_data(self, type_token: str, inputs: Mapping[str, Any]) -> str | None:
        """A VM's boot document where the cloud encodes it its own way (decoded; "" when it
        does not decode); None: read the neutral `metadata["user-data"]` / `userData`."""
        return None

    # ---- the member's side -----------------------------------------------------------
    def post_done(self, ctx: MemberContext, body: dict[str, Any], timeout: float) -> requests.Response:
        """POST `body` to the member's done URL, proving who the member is."""
        import requests

        if ctx.done_url is None:
            raise ValueError(f"member {ctx.name} has no done URL (SPOTBENCH_CONTEXT.done_url)")
        headers = {"Authorization": f"Bearer {ctx.token}"} if ctx.token else {}
        return requests.post(ctx.done_url, json=body, headers=headers, timeout=timeout)

    def group_storage(self, ctx: MemberContext) -> GroupStorage:
        """How a member writes its group's records and checkpoints (`GroupStorage`): on
        clouds that grant per group, what the sweep's `grant` mints for it (asked once,
        renewed before it ends). Default: the member's own identity."""
        return GroupStorage()

    def __repr__(self) -> str:
        return f"<{self.name} provider>"

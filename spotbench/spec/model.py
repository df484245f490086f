"""`SweepSpec` and its sections (pydantic), and `load_spec`, which turns YAML (or a dict,
e.g. from Pulumi stack config) into one. Problems are reported all at once, one line each,
naming the file, the field path, the bad value and what is allowed (`SpecError`).
`SweepSpec.plan()` expands the matrix × trials into run groups (`spotbench.plan`).
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, Union, cast

import yaml
from pydantic import (
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from spotbench.spec.errors import _MISSING as _NO_VALUE
from spotbench.spec.errors import SpecError, problems_from_validation
from spotbench.facts import CLOUDS, facts_of
from spotbench.image_ref import check_image
from spotbench.labels import NAME_SEPARATOR
from spotbench.plan import MACHINE_KEYS as MATRIX_MACHINE_KEYS, RunGroup
from spotbench.search import SearchSpec, check_search, search_design
from spotbench.plan import plan as plan_groups
from spotbench.spec import checks, reading
from spotbench.spec.zones import candidate_regions, candidate_zones, check_zones
from spotbench.spec.fields import (SCHEDULE_HELP, Schedule, ScheduleField, ScheduleViews,
                                   once_lifecycle, parse_duration)
from spotbench.spec.scaling import Scaling, Work, check_scaling
from spotbench.spec.roles import Provisioning, check_roles
from spotbench.workload import Params
from spotbench.workload_registry import get_workload, registry

__all__ = ["SpecError", "SweepSpec", "Params", "Schedule", "load_spec", "spec_warnings",
           "parse_duration", "MATRIX_MACHINE_KEYS", "Scaling", "Work"]

NAME_PATTERN = r"^[a-z]([a-z0-9-]{0,22}[a-z0-9])?$"
PLACEMENTS = ("spread", "compact", "none")


_Strict = Params  # spec sections, like workload configs: unknown keys are errors


# The config model of every registered workload, told apart by `name`.
WorkloadParams = Annotated[
    Union[tuple(w.params for w in registry().values())],  # noqa: UP007 - built at import
    Field(discriminator="name"),
]


# The clouds a spec may name (the registry's), as a Literal: the schema's error lists them.
CloudName = Literal[tuple(CLOUDS)]  # type: ignore[valid-type]  # built at import


def _cloud_sections() -> dict[str, Any]:
    """Each cloud's own section (`gcp:`, `aws:`), its facts' `options` model, defaulted."""
    sections: dict[str, Any] = {}
    for name in CLOUDS:
        options = facts_of(name).options
        if options is not None:
            sections[name] = (options, Field(default_factory=options))
    return sections


class _SpecCore(ScheduleViews, _Strict):
    name: str = Field(pattern=NAME_PATTERN,
                      description="lowercase, digits and single '-', ≤ 24")
    cloud: CloudName = "local"
    region: str | None = None
    zone: str | None = None
    zones: list[str] | Literal["any"] | None = Field(
        None, description="candidate zones for a group's VMs, first choice first: zones or regions "
        "(a region: every zone of it), or `any` (every zone of `region`); several candidates "
        "need `lifecycle: created`")
    lifecycle: Literal["stopped", "created"] = Field(
        "stopped", description="stopped: Pulumi creates the VMs stopped in one zone and the "
        "start function starts them; created: Pulumi declares templates and the start function "
        "creates the VMs where there is capacity (among `zones`) and deletes them at the end")
    workload: WorkloadParams
    matrix: dict[str, list[Any]] = Field(default_factory=dict)
    search: SearchSpec | None = Field(None, description="a search of a space (#35): one group a trial")
    trials: int = Field(1, ge=1, le=100)
    provisioning: Provisioning = "spot"
    role_provisioning: dict[str, Provisioning] = Field(default_factory=dict, description=(
        "provisioning per role over `provisioning`, e.g. {chief: standard, ps: standard}"))
    placement: Literal["spread", "compact", "none"] = "none"
    schedule: ScheduleField | None = Field(None, description=SCHEDULE_HELP)
    deadline: timedelta = Field(timedelta(hours=1), description="max run time of one group")
    budget: float | None = Field(None, gt=0, description="USD cap for the whole sweep")
    results: str | None = Field(None, description="results URL (file://, gs://, s3://)")
    concurrency: int | None = Field(None, ge=1, description="groups running at once")
    role_machine_types: dict[str, str] = Field(
        default_factory=dict,
        description="machine type per member role, e.g. {chief: n1-standard-2, ps: n1-standard-1}",
    )
    image: str | None = Field(None, description="workload container image (gcp/aws)")
    scaling: Scaling | None = Field(None, description="the axis and base of speedup and efficiency")
    work: Work | None = Field(None, description="the work cost-vs-time prices (default 10,000 steps)")

    @model_validator(mode="before")
    @classmethod
    def _spot_shorthand(cls, data: Any) -> Any:
        data = once_lifecycle(data)  # `schedule: once` (spec_fields)
        if isinstance(data, dict) and "spot" in data:
            if "provisioning" in data:
                raise ValueError("give either 'spot' or 'provisioning', not both")
            data = dict(data)
            spot = data.pop("spot")
            if not isinstance(spot, bool):
                raise ValueError(f"spot: expected true or false, got {spot!r}")
            data["provisioning"] = "spot" if spot else "standard"
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if NAME_SEPARATOR in v:
            raise ValueError(
                f"{NAME_SEPARATOR!r} is reserved: it ends the sweep name in its VM "
                f"names ({v.split(NAME_SEPARATOR)[0]}{NAME_SEPARATOR}…), which is how permissions "
                "tell one sweep's VMs from another's; use single hyphens, e.g. "
                f"{'-'.join(p for p in v.split('-') if p)!r}"
            )
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        return None if v is None else check_image(v)  # it reaches a root unit on every VM

    @field_validator("deadline", mode="before")
    @classmethod
    def _deadline(cls, v: Any) -> timedelta:
        d = parse_duration(v)
        if d < timedelta(seconds=10):
            raise ValueError("must be at least 10s")
        return d

    @field_validator("matrix", mode="before")
    @classmethod
    def _matrix_given(cls, v: Any) -> Any:
        if v is None:
            raise ValueError("matrix is empty: give keys with lists of values, e.g. "
                             "`matrix: {machine_type: [n1-standard-2]}`, or leave it out")
        return v

    @field_validator("matrix")
    @classmethod
    def _matrix_lists(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in v.items():
            if not values:
                raise ValueError(f"matrix.{key} is empty: give at least one value")
            if len(set(map(repr, values))) != len(values):
                raise ValueError(f"matrix.{key} repeats a value: {values}")
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> _SpecCore:
        allowed = set(MATRIX_MACHINE_KEYS) | get_workload(self.workload.name).parameter_names(self.workload)
        for key in self.matrix:
            if key not in allowed:
                raise ValueError(
                    f"matrix.{key} is not a matrix key; allowed: {', '.join(sorted(allowed))}"
                )
        check_search(self.search, get_workload(self.workload.name), allowed, self.matrix, self.trials,
                     facts_of(self.cloud).deployed_by_stack)
        roles = {role for role, _ in get_workload(self.workload.name).roles(self.workload)}
        check_roles(self.workload.name, roles, {"role_machine_types": self.role_machine_types,
                                                 "role_provisioning": self.role_provisioning})
        facts = facts_of(self.cloud)
        check_zones(self.cloud, self.zone, self.zones, self.region, self.lifecycle)
        located = getattr(self, facts.location) if facts.location else True
        if facts.location == "zone" and self.zones is not None:
            located = True  # the candidates name the zones
        if not located:
            raise ValueError(
                f"cloud '{self.cloud}' needs '{facts.location}' (e.g. {facts.location_example})"
            )
        if (facts.deployed_by_stack and self.image is None
                and get_workload(self.workload.name).user_image is not None):
            raise ValueError(
                f"image: the '{self.workload.name}' workload runs your own image on "
                f"{self.cloud}; set `image:` (any image, e.g. docker.io/library/python:3.12-slim)"
            )
        for value in self.matrix.get("placement", []):
            if value not in PLACEMENTS:
                raise ValueError(
                    f"matrix.placement value {value!r}: choose from {', '.join(PLACEMENTS)}"
                )
        check_scaling(self.scaling, self.matrix)
        for point in self.points() or (self.search.extremes() if self.search else []):
            try:
                self.params_for(point)
            except ValidationError as exc:
                err = exc.errors()[0]
                key = ".".join(map(str, err["loc"]))
                raise ValueError(
                    f"{'search.space' if self.search else 'matrix'}.{key} value {err.get('input')!r}: {err['msg']}"
                ) from None
        return self

    # ---- derived values -------------------------------------------------------------
    @property
    def candidate_zones(self) -> list[str]:
        """The zones a group may run in, first choice first (`zones.candidate_zones`)."""
        return candidate_zones(self.cloud, self.zone, self.zones, self.region)

    @property
    def candidate_regions(self) -> list[str]:
        """The regions of the candidate zones, first choice first (`zones`): the home
        region (`CloudFacts.sweep_region`) holds the sweep; each region here holds VMs."""
        return candidate_regions(self.cloud, self.candidate_zones)

    @property
    def first_zone(self) -> str | None:
        """"The" zone where one is needed (the stopped lifecycle's VMs, IAP, the region):
        `zone`, else the first candidate; None when the spec names no zone."""
        return self.zone or next(iter(self.candidate_zones), None)

    @property
    def spot(self) -> bool:  # the default's (`provisioning`); a member's: `Member.spot`
        return self.provisioning != "standard"

    def provisioning_of(self, role: str) -> str:
        """A role's provisioning: its `role_provisioning` entry, else `provisioning`."""
        return self.role_provisioning.get(role, self.provisioning)

    @property
    def max_concurrency(self) -> int | None:
        """Groups that may run at once: the spec's value (or a search's `parallel`); on `local` one."""
        if self.concurrency is not None or self.search is not None:
            return min(x for x in (self.concurrency, self.search and self.search.parallel) if x)
        return facts_of(self.cloud).default_concurrency

    def results_url(self, base_dir: Path | None = None) -> str:
        """Where results go. Local default: ./results/<name> as an absolute file:// URL."""
        url = self.results or f"results/{self.name}"
        if "://" in url:
            return url.rstrip("/")
        path = Path(url)
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
        return "file://" + str(path.resolve())

    def points(self) -> list[dict[str, Any]]:
        """Every combination of the matrix values, in a stable order (a search's design)."""
        if self.search is not None:
            return search_design(self.search)
        points: list[dict[str, Any]] = [{}]
        for key in sorted(self.matrix):
            points = [{**p, key: value} for p in points for value in self.matrix[key]]
        return points

    def params_for(self, point: dict[str, Any]) -> Params:
        return get_workload(self.workload.name).config_for(self.workload, point, MATRIX_MACHINE_KEYS)

    def plan(self) -> list[RunGroup]:
        return plan_groups(self)

    def keeps_checkpoints(self) -> bool:
        """Whether any run group's members keep checkpoints in the results store
        (`Workload.checkpoints`): their cloud identities then replace and delete them."""
        return any(get_workload(g.workload).checkpoints(g.params) for g in self.plan())


# the cloud sections come between `image` and `labels`, as they always did in the schema
_WithClouds = cast(type[_SpecCore], create_model(
    "_WithClouds", __base__=_SpecCore, __module__=__name__, **_cloud_sections()))


class SweepSpec(_WithClouds):  # type: ignore[misc, valid-type]
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="labels (GCP) / tags (AWS) put on the sweep's VMs, e.g. {team: ml}",
    )
    policy: dict[str, Any] | None = Field(
        None, description="guardrails (see spotbench/policy.py); merged with spotbench-policy.yaml"
    )

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", key) or not re.fullmatch(r"[a-z0-9_-]{0,63}", value):
                raise ValueError(
                    f"label {key}={value!r}: keys start with a lowercase letter; keys and values "
                    "use lowercase letters, digits, '-' and '_' (at most 63 characters)"
                )
            if key == "managed-by" or key.startswith("spotbench-"):
                raise ValueError(f"label {key!r} is spotbench's own; choose another key")
        return v


STACK_SPEC_KEY = "spotbench:spec"


def load_spec(source: str | Path | dict[str, Any], *, origin: str | None = None) -> SweepSpec:
    """Load and validate a spec from a YAML file (a `str` or `Path` naming it) or a parsed dict.

    A `str` is always a path, never YAML text: parse text yourself (`spotbench.reading.load`)
    and pass the dict.

    A Pulumi stack file (`Pulumi.<stack>.yaml`) is followed to the spec its
    `config: spotbench:spec` names (a path relative to the stack file, or the spec inline).
    Beyond the schema, a gcp/aws spec is checked against what the cloud accepts
    (`spotbench.spec.checks`). Raises `SpecError` listing every problem (file, field path,
    value, what is allowed).
    """
    return _load(source, origin=origin, followed=())


def _load(source: str | Path | dict[str, Any], *, origin: str | None,
          followed: tuple[Path, ...]) -> SweepSpec:
    base_dir: Path | None = None
    if isinstance(source, dict):
        data, where = source, origin or "<spec>"
    else:
        path = Path(source)
        where = origin or str(source)
        try:
            text = reading.read_text(path)
        except FileNotFoundError:
            raise SpecError(where, [("", _NO_VALUE, "file not found (give a sweep spec's path, "
                                                    "e.g. examples/osu-local.yaml)")]) from None
        except IsADirectoryError:
            raise SpecError(where, [("", _NO_VALUE, "is a directory, not a spec file")]) from None
        except OSError as exc:
            raise SpecError(where, [("", _NO_VALUE, f"cannot read: {exc.strerror}")]) from None
        except reading.SpecYamlError as exc:
            raise SpecError(where, [("", _NO_VALUE, str(exc))]) from None
        try:
            data = reading.load(text)
        except reading.SpecYamlError as exc:
            raise SpecError(where, [("", _NO_VALUE, str(exc))]) from None
        except yaml.YAMLError as exc:
            first = " ".join(str(exc).split())
            raise SpecError(where, [("", _NO_VALUE, f"not valid YAML: {first}")]) from None
        base_dir = path.resolve().parent
        followed = (*followed, path.resolve())
    if data is None:
        raise SpecError(where, [("", _NO_VALUE, "the spec is empty: give at least `name` and "
                                 "`workload` (see examples/osu-local.yaml)")])
    if not isinstance(data, dict):
        raise SpecError(where, [("", data, "the spec must be a mapping of fields")])
    if _is_stack_file(data):
        return _follow_stack(data, where, base_dir or Path.cwd(), followed)
    try:
        spec = SweepSpec.model_validate(data, context={"base_dir": base_dir or Path.cwd()})
    except ValidationError as exc:
        raise SpecError(where, problems_from_validation(exc, data, SweepSpec)) from None
    errors = checks.check(spec).errors
    if errors:
        raise SpecError(where, errors)
    return spec


def spec_warnings(spec: SweepSpec) -> list[tuple[str, Any, str]]:
    """Names the shipped catalogs do not list but the cloud may know (newer than spotbench)."""
    return checks.check(spec).warnings


def _is_stack_file(data: dict[str, Any]) -> bool:
    return isinstance(data.get("config"), dict) and not ({"name", "workload"} & set(data))


def _follow_stack(data: dict[str, Any], where: str, base_dir: Path,
                  followed: tuple[Path, ...]) -> SweepSpec:
    from spotbench.spec.reading import unwrap, with_stack_project
    config = data["config"]
    raw = unwrap(config.get(STACK_SPEC_KEY))  # `pulumi config set --path` form: {value: …}
    if raw is None:
        raise SpecError(where, [(f"config.{STACK_SPEC_KEY}", _NO_VALUE,
                                 "a Pulumi stack file without the spec: `pulumi config set "
                                 "spotbench:spec examples/gcp-osu.yaml`")])
    if isinstance(raw, dict) and "secure" in raw:
        raise SpecError(where, [(f"config.{STACK_SPEC_KEY}", _NO_VALUE,
                                 "is a secret; spotbench reads a plain path or object")])
    if isinstance(raw, dict):  # the spec inline; the stack's project fills the spec's (#39)
        return with_stack_project(_load(raw, origin=f"{where}: config.{STACK_SPEC_KEY}", followed=followed), config)
    if not isinstance(raw, str):
        raise SpecError(where, [(f"config.{STACK_SPEC_KEY}", raw, "give a path or the spec object")])
    target = Path(raw)
    target = target if target.is_absolute() else base_dir / target  # Pulumi's project dir
    if target.resolve() in followed:
        raise SpecError(where, [(f"config.{STACK_SPEC_KEY}", raw, "points back at a stack file "
                                 "already followed")])
    return with_stack_project(_load(target, origin=f"{raw} (from {where})", followed=followed), config)


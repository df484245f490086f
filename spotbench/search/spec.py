"""The `search:` section of a sweep spec: a space of parameters, how to sample it, what
to optimise (issue #35).

    search:
      space:
        filters: {int: [16, 256]}
        kernel_size: {int: [1, 10]}
        learning_rate: {loguniform: [1.0e-4, 1.0e-1]}
        optimizer: {choice: [adam, sgd]}
        epochs: 3                       # a fixed value
      method: random                    # random | sobol | halton | lhs | grid | csv | adaptive
      sampler: tpe                      # adaptive only: tpe | gp | cmaes | nsga2
      points: design.csv                # csv only: one row a trial (read at load time)
      n: 60
      seed: 7
      parallel: 2                       # trials in flight
      repeats: 1                        # groups per trial (same parameters)
      objective: {metric: val_accuracy, direction: maximize}   # or a list of them; `cost`
      pruner: median                    # median | successive_halving | hyperband

A search trial is a planned group: its records carry the trial's parameters in `params`
(like a matrix point's) and the trial's number in `trial`. Every parameter reaches the
workload by name (`${name}` in a container's command and env, else a field of the
workload's config model, validated by it).
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

__all__ = ["COST", "Choice", "Distribution", "IntRange", "LogUniform", "METHODS", "Objective",
           "SAMPLERS", "PRUNERS", "SearchSpec", "Uniform", "read_points"]

METHODS = ("random", "sobol", "halton", "lhs", "grid", "csv", "adaptive")
SAMPLERS = ("tpe", "gp", "cmaes", "nsga2")
PRUNERS = ("median", "successive_halving", "hyperband")
COST = "cost"  # the objective metric priced from control's own ledger, never a VM's word
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")  # what `${name}` may name
MAX_POINTS = 10_000  # rows of a csv design, points of a grid
MAX_POINTS_BYTES = 1 << 20

Scalar = str | int | float | bool


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Range(_Strict):
    """`{kind: [low, high]}`: low < high, both finite (log-uniform: both > 0)."""

    def bounds(self) -> tuple[float, float]:
        lo, hi = getattr(self, self.kind())
        return lo, hi

    def kind(self) -> str:
        return next(iter(type(self).model_fields))

    @model_validator(mode="after")
    def _ordered(self) -> _Range:
        (lo, hi), kind = self.bounds(), self.kind()
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
            raise ValueError(f"{kind} [{lo}, {hi}]: give [low, high] with low < high, both finite")
        if kind == "loguniform" and lo <= 0:
            raise ValueError(f"loguniform [{lo}, {hi}]: both bounds must be > 0")
        return self


class Uniform(_Range):
    uniform: tuple[float, float]


class LogUniform(_Range):
    loguniform: tuple[float, float]


class IntRange(_Range):
    int: tuple[int, int]


class Choice(_Strict):
    choice: list[Scalar] = Field(min_length=1)

    @field_validator("choice")
    @classmethod
    def _distinct(cls, v: list[Scalar]) -> list[Scalar]:
        if len(set(map(repr, v))) != len(v):
            raise ValueError(f"choice {v} repeats a value")
        return v


Distribution = Uniform | LogUniform | IntRange | Choice
_KINDS: dict[str, type[BaseModel]] = {"uniform": Uniform, "loguniform": LogUniform,
                                      "int": IntRange, "choice": Choice}


class Objective(_Strict):
    metric: str = Field(min_length=1, max_length=128,
                        description="a metric the workload records, or `cost` (USD, control's ledger)")
    direction: Literal["minimize", "maximize"] = "maximize"


def read_points(text: str, where: str) -> list[dict[str, Scalar]]:
    """The rows of a csv design: a header of parameter names, one row a trial; numbers
    read as numbers (int when whole), the rest as text."""
    if len(text.encode()) > MAX_POINTS_BYTES:
        raise ValueError(f"points {where}: more than {MAX_POINTS_BYTES} bytes")
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames:
        raise ValueError(f"points {where}: empty; give a header of parameter names, then one row a trial")
    rows: list[dict[str, Scalar]] = []
    for line, row in enumerate(reader, start=2):
        if None in row or any(v is None for v in row.values()):
            raise ValueError(f"points {where} line {line}: {len(reader.fieldnames)} columns "
                             f"expected ({', '.join(reader.fieldnames)})")
        rows.append({k.strip(): _number(v.strip()) for k, v in row.items() if k is not None})
        if len(rows) > MAX_POINTS:
            raise ValueError(f"points {where}: more than {MAX_POINTS} rows")
    if not rows:
        raise ValueError(f"points {where}: a header but no rows; give one row a trial")
    return rows


def _number(text: str) -> Scalar:
    for kind in (int, float):
        try:
            value = kind(text)
        except ValueError:
            continue
        return value if math.isfinite(value) else text
    return {"true": True, "false": False}.get(text.lower(), text)


class SearchSpec(_Strict):
    space: dict[str, Distribution | Scalar | list[Scalar]] = Field(
        default_factory=dict,
        description="per parameter {uniform|loguniform|int: [lo, hi]}, {choice: [...]}, or a fixed value")
    method: Literal["random", "sobol", "halton", "lhs", "grid", "csv", "adaptive"] = "random"
    sampler: Literal["tpe", "gp", "cmaes", "nsga2"] | None = Field(
        None, description="adaptive only: the Optuna sampler that learns from each result")
    points: list[dict[str, Scalar]] | None = Field(
        None, description="csv only: a CSV file (relative to the spec), one row a trial")
    n: int | None = Field(None, ge=1, le=MAX_POINTS, description="trials (csv, grid: their rows/points)")
    seed: int = Field(0, ge=0, le=2**32 - 1)
    parallel: int = Field(1, ge=1, le=1000, description="trials in flight")
    repeats: int = Field(1, ge=1, le=100, description="groups per trial, same parameters")
    objective: Objective | list[Objective] | None = None
    pruner: Literal["median", "successive_halving", "hyperband"] | None = Field(
        None, description="stops a trial whose intermediate values lag (a workload's `progress`)")

    @field_validator("space", mode="before")
    @classmethod
    def _space(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            return v
        out = {}
        for name, value in v.items():
            if not isinstance(name, str) or not NAME.match(name):
                raise ValueError(f"space.{name}: a parameter name is letters, digits and '_', "
                                 "not starting with a digit (it is written ${name})")
            out[name] = _distribution(name, value)
        return out

    @field_validator("points", mode="before")
    @classmethod
    def _points_file(cls, v: Any, info: ValidationInfo) -> Any:
        if not isinstance(v, str):
            return v
        base = (info.context or {}).get("base_dir") or Path.cwd()
        path = Path(v) if Path(v).is_absolute() else Path(base) / v
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"points {v}: cannot read {path} ({getattr(exc, 'strerror', None) or exc}); "
                             "give a CSV file relative to the spec, a header then one row a trial") from None
        return read_points(text, v)

    @model_validator(mode="after")
    def _method_fields(self) -> SearchSpec:
        why = self._method_problem() or self._objective_problem()
        if why:
            raise ValueError(why)
        return self

    def _method_problem(self) -> str | None:
        m = self.method
        if (m == "adaptive") != (self.sampler is not None):
            return (f"sampler {self.sampler!r} with method {m!r}: adaptive needs a sampler "
                    f"({', '.join(SAMPLERS)}); the other methods take none")
        if (m == "csv") != (self.points is not None):
            return (f"points with method {m!r}: method csv needs `points: FILE` (one row a "
                    "trial); the other methods draw theirs from `space`")
        if m == "csv" and self.points is not None and self.n is not None and self.n > len(self.points):
            return f"n {self.n}: the csv design has {len(self.points)} rows; leave n out to run every row"
        if m == "grid":
            bad = [k for k, d in self.space.items() if isinstance(d, (Uniform, LogUniform))]
            if bad:
                return (f"space.{bad[0]}: method grid takes {{choice: [...]}}, {{int: [lo, hi]}} "
                        "or fixed values, not a continuous range")
        elif m != "csv" and self.n is None:
            return f"n: method {m} needs the number of trials, e.g. `n: 20`"
        if m != "csv" and not self.searched():
            return f"space: method {m} needs at least one parameter with a range or a choice"
        return None

    def _objective_problem(self) -> str | None:
        if self.method == "adaptive" and self.objective is None:
            return ("objective: adaptive learns from each trial's objective; give "
                    "{metric: NAME, direction: maximize|minimize}")
        if len(self.objectives) > 1 and self.method == "adaptive" and self.sampler not in ("nsga2", "tpe", "gp"):
            return f"sampler {self.sampler}: several objectives need nsga2, tpe or gp"
        if self.pruner is not None and len(self.objectives) != 1:
            return f"pruner {self.pruner}: pruning needs exactly one objective"
        return None

    # ---- derived ---------------------------------------------------------------------
    @property
    def objectives(self) -> list[Objective]:
        if self.objective is None:
            return []
        return self.objective if isinstance(self.objective, list) else [self.objective]

    def searched(self) -> dict[str, Distribution]:
        """The parameters with a range or a choice (the sampler's space), in name order."""
        return {k: v for k, v in sorted(self.space.items()) if isinstance(v, _KINDS_T)}

    def fixed(self) -> dict[str, Any]:
        """The parameters with one value."""
        return {k: v for k, v in self.space.items() if not isinstance(v, _KINDS_T)}

    def extremes(self) -> list[dict[str, Any]]:
        """The fixed values, then each range's bounds and each choice, one point each (an
        adaptive search's values, checked by the workload's model before any is asked)."""
        fixed = self.fixed()
        points = [dict(fixed)]
        for name, d in self.searched().items():
            values = list(d.choice) if isinstance(d, Choice) else list(d.bounds())
            points += [{**fixed, name: v} for v in values]
        return points

    def names(self) -> list[str]:
        """Every parameter a trial sets: the space's, and a csv design's columns."""
        names = set(self.space)
        for row in self.points or []:
            names |= set(row)
        return sorted(names)


_KINDS_T = (Uniform, LogUniform, IntRange, Choice)


def _distribution(name: str, value: Any) -> Any:
    """`{kind: ...}` → its model (errors name the parameter, the kind and what is allowed);
    anything else is a fixed value."""
    if isinstance(value, dict):
        kinds = [k for k in value if k in _KINDS]
        if len(value) != 1 or not kinds:
            raise ValueError(f"space.{name} = {value!r}: give exactly one of "
                             f"{', '.join('{' + k + ': ...}' for k in _KINDS)}, or a fixed value")
        try:
            return _KINDS[kinds[0]].model_validate(value)
        except ValueError as exc:
            errs = getattr(exc, "errors", lambda: [{"msg": str(exc)}])()
            msg = errs[0]["msg"].removeprefix("Value error, ")
            raise ValueError(f"space.{name} = {value!r}: {msg}") from None
    if value is None:
        raise ValueError(f"space.{name}: no value; give a range, a choice or a fixed value")
    return value

"""Turn pydantic validation errors into one readable line per problem."""

from __future__ import annotations

import difflib
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from spotbench.workload_registry import registry

Problem = tuple[str, Any, str]  # (field path, bad value, what is wrong / allowed)


class SpecError(ValueError):
    """A spec that cannot be used. `problems` has one (path, value, message) per problem."""

    def __init__(self, where: str, problems: list[Problem]):
        self.where = where
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        lines = []
        for path, value, message in self.problems:
            head = f"{self.where}: {path}" if path else self.where
            shown = "" if value is _MISSING else f" = {shorten(value)}"
            lines.append(f"{head}{shown}: {message}")
        return "\n".join(lines)


_MISSING = object()
MAX_SHOWN = 80


def shorten(value: Any, limit: int = MAX_SHOWN) -> str:
    """repr(value), cut to `limit` characters with its full length shown."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, (str, bytes, list, dict, tuple)) else len(text)
    unit = "characters" if isinstance(value, (str, bytes)) else "items" if hasattr(value, "__len__") else "characters"
    return f"{text[:limit]}… ({size} {unit})"


def problems_from_validation(
    exc: ValidationError, data: dict[str, Any], root: type[BaseModel]
) -> list[Problem]:
    problems: list[Problem] = []
    for err in exc.errors():
        loc = [p for p in err["loc"] if not _is_union_tag(p)]
        path = _render_path(loc)
        kind = err["type"]
        message = err["msg"].removeprefix("Value error, ")
        if kind == "extra_forbidden":
            allowed = _allowed_keys(root, err["loc"][:-1])
            close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            message = f"unknown key; {hint}allowed: {', '.join(sorted(allowed))}"
            problems.append((path, _MISSING, message))
            continue
        if kind == "missing":
            problems.append((path, _MISSING, "required field is missing"))
            continue
        if kind == "literal_error" and "expected" in (err.get("ctx") or {}):
            message = f"not allowed; choose one of {err['ctx']['expected']}"
        if kind == "union_tag_invalid":
            message = f"unknown workload; choose one of {err['ctx']['expected_tags']}"
            path = _render_path(loc + ["name"])
        value = err.get("input", _MISSING) if loc else _MISSING
        problems.append((path, value, message))
    return problems


def _render_path(loc: list[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _is_union_tag(part: Any) -> bool:
    # pydantic puts the discriminator value (e.g. 'osu') or a function tag into the loc
    return isinstance(part, str) and (part in registry() or part.startswith("function-"))


def _allowed_keys(model: Any, loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model found by walking `loc` from `model` (best effort)."""
    current: Any = model
    for part in loc:
        current = _unwrap(current, part)
        if current is None:
            return []
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unwrap(tp: Any, part: Any) -> Any:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        field = tp.model_fields.get(part) if isinstance(part, str) else None
        return field.annotation if field else None
    for arg in typing.get_args(tp):  # Union / Annotated / list / Optional
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            name_field = arg.model_fields.get("name")
            if name_field is not None and name_field.default == part:
                return arg
            if isinstance(part, str) and part in arg.model_fields:
                return arg.model_fields[part].annotation
        found = _unwrap(arg, part) if typing.get_args(arg) else None
        if found is not None:
            return found
    return None

"""What the deployed functions install (Cloud Functions' requirements.txt, the Lambda layer),
derived from pyproject.toml so versions are declared once.

= the core dependencies the functions' code imports (`FUNCTION_CORE`, names only: versions
come from `[project] dependencies`) + the cloud's whole extra (`[project.optional-dependencies]
gcp` / `aws`). tests/infra/test_requirements.py checks that every third-party module the
functions import at run time is covered, so a new import without a requirement fails there.
Read from the checkout's pyproject.toml, or from the installed distribution's metadata.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

from spotbench import PROJECT_ROOT

# core distributions the functions import (functions/, spotbench control/auth/clouds/results)
FUNCTION_CORE = (
    "functions-framework", "pydantic", "pyyaml", "croniter", "fsspec", "requests", "tenacity",
)
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def dist_name(requirement: str) -> str:
    """`pydantic>=2.7,<3` → `pydantic` (normalised: lowercase, `_`/`.` → `-`)."""
    match = _NAME.match(requirement)
    if not match:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def declared() -> tuple[list[str], dict[str, list[str]]]:
    """(core dependencies, extras) as pyproject.toml declares them."""
    pyproject = PROJECT_ROOT / "pyproject.toml"
    if pyproject.exists():
        project = tomllib.loads(pyproject.read_text())["project"]
        return list(project["dependencies"]), dict(project["optional-dependencies"])
    core: list[str] = []
    extras: dict[str, list[str]] = {}
    for req in metadata.requires("spotbench") or []:
        spec, _, marker = req.partition(";")
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", marker)
        (extras.setdefault(extra.group(1), []) if extra else core).append(spec.strip())
    return core, extras


def function_requirements(cloud: str) -> list[str]:
    core, extras = declared()
    if cloud not in extras:
        raise ValueError(f"pyproject.toml has no extra {cloud!r} for the {cloud} functions")
    wanted = [r for r in core if dist_name(r) in FUNCTION_CORE]
    missing = set(FUNCTION_CORE) - {dist_name(r) for r in wanted}
    if missing:
        raise ValueError(f"pyproject.toml dependencies lack {', '.join(sorted(missing))}")
    return wanted + list(extras[cloud])


def requirements_txt(cloud: str) -> str:
    return "\n".join(function_requirements(cloud)) + "\n"

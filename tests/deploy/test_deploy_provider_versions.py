"""The provider ranges pyproject.toml allows are ones the code runs with: the installed
providers satisfy them, their floors are the releases that bring what infra/ relies on
(pulumi-aws 7: the v7 resource names; pulumi-gcp 8.10: `desired_status = TERMINATED` at
create, magic-modules#11902), and every provider resource or function infra/ names exists
in the installed provider with the arguments it passes."""

from __future__ import annotations

import ast
import importlib
import inspect
import tomllib
from importlib import metadata

from packaging.requirements import Requirement
from packaging.version import Version

from spotbench import PROJECT_ROOT

FLOORS = {"pulumi-aws": Version("7"), "pulumi-gcp": Version("8.10")}
ALIASES = {"aws": "pulumi_aws", "gcp": "pulumi_gcp", "time": "pulumiverse_time",
           "pulumi_random": "pulumi_random", "tls": "pulumi_tls"}


def _infra_requirements() -> dict[str, Requirement]:
    extras = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    return {Requirement(r).name: Requirement(r) for r in extras["infra"]}


def test_deploy_installed_providers_satisfy_pyproject_and_its_floors_are_what_the_code_needs():
    reqs = _infra_requirements()
    for name, floor in FLOORS.items():
        spec = reqs[name].specifier
        assert metadata.version(name) in spec, (name, metadata.version(name), str(spec))
        lows = [Version(s.version) for s in spec if s.operator in (">=", ">")]
        assert lows and min(lows) >= floor, f"{name}: pyproject allows releases below {floor}"


def _calls() -> list[tuple[str, str, list[str], str]]:
    """(module alias, dotted attribute, keyword names, where) of each provider call in infra/."""
    out = []
    for path in sorted((PROJECT_ROOT / "infra").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            parts, f = [], node.func
            while isinstance(f, ast.Attribute):
                parts.insert(0, f.attr)
                f = f.value
            if isinstance(f, ast.Name) and f.id in ALIASES and parts:
                out.append((f.id, ".".join(parts), [k.arg for k in node.keywords if k.arg],
                            f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}"))
    return out


def test_deploy_every_provider_resource_and_argument_infra_uses_exists_in_the_installed_one():
    missing = []
    calls = _calls()
    assert len(calls) > 40
    for alias, dotted, keywords, where in calls:
        obj = importlib.import_module(ALIASES[alias])
        try:
            for part in dotted.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            missing.append(f"{where}: {alias}.{dotted}")
            continue
        if inspect.isclass(obj) and hasattr(obj, "_internal_init"):
            params = set(inspect.signature(obj._internal_init).parameters)
            missing += [f"{where}: {alias}.{dotted}({k}=)" for k in keywords
                        if k not in params and k != "opts"]
    assert not missing, missing

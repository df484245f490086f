"""Which optional install a missing module belongs to, said as what to run.

The base install (`make setup`, `pip install spotbench`) runs the local cloud. A cloud's
commands need its extras (pyproject.toml), installed with `make setup CLOUD=gcp|aws`, i.e.
`pip install -e '.[<facts.setup_extras>]'`: `gcp`/`aws` the cloud SDKs (status, schedule,
teardown, preflight, the results bucket), `infra` Pulumi (preview, teardown's `pulumi
destroy`, `pulumi up`), `ops` ssh/exec/collect; `tf` is the TensorFlow workload's.
`explain(exc)` turns a ModuleNotFoundError into one sentence; `missing(cloud)` lists what a
cloud's commands need and this machine lacks (preflight); `sdk_missing(cloud)` is the
cloud's own extra only (checked before any call to it).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from spotbench.facts import CLOUDS, facts_of

# top-level module → the extra that installs it
MODULE_EXTRA = {
    "pulumi": "infra", "pulumi_gcp": "infra", "pulumi_aws": "infra", "pulumi_tls": "infra",
    "google": "gcp", "gcsfs": "gcp",
    "boto3": "aws", "botocore": "aws", "s3fs": "aws",
    "fabric": "ops", "paramiko": "ops",
    "tensorflow": "tf", "sklearn": "tf",
}


def _setups() -> dict[str, str]:
    """cloud → the extras `make setup CLOUD=<cloud>` installs (clouds that have some)."""
    return {name: f.setup_extras for name in CLOUDS if (f := facts_of(name)).setup_extras}


def install_hint(extra: str, cloud: str | None = None) -> str:
    """`make setup CLOUD=gcp` in a checkout, `pip install 'spotbench[gcp,infra,ops]'` otherwise."""
    setups = _setups()
    clouds = [cloud] if cloud in setups and extra in setups[cloud].split(",") else [
        c for c, extras in setups.items() if extra in extras.split(",")]
    if not clouds:
        return (f"`.venv/bin/pip install -e '.[{extra}]'` in a checkout "
                f"(`make setup-dev` installs every extra), `pip install 'spotbench[{extra}]'` otherwise")
    make = " or ".join(f"`make setup CLOUD={c}`" for c in clouds)
    pip = " or ".join(f"'spotbench[{setups[c]}]'" for c in clouds)
    return f"{make} in a checkout, `pip install {pip}` otherwise"


def explain(exc: BaseException, cloud: str | None = None) -> str | None:
    """One sentence for a module that an extra installs; None for any other error."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.split(".")[0]
    extra = MODULE_EXTRA.get(top)
    if extra is None:
        return None
    return (f"this needs the `{extra}` extra ({top} is not installed): install it with "
            f"{install_hint(extra, cloud)}")


@dataclass(frozen=True)
class Missing:
    check: str  # "extras" | "tools"
    message: str
    fix: str


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or blocked in sys.modules
        return False


def sdk_missing(cloud: str) -> str | None:
    """One sentence when `cloud`'s own extra (its SDKs) is not installed; None otherwise."""
    absent = [m for m in facts_of(cloud).needs_modules.get(cloud, ()) if not _installed(m)]
    if not absent:
        return None
    return (f"this needs the `{cloud}` extra ({', '.join(absent)} not installed): install it with "
            f"{install_hint(cloud, cloud)}")


def missing(cloud: str, env: Mapping[str, str] | None = None,
            which: Callable[[str], str | None] = shutil.which) -> list[Missing]:
    """The extras and tools `cloud`'s commands and walkthrough need and this machine lacks.
    Tools are not needed when the commands are aimed at a local double (`double_env` set)."""
    env = os.environ if env is None else env
    facts = facts_of(cloud)
    out = []
    for extra, modules in facts.needs_modules.items():
        absent = [m for m in modules if not _installed(m)]
        if absent:
            out.append(Missing("extras", f"the `{extra}` extra is not installed ({', '.join(absent)})",
                               install_hint(extra, cloud)))
    if facts.double_env and env.get(facts.double_env):
        return out
    for tool, step, url in facts.tools:
        if which(tool) is None:
            out.append(Missing("tools", f"`{tool}` is not on PATH; {step} needs it", f"install it: {url}"))
    return out


def workload_missing(cloud: str, workload: str) -> Missing | None:
    """What `workload`'s members need on this machine and it lacks, when `cloud` runs them
    here (the local cloud: members are this host's processes; a cloud VM runs an image that
    has them). Found before `spotbench run` and by `preflight`, never as a crashed member."""
    from spotbench.workload_registry import registry

    w = registry().get(workload)
    if w is None or not facts_of(cloud).shares_host:
        return None
    absent = [m for m in w.local_modules if not _installed(m)]
    if not absent:
        return None
    extras = sorted({MODULE_EXTRA.get(m.split(".")[0], "") for m in absent} - {""})
    extra = ",".join(extras) or "?"
    return Missing("extras", f"workload {workload} needs the `{extra}` extra on this machine, where "
                             f"the {cloud} cloud runs its members ({', '.join(absent)} not installed)",
                   f"install it with {install_hint(extra, cloud)}")

"""The Pulumi program: reads the sweep spec from stack config and wires components.

Stack config `spotbench:spec` is a path to a YAML spec (relative to the project root) or an
inline object; it goes through the same `load_spec` as the CLI, so a bad spec fails
`pulumi up`/`preview` with the same messages.
"""

import importlib
import sys
from pathlib import Path

import pulumi

# `pulumi up` runs this folder as a program with only infra/ on sys.path: add the project root
# so `infra`, `spotbench`, `functions` and `workloads` import as packages.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra.config import spec_from_config  # noqa: E402
from spotbench.clouds import get_provider  # noqa: E402

spec = spec_from_config(pulumi.Config("spotbench"))

component = get_provider(spec.cloud).facts.stack_component  # e.g. "infra.gcp:GcpSweep"
if component is None:
    raise pulumi.RunError(
        f"spec {spec.name!r} is for cloud {spec.cloud!r}; Pulumi deploys gcp and aws sweeps. "
        "Run local sweeps with `spotbench run SPEC`."
    )
module, _, cls = component.partition(":")
sweep_class = getattr(importlib.import_module(module), cls)
sweep = sweep_class(spec.name, sweep_class.Args(spec=spec))
for key, value in sweep.outputs.items():  # the stack's outputs: exported here only
    pulumi.export(key, value)

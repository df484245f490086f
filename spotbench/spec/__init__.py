"""The sweep spec: what to run, where, how often, and for how much.

`load_spec()` turns YAML (or a dict, e.g. from Pulumi stack config) into a validated
`SweepSpec`; `SweepSpec.plan()` expands it into run groups (`spotbench.plan`).

The package, top down (`pyproject.toml`'s `spec-inside` contract keeps the order):

- `model`: `SweepSpec`, its sections and `load_spec`, the one public entry;
- `checks`: a valid spec against its cloud's catalog (errors and warnings);
- `reading`: bounded, strict YAML reading (size cap, line numbers for errors);
- `fields`: durations and the schedule; `zones`: candidate zones and the lifecycle;
  `scaling`: the scaling axis and the work behind cost-vs-time;
- `errors`: `SpecError`, one line per problem naming the field, the value and the fix.
"""

from spotbench.spec.model import (
    NAME_PATTERN,
    MATRIX_MACHINE_KEYS,
    Params,
    Scaling,
    Schedule,
    SpecError,
    SweepSpec,
    Work,
    load_spec,
    parse_duration,
    spec_warnings,
)

__all__ = ["NAME_PATTERN", "SpecError", "SweepSpec", "Params", "Schedule", "load_spec", "spec_warnings",
           "parse_duration", "MATRIX_MACHINE_KEYS", "Scaling", "Work"]

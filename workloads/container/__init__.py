"""Bring your own benchmark (spec workload `container`): any command, its numbers as results.

    python -m workloads.container       # the command and its env from SPOTBENCH_CONTEXT

The member runs the spec's `command` (on the local cloud: any command on this machine; on a
cloud VM: `docker run IMAGE COMMAND` of the spec's image, which needs nothing of spotbench,
between a `check` and a `collect` of spotbench's runner image: see `__main__.py`), with
`SPOTBENCH_RESULTS_DIR` pointing at an empty folder. Metrics are what the command reports, either way:

- JSON lines in any `*.jsonl` file it writes to `$SPOTBENCH_RESULTS_DIR`:
  `{"metric": "events_per_s", "value": 1234.5, "unit": "events/s", "labels": {"threads": 4}}`
- lines `name=value unit` on its stdout: `events_per_s=1234.5 events/s`

When the command exits, the member stores the metrics (plus the raw stdout) and calls
`done`, so the group stops itself. See `metrics.py` for the exact formats.
"""

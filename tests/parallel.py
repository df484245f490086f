"""How `make test` spreads the suite over pytest-xdist workers (`-n N --dist loadgroup`).

The rule: a test that uses a module- or class-scoped fixture runs on the worker that runs
the rest of its module, so that fixture (a boot lab, a moto server, a module's HTTP
server) is built once, as in a serial run; every other test is a unit of its own, handed
to whichever worker is free. A test's own `xdist_group` mark wins over the rule.

The order: the costliest units go first, so the suite does not end waiting on a long test
that started last. A test costs its seconds in a profile of the whole suite when it is
there (tests/durations.json: setup + call + teardown of the slowest tests of a `make test`
run; a module fixture's build counts in its first test); else 1, five times more when it
is marked `slow`, `fidelity` or `faults` (real processes, boots, sweeps) — under the
profile's slowest tests either way — times its own `timeout` mark over the suite's default
when it declares a longer one (the fresh-install walkthrough). A unit costs the sum of its tests. Within a unit the tests keep their
collection order. The profile only orders the queue: a test missing from it (new, renamed)
runs all the same. Refresh it from a run's output (`--durations=150`):
`python -m tests.parallel LOG > tests/durations.json`.

Why a scheduler of our own: with pytest 9.2, xdist 3.8's `loadgroup` no longer groups
(its worker writes the group into `item._nodeid`, which pytest 9.2 no longer reads:
pytest-dev/pytest-xdist#1386), and the controller only ever sees node ids. So each worker
writes the groups it collected (node id → group) to a file in a folder the controller
named in `SPOTBENCH_XDIST_GROUPS`, and the controller's `Grouped` scheduler reads them when
it splits the collection into units (after every worker has reported its collection).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

GROUPS_ENV = "SPOTBENCH_XDIST_GROUPS"
SHARED_SCOPES = {"module", "class", "package"}


def shares_module_state(item: pytest.Item) -> bool:
    """Does `item` use a fixture that lives longer than one test but not the whole session?"""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name)
        if defs and defs[-1].scope in SHARED_SCOPES:
            return True
    return False


def group_of(item: pytest.Item) -> str | None:
    """The xdist group of `item`: its own `xdist_group` mark(s), else its module's name when
    it shares the module's fixtures, else None (a unit of its own)."""
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                    for m in item.iter_markers("xdist_group")})
    if names:
        return "_".join(names)
    if shares_module_state(item):
        return item.module.__name__ if getattr(item, "module", None) else item.nodeid
    return None


HEAVY_MARKS = ("slow", "fidelity", "faults")
DURATIONS = Path(__file__).with_name("durations.json")  # node id → seconds (a whole-suite profile)
_DURATION_LINE = re.compile(r"^\s*([0-9.]+)s\s+(?:setup|call|teardown)\s+(\S.*?)\s*$", re.M)


def durations_from_log(text: str) -> dict[str, float]:
    """pytest's `--durations` lines (`12.3s call tests/x.py::test_y`), summed per test."""
    out: dict[str, float] = {}
    for seconds, nodeid in _DURATION_LINE.findall(text):
        out[nodeid] = round(out.get(nodeid, 0.0) + float(seconds), 2)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def load_durations(path: Path = DURATIONS) -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text()).items()}
    except FileNotFoundError:
        return {}


def cost_of(item: pytest.Item, default_timeout: float,
            measured: dict[str, float] | None = None) -> float:
    """A test's expected cost in seconds (see the module doc)."""
    if measured and item.nodeid in measured:
        return measured[item.nodeid]
    cost = 5.0 if any(item.get_closest_marker(m) for m in HEAVY_MARKS) else 1.0
    timeout = item.get_closest_marker("timeout")
    if timeout and timeout.args and default_timeout and float(timeout.args[0]) > default_timeout:
        cost *= float(timeout.args[0]) / default_timeout
    return cost


def mark_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each grouped item with its `xdist_group`; on an xdist worker, also write each
    test's group and cost where the controller's scheduler reads them."""
    default_timeout = float(config.getini("timeout") or 0)
    measured = load_durations()
    groups = {}
    for item in items:
        name = group_of(item)
        if name is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(name))
        groups[item.nodeid] = {"group": name, "cost": cost_of(item, default_timeout, measured)}
    folder, worker = os.environ.get(GROUPS_ENV), os.environ.get("PYTEST_XDIST_WORKER")
    if folder and worker:
        out = Path(folder) / f"{worker}.json"
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(groups))
        tmp.replace(out)


def read_groups(folder: str) -> dict[str, dict]:
    groups: dict[str, dict] = {}
    for path in sorted(Path(folder).glob("*.json")):
        groups.update(json.loads(path.read_text()))
    return groups


def make_scheduler(config: pytest.Config, log):
    """`loadgroup` with the groups the workers wrote, costliest units first (None for any
    other --dist)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    folder = os.environ[GROUPS_ENV]

    class Grouped(LoadGroupScheduling):
        _groups: dict[str, dict] | None = None
        _sorted = False

        def _info(self, nodeid: str) -> dict:
            if self._groups is None:  # a worker writes its file before it reports collection
                self._groups = read_groups(folder)
            return self._groups.get(nodeid) or {}

        def _split_scope(self, nodeid: str) -> str:
            group = self._info(nodeid).get("group")
            return f"group:{group}" if group else super()._split_scope(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self._sorted:  # the queue of units is whole by the first assignment
                self._sorted = True
                units = sorted(self.workqueue.items(),  # stable: equal costs keep their order
                               key=lambda unit: -sum(self._info(n).get("cost", 1.0)
                                                     for n in unit[1]))
                self.workqueue.clear()
                self.workqueue.update(units)
            super()._assign_work_unit(node)

    return Grouped(config, log)


if __name__ == "__main__":  # python -m tests.parallel LOG > tests/durations.json
    print(json.dumps(durations_from_log(Path(sys.argv[1]).read_text()), indent=0))

"""Where to ask first: the candidate zones of a group in the created lifecycle, ordered by
the capacity and preemption history per zone (`spotbench.capacity`).

    order = candidate_order(sweep, group, insts, now)   # [] in the stopped lifecycle
    cloud.start(group.labels, zones=order)

History read per start (cheap: small JSON files, no query engine):
- the store's start ledger of every run (`runs/*/starts/*.json`, `StartRecord`): each start
  request with its zone and the kinds of its refused members; a zone refused for capacity
  counts as a capacity failure there;
- preempted attempts: members of the group the cloud reports preempted when it is retried
  (their zone, now). Older preemptions are not read per start (they would need every
  stored record): the market statistics hold them.
The market statistics (`spotbench.history.market`, per-zone preemption rates over the whole
history) need the history catalog (DuckDB over the whole store): not read per start; the
ledger above is the same data, recent.
"""

from __future__ import annotations

import logging
from datetime import datetime

from spotbench.capacity import WINDOW, order_zones, why, zone_history
from spotbench.clouds.base import ErrorKind, Instance
from spotbench.control.sweep import Sweep
from spotbench.plan import RunGroup
from spotbench.results import StoreError, utcnow

log = logging.getLogger("spotbench.control")


def candidate_order(sweep: Sweep, group: RunGroup, insts: list[Instance],
                    now: datetime | None) -> list[str]:
    """The spec's candidate zones for `group`, first to ask first (`lifecycle: created`)."""
    spec = sweep.spec
    candidates = spec.candidate_zones
    if len(candidates) < 2:
        return list(candidates)
    at = now or utcnow()
    store = sweep.store
    try:
        starts = store.start_records(since=at - WINDOW)
    except (StoreError, OSError, ValueError) as exc:
        log.warning("zone history not read (%s): candidates in the spec's order", exc)
        starts = []
    preempted = [(i.zone, at) for i in insts if i.error == ErrorKind.PREEMPTED and i.zone]
    seen = zone_history(starts, machine_type=group.machine_type, accelerator=group.accelerator,
                        now=at, preemptions=preempted)
    order = order_zones(candidates, seen)
    if order != list(candidates):
        log.info("group %s: zones asked in the order %s (%s)", group.id, order,
                 "; ".join(why(z, seen) for z in order))
    return order

"""Spot-market statistics from the sweep's own history, per zone × machine type × accelerator.

    with Catalog(url) as cat:
        rows = market(cat)
        publish(cat, rows)      # the dated snapshot control's zone ordering reads

Every figure comes from what the store holds (nothing assumed):

- `preemptions_per_vm_hour`: preempted attempts ÷ VM-hours of every attempt (attempt time ×
  its members). Attempts control flagged contaminated are not preemptions: they are counted
  apart (`contaminated`), and never as completed. A stored `preempted` also covers a deadline stop or a lost peer: on a cloud
  these are nearly all reclaims, on the local cloud they are what a test injected.
- `failed_starts_per_start`, `capacity_failures_per_start`: start requests (the start ledger,
  runs/<run>/starts/) where a member did not run, and those the cloud typed as capacity
  errors. `None` when no start was recorded, or failures were recorded without a type.
- `first_result_s`: median over runs of (first complete result − the run's start tick).
- `retries_per_completed`: stored attempts − 1, averaged over completed (run, group).
- `cost_per_completed_usd`: every attempt's cost (preempted ones too) ÷ completed results;
  `retry_overhead` = that ÷ the cost of the completed attempts alone (≥ 1): what
  `spotbench estimate` multiplies the happy-path cost by.
"""

from __future__ import annotations

import logging
from typing import Any

from spotbench.history.catalog import Catalog

log = logging.getLogger("spotbench.history")

KEY = ("zone", "machine_type", "accelerator")


def market(cat: Catalog) -> list[dict[str, Any]]:
    rows = cat.query("""
        WITH a AS (
            SELECT coalesce(zone, '') AS zone, machine_type, coalesce(accelerator, '') AS accelerator,
                   run, "group", attempt, preempted, cost_usd, started_at, ended_at,
                   contaminated IS NOT NULL AS flagged,
                   epoch(ended_at - started_at) * coalesce(members, 1) AS vm_s
            FROM attempts
        ), per AS (
            SELECT zone, machine_type, accelerator, count(*) AS attempts,
                   count(*) FILTER (WHERE preempted AND NOT flagged) AS preempted,
                   count(*) FILTER (WHERE flagged) AS contaminated, sum(vm_s) / 3600 AS vm_hours,
                   sum(cost_usd) AS cost_all, count(cost_usd) = count(*) AS priced,
                   sum(cost_usd) FILTER (WHERE NOT preempted) AS cost_ok
            FROM a GROUP BY ALL
        ), groups AS (
            SELECT zone, machine_type, accelerator, run, "group", count(*) AS n,
                   bool_or(NOT preempted) AS completed
            FROM a GROUP BY ALL
        ), g AS (
            SELECT zone, machine_type, accelerator, count(*) FILTER (WHERE completed) AS completed,
                   avg(n - 1) FILTER (WHERE completed) AS retries
            FROM groups GROUP BY ALL
        ), first AS (
            SELECT zone, machine_type, accelerator,
                   median(epoch(first_ok - r.opened_at)) AS first_result_s
            FROM (SELECT zone, machine_type, accelerator, run, min(ended_at) AS first_ok
                  FROM a WHERE NOT preempted GROUP BY ALL) f
            JOIN runs r USING (run) GROUP BY ALL
        ), s AS (
            SELECT coalesce(zone, '') AS zone, machine_type, coalesce(accelerator, '') AS accelerator,
                   count(*) AS starts, count(*) FILTER (WHERE failed > 0) AS failed_starts,
                   count(*) FILTER (WHERE capacity > 0) AS capacity_starts,
                   count(*) FILTER (WHERE failed > 0 AND typed = 0) AS untyped_failures
            FROM starts GROUP BY ALL
        )
        SELECT per.*, g.completed, g.retries, first.first_result_s,
               s.starts, s.failed_starts, s.capacity_starts, s.untyped_failures
        FROM per JOIN g USING (zone, machine_type, accelerator)
        LEFT JOIN first USING (zone, machine_type, accelerator)
        LEFT JOIN s USING (zone, machine_type, accelerator)
        ORDER BY zone, machine_type, accelerator
    """).dicts()
    out = []
    for r in rows:
        starts = r["starts"] or 0
        completed = r["completed"] or 0
        priced = bool(r["priced"]) and completed > 0
        out.append({
            "zone": r["zone"] or None, "machine_type": r["machine_type"],
            "accelerator": r["accelerator"] or None,
            "attempts": r["attempts"], "completed": completed, "preempted": r["preempted"],
            "contaminated": r["contaminated"],
            "vm_hours": r["vm_hours"],
            "preemptions_per_vm_hour": r["preempted"] / r["vm_hours"] if r["vm_hours"] else None,
            "starts": starts,
            "failed_starts_per_start": r["failed_starts"] / starts if starts else None,
            "capacity_failures_per_start": (r["capacity_starts"] / starts
                                            if starts and not r["untyped_failures"] else None),
            "first_result_s": r["first_result_s"],
            "retries_per_completed": r["retries"],
            "cost_per_completed_usd": r["cost_all"] / completed if priced else None,
            "retry_overhead": (r["cost_all"] / r["cost_ok"]) if priced and r["cost_ok"] else None,
        })
    return out



def publish(cat: Catalog, rows: list[dict[str, Any]]) -> str | None:
    """Store `rows` as the store's dated market snapshot (`market/<time>.json`, spotbench.results):
    control orders candidate zones by it without this catalog. Best effort: a store this
    identity may not write is logged, never raised. Its path, or None."""
    if not rows:
        return None
    try:
        path = cat.store.write_market_snapshot(rows)
    except Exception as exc:  # noqa: BLE001 - a report must not fail for the snapshot
        log.warning("market snapshot not stored in %s (%s): control orders zones without it",
                    cat.store.url, exc)
        return None
    log.info("market snapshot stored: %s", path)
    return path


def market_of(results_url: str) -> list[dict[str, Any]]:
    """`market` of the store at `results_url`; empty when it holds nothing (or cannot be read:
    the estimate then prices the happy path and says so)."""
    try:
        with Catalog(results_url) as cat:
            return market(cat)
    except Exception as exc:  # noqa: BLE001 - an unreadable history must not stop an estimate
        log.warning("no spot-market history from %s: %s", results_url, exc)
        return []

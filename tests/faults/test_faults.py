"""Fault injection on the local cloud (`pytest -m faults`): members, the runner and the
functions server killed mid-sweep, duplicate and concurrent ticks, deadline overruns, a
read-only and a full results store. Every scenario must lose and duplicate no result row,
leave no process behind, name each group's final state, and make `spotbench run` exit
non-zero when a group ends incomplete. See `scenarios.py` for what each one does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.harness import EXIT_INCOMPLETE, GRACE_S
from tests.faults.scenarios_freeze import TINY_TF
from tests.faults.scenarios import (
    container_freeze,
    deadline_overrun,
    duplicate_ticks_and_storm,
    full_store,
    STATE_FILES,
    corrupt_run_ledger,
    corrupt_state_file,
    launcher_kills,
    member_kills,
    osu_freeze,
    runner_sigkill_no_rerun,
    state_disk_full,
    tf_freeze,
    tf_freeze_after,
    readonly_store,
    readonly_store_at_start,
    runner_sigkill_then_resume,
    runner_sigterm,
    server_kill,
)

pytestmark = [pytest.mark.faults, pytest.mark.slow]

DETECT_S = 10.0  # generous: two shared cores; the runner polls every 0.5 s


def clean(figures: dict) -> None:
    """What must hold after every fault."""
    if "skipped" in figures:
        pytest.skip(figures["skipped"])
    assert figures["rows_lost"] == 0, figures
    assert figures["rows_duplicated"] == 0, figures
    assert figures["leaked"] == [], figures


def test_member_kills_stop_the_whole_group_at_once_and_retry_it(tmp_path: Path) -> None:
    f = member_kills(tmp_path)
    clean(f)
    assert f["rc"] == 0, f["output"]
    assert set(f["states"].values()) == {"complete"} and len(f["states"]) == 2, f["output"]
    for fault in f["faults"]:  # the survivor did not idle until a deadline
        assert fault["detect_s"] < DETECT_S, fault


def test_sigterm_to_the_runner_stops_everything_and_closes_the_run(tmp_path: Path) -> None:
    f = runner_sigterm(tmp_path)
    clean(f)
    assert f["rc"] == 130, f["output"]
    assert f["instances_on"] == [] and f["open_runs"] == [], f


def test_sigkill_to_the_runner_orphans_nothing_and_a_new_run_resumes(tmp_path: Path) -> None:
    f = runner_sigkill_then_resume(tmp_path)
    clean(f)
    assert f["server_was_recorded"]
    assert f["faults"][0]["detect_s"] < DETECT_S  # the functions server died with its runner
    assert f["rc"] == 0, f["output"]
    assert set(f["states"].values()) == {"complete"}, f["output"]
    assert f["runs"] == [f["first_run"]], f  # the open run was continued, not a second one
    assert f["open_runs"] == []


def test_a_killed_functions_server_is_restarted_on_its_port(tmp_path: Path) -> None:
    f = server_kill(tmp_path)
    clean(f)
    [fault] = f["faults"]
    assert fault["same_port"] and fault["detect_s"] < DETECT_S, fault
    assert f["rc"] == 0, f["output"]
    assert set(f["states"].values()) == {"complete"}, f["output"]


def test_every_attempt_is_stopped_at_its_deadline_and_the_run_exits_non_zero(tmp_path: Path) -> None:
    f = deadline_overrun(tmp_path)
    clean(f)
    assert f["rc"] == EXIT_INCOMPLETE, f["output"]
    assert list(f["states"].values()) == ["incomplete: gave up"], f["output"]
    assert len(f["attempts"]) == 3, f  # retried, and each retry had a deadline too
    for a in f["attempts"]:
        assert 8 <= a["ran_s"] <= 10 + DETECT_S, f["attempts"]
    assert f["open_runs"] == []


def test_concurrent_and_repeated_ticks_never_overrun_the_limit(tmp_path: Path) -> None:
    f = duplicate_ticks_and_storm(tmp_path)
    assert f["statuses"] and all(s in (200, 403) for s in f["statuses"]), f["statuses"]
    assert f["peak_groups"] <= f["limit"] == 1, f
    assert f["peak_open_runs"] <= 1, f
    assert all(r["duplicate"] and r["run"] == f["first_run"] and r["started"] == [] for r in f["repeats"]), f
    assert f["instances_on_after_repeat"] == []


def test_a_read_only_results_store_at_start_starts_nothing(tmp_path: Path) -> None:
    f = readonly_store_at_start(tmp_path)
    clean(f)
    assert f["rc"] == EXIT_INCOMPLETE and "nothing was started" in f["output"], f["output"]
    assert "Read-only file system" in f["output"]
    assert f["instances_started"] == []


def test_a_results_store_turning_read_only_loses_no_row(tmp_path: Path) -> None:
    f = readonly_store(tmp_path)
    clean(f)
    assert f["rc"] == EXIT_INCOMPLETE, f["output"]
    assert "Read-only file system" in f["output"]
    states = f["states"]
    assert sorted(states.values())[0] == "complete" and any(s.startswith("incomplete") for s in states.values()), f


def test_a_full_results_disk_loses_no_row_and_still_closes_the_run(tmp_path: Path) -> None:
    f = full_store(tmp_path)
    clean(f)
    assert f["rc"] == EXIT_INCOMPLETE, f["output"]
    assert f["open_runs"] == [], f  # a full disk no longer leaves the run open forever
    assert any(s.startswith("incomplete") for s in f["states"].values()), f


def test_freeze_of_an_osu_peer_inside_its_timed_loop_contaminates_the_attempt_and_it_is_retried(tmp_path: Path) -> None:
    """SIGSTOP of the peer's process tree mid-measurement (a stopped process still accepts
    TCP connections: no watch of a socket sees it): the harness loops' heartbeat does."""
    f = osu_freeze(tmp_path)
    clean(f)
    assert f["unflagged_contaminated"] == 0, f["attempts"]
    first, *rest = f["attempts"]
    assert first["preempted"] and first["flag"] and first["flag"].startswith("stalled"), f["attempts"]
    assert first["contaminated"] == first["flag"]
    assert rest and not rest[-1]["preempted"] and not rest[-1]["flag"], f["attempts"]
    assert f["rc"] == 0 and set(f["states"].values()) == {"complete"}, f["output"]


def test_freeze_of_a_tf_worker_inside_the_timed_steps_contaminates_the_attempt_and_it_is_retried(tmp_path: Path) -> None:
    """SIGSTOP of a TF worker's process tree for 6 s while the chief measures (stall_s 3 s),
    then SIGCONT: training only waits (the chief's port watch sees a stopped worker alive),
    the chief's sync points see the stretch. The attempt is kept and flagged, not averaged,
    the group retried within its budget, and the report lists the attempt apart."""
    from spotbench.control import MAX_LAUNCHES_PER_RUN
    from spotbench.report.numbers import num

    f = tf_freeze(tmp_path)
    clean(f)
    assert f["unflagged_contaminated"] == 0, f["attempts"]
    first, *rest = f["attempts"]
    assert first["preempted"] and (first["flag"] or "").startswith("stalled: training"), f["attempts"]
    assert first["contaminated"] == first["flag"]
    [stall] = first["stalls"]
    assert stall["gap_s"] > TINY_TF["stall_s"], stall
    from spotbench.timed import Window

    timed = Window.of_span(first["timed"][0])  # the stall is inside the window the rows were timed over
    assert timed is not None and timed.overlaps(Window.of_span(stall)), (first["timed"], stall)
    assert rest and not rest[-1]["preempted"] and not rest[-1]["flag"], f["attempts"]
    assert rest[-1]["launches"] <= MAX_LAUNCHES_PER_RUN, f["attempts"]
    assert f["rc"] == 0 and set(f["states"].values()) == {"complete"}, f["output"]
    report = f["report"]
    apart = report[report.index("Contaminated attempts"):].split("\n## ")[0]
    assert first["flag"] in apart, apart
    rows = [line for line in report.splitlines() if line.startswith("| local | 1 |")]  # ranking, TF table
    assert any(f"| {num(rest[-1]['steps_per_s'])} |" in line for line in rows), rows  # the retry's rate only
    assert not any(num(first["steps_per_s"]) in line for line in rows if first["steps_per_s"]), rows


def test_freeze_after_the_last_timed_step_leaves_the_attempt_complete_and_counted(tmp_path: Path) -> None:
    """The other side of the rule (issue #40): the worker frozen for 6 s right after the
    chief's last timed step, inside the attempt's life (a rule over the whole attempt would
    count its rows), yet outside every row's timed window: the attempt is stored complete,
    not flagged, not retried, and no row counts as measured across the freeze."""
    from spotbench.timed import Window

    f = tf_freeze_after(tmp_path)
    clean(f)
    assert f["freeze_in_launch"], f  # the freeze hit a running attempt
    [attempt] = f["attempts"]
    assert not attempt["preempted"] and not attempt["flag"] and not attempt["contaminated"], attempt
    assert attempt["launches"] == 1, f["attempts"]
    freeze = Window.of_span(f["freeze"])
    timed = {Window.of_span(t) for t in attempt["timed"]}
    assert freeze is not None and None not in timed and all(w.end < freeze.start for w in timed), (f["freeze"], timed)
    assert f["unflagged_contaminated"] == 0, f["attempts"]
    assert f["rc"] == 0 and set(f["states"].values()) == {"complete"}, f["output"]


def test_freeze_of_a_container_member_at_work_contaminates_the_attempt_and_it_is_retried(tmp_path: Path) -> None:
    """SIGSTOP of a `container` member (its runner and the user's command) for 8 s: the
    runner's heartbeat thread (5 s) sees it; kept, flagged, retried, the retry completes."""
    f = container_freeze(tmp_path)
    clean(f)
    assert f["unflagged_contaminated"] == 0, f["attempts"]
    first, *rest = f["attempts"]
    assert first["preempted"] and (first["flag"] or "").startswith("stalled: the runner"), f["attempts"]
    assert first["contaminated"] == first["flag"]
    assert rest and not rest[-1]["preempted"] and not rest[-1]["flag"], f["attempts"]
    assert f["rc"] == 0 and set(f["states"].values()) == {"complete"}, f["output"]


def test_members_stop_at_deadline_plus_grace_with_no_runner_and_no_supervisor(tmp_path: Path) -> None:
    """Runner and supervisors SIGKILLed, nobody runs it again: the host's deadline (coreutils
    `timeout` around each member) ends the group at deadline + grace, not 40 s later."""
    f = runner_sigkill_no_rerun(tmp_path)
    clean(f)
    assert f["faults"][0]["supervisors_killed"] == 2, f["faults"]
    assert f["billing_tail_s"] is not None and f["billing_tail_s"] <= GRACE_S + 3, f["faults"]
    assert f["open_before_rerun"] and f["open_runs"] == [], f  # the next run closed it


def _one_clear_message(out: str, path: str) -> None:
    assert "Traceback" not in out, out
    assert path in out.replace("\n", ""), out


def test_a_corrupt_run_ledger_ends_the_run_with_its_name_and_the_next_run_does_not_hang(
        tmp_path: Path) -> None:
    f = corrupt_run_ledger(tmp_path)
    clean(f)
    assert f["rc"] == EXIT_INCOMPLETE and f["rc_again"] == EXIT_INCOMPLETE, f
    for out in (f["output"], f["output_again"]):
        _one_clear_message(out, "run.json")
        assert "is corrupt" in out, out
    assert "nothing was started" in f["output_again"], f["output_again"]
    assert f["instances_on"] == []


@pytest.mark.parametrize("name", STATE_FILES)
def test_a_corrupt_state_file_is_named_with_its_fix_and_nothing_starts(tmp_path: Path, name: str) -> None:
    f = corrupt_state_file(tmp_path, name)
    clean(f)
    assert f["rc"] == EXIT_INCOMPLETE, f["output"]
    _one_clear_message(f["output"], name)
    assert "nothing was started" in f["output"] and "remove" in f["output"], f["output"]
    assert f["results"] == [], f


def test_a_full_state_disk_ends_the_run_with_a_clear_error_and_no_orphan(tmp_path: Path) -> None:
    f = state_disk_full(tmp_path)
    clean(f)
    assert f["rc"] == EXIT_INCOMPLETE, f["output"]
    _one_clear_message(f["output"], "cloud.db")
    assert "free space" in f["output"], f["output"]
    assert f["open_runs"] == [], f  # the results store is fine: the run is closed


def test_a_sigkilled_launcher_leaves_a_marker_and_every_attempt_says_why_it_ended(tmp_path: Path) -> None:
    f = launcher_kills(tmp_path)
    clean(f)
    assert f["rc"] == 0 and set(f["states"].values()) == {"complete"}, f["output"]
    attempts = f["attempts"]
    assert [a["attempt"] for a in attempts] == [1, 2, 3] and attempts[-1]["launches"] == 3, attempts
    killed, termed, done = attempts
    assert killed["preempted"] and "SIGKILL" in killed["stop_reason"], attempts  # from the ledger
    assert termed["preempted"] and termed["stop_reason"] == "SIGTERM", attempts
    assert not done["preempted"] and done["stop_reason"] == "finished", attempts

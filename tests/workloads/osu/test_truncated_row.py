"""A last OSU row cut mid-line (no newline) is never a value, even when mpiexec exits 0.

"4194304   1076.29" cut after "107" still looks like a row: the parser holds a line until
its newline arrives, and the launcher stores only rows that were complete.
"""

from __future__ import annotations

import pytest

from tests.workloads.osu.conftest import make_group
from workloads.osu.parse import OsuParseError, OsuStream, parse

# osu_bibw v7.5 as printed, cut inside the value of the last size (the C binary's output)
CUT = ("# OSU MPI Bi-Directional Bandwidth Test v7.5\n# Datatype: MPI_CHAR.\n"
       "# Size      Bandwidth (MB/s)\n1                       2.96\n2                       5.95\n"
       "4194304               107")


def test_stream_holds_a_line_until_its_newline():
    stream = OsuStream()
    rows = [stream.feed(line) for line in CUT.splitlines(keepends=True)]
    assert [r for r in rows if r] == [(1, 2.96), (2, 5.95)]
    assert stream.unfinished == "4194304               107"
    with pytest.raises(OsuParseError, match="ends mid-line"):
        stream.result()
    assert stream.result(partial=True).rows == [(1, 2.96), (2, 5.95)]
    # the same line arriving in two reads is one row once its newline comes
    stream = OsuStream()
    for line in CUT.splitlines(keepends=True)[:-1]:
        stream.feed(line)
    stream.feed("4194304          10")
    assert stream.feed("76.29\n") == (4194304, 1076.29)


def test_whole_text_without_final_newline_is_refused_not_truncated():
    with pytest.raises(OsuParseError, match="ends mid-line"):
        parse(CUT)
    assert parse(CUT, partial=True).rows == [(1, 2.96), (2, 5.95)]
    assert parse(CUT + "\n").rows[-1] == (4194304, 107.0)  # with its newline it is a row


FAKE_OSU = """#!/bin/sh
# stands in for the OSU C binary: rank 0 prints rows, the last cut mid-line; exit 0
[ "${PMI_RANK:-0}" = "0" ] || exit 0
printf '%s' "$SPOTBENCH_TEST_OSU_TEXT"
exit 0
"""


@pytest.mark.slow
def test_launcher_stores_no_value_from_a_cut_row(tmp_path, done_server):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "osu_bibw"
    fake.write_text(FAKE_OSU)
    fake.chmod(0o755)
    group = make_group(tmp_path, done_server.url,
                       {"benchmarks": ["bibw"], "max_size": 4194304, "implementation": "osu-c",
                            "stall_s": 0})  # a loaded machine's pause is not this test's subject
    for env in group.envs.values():
        env["PATH"] = f"{bindir}:{env['PATH']}"
        env["SPOTBENCH_TEST_OSU_TEXT"] = CUT
    try:
        group.start("peer")
        launcher = group.start("launcher")
        out, _ = launcher.communicate(timeout=120)
    finally:
        group.stop_all()
    records = group.store.read(group.run_id)
    # a loaded machine once left only the "stopped before any value" marker: say what was stored
    assert all("size_bytes" in r.metadata for r in records), ([(r.metric, r.metadata) for r in records], out)
    sizes = [r.metadata["size_bytes"] for r in records]
    assert sizes == [1, 2], out  # 4194304 → "107" is not stored
    assert all(r.preempted for r in records)  # an incomplete run: out of the averages
    assert "ends mid-line" in records[0].metadata["interrupted"], records[0].metadata

"""The report's failures banner: every group whose command failed, why, and the tail of
its stderr. It goes first in the report (a failure must not hide under the charts); it adds
nothing when no group failed. The values of a failed attempt are never charted
(`spotbench.failures`)."""

from __future__ import annotations

import pandas as pd

from spotbench.failures import failures
from spotbench.report.document import Document, Heading, Para


def section(df: pd.DataFrame, doc: Document) -> list[str]:
    """Add the banner to `doc`; returns one line per failed group (for a summary)."""
    found = failures(df.itertuples(index=False))
    if not found:
        return []
    lines = [f.line() for f in sorted(found.values(), key=lambda f: (f.run, f.group))]
    doc.add(Heading(f"Failures: {len(found)} group(s) failed"))
    doc.add(Para("These groups' commands could not start, exited non-zero or reported no "
                 "metric; they are not retried in the same run and none of their values is "
                 "in the tables below."))
    for f in sorted(found.values(), key=lambda f: (f.run, f.group)):
        text = f"Run {f.run}, group {f.group}: {f.reason}."
        if f.stderr_tail:
            text += " Its stderr ends with: " + " ⏎ ".join(f.stderr_tail.splitlines()[-5:])
        doc.add(Para(text))
    return lines

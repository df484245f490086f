from __future__ import annotations

import pandas as pd

from spotbench.report.document import Heading, Para


def section(df, doc, out_dir):
    ours = df[df["workload"] == "toy"]
    if ours.empty:
        return [], []
    doc.add(Heading("Toy counts"), Para(f"toy counted {ours['value'].sum():g} items"))
    return [], [pd.DataFrame({"table": ["toy"], "value": [ours["value"].sum()]})]

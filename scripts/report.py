#!/usr/bin/env python3
"""Write a sweep's report (cron/CI): same as `spotbench report RESULTS_URL …`.

A thin twin of the CLI: every option and environment variable of the command applies.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from spotbench.cli import main  # noqa: E402

if __name__ == "__main__":
    main(args=["report", *sys.argv[1:]], prog_name=Path(__file__).name)

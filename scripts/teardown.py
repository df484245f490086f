#!/usr/bin/env python3
"""Tear a sweep down for cron/CI: pulumi destroy, then remove every orphan labelled managed-by=spotbench (dry run unless --yes). Same options as `spotbench teardown`; e.g. `scripts/teardown.py examples/gcp-osu.yaml --yes`.

A thin twin of the CLI: every option and environment variable of the command applies.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from spotbench.cli import main  # noqa: E402

if __name__ == "__main__":
    main(args=["teardown", *sys.argv[1:]], prog_name=Path(__file__).name)

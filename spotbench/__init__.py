"""spotbench: benchmark sweeps on spot/preemptible VMs, priced and reported."""

from pathlib import Path

__version__ = "0.1.0"

# The folder holding the `spotbench`, `functions`, `workloads` and `infra` packages: the
# checkout, or site-packages once installed. Find the project's other parts from here.
PROJECT_ROOT = Path(__file__).resolve().parent.parent

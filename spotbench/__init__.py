"""spotbench: benchmark sweeps on spot/preemptible VMs, priced and reported."""

__version__ = "0.1.0"

"""The workloads spotbench can run: one package each (entrypoint + `descriptor.py`).

Importing this package loads nothing: what a member runs (`python -m workloads.osu`) pulls
in its own package only. The list of workloads is `workloads.registry.WORKLOADS`.
"""

"""A toy workload for tests/workloads/test_a_new_workload.py: copied into a tree's
`workloads/toy/` beside one registry line."""

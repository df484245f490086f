"""Distributed TensorFlow training of the classic MNIST CNN (spec workload `tf-mnist`).

    python -m workloads.tf_mnist        # role, peers and parameters from SPOTBENCH_CONTEXT

Strategies: `parameter_server` (chief + ps + workers, `ClusterCoordinator`; see `ps.py`)
and `multi_worker_mirrored` (all-reduce with a custom `strategy.run` loop; `mirrored.py`).
"""

"""The torch workload's pieces without training: CIFAR-10's binary format, the spec's
checks of a torch config, the torchrun command a member builds."""

from __future__ import annotations

import numpy as np
import pytest

from spotbench.member import MemberContext
from spotbench.spec import SpecError, load_spec
from tests.workloads.torch_cifar.cifar_files import make_cifar
from workloads.torch_cifar import data, launch
from workloads.torch_cifar.descriptor import TorchParams


def test_torch_cifar_binary_round_trip(tmp_path):
    images = np.arange(3 * 3072, dtype=np.uint32).reshape(3, 3, 32, 32) % 256
    write = tmp_path / "data_batch_1.bin"
    data.write_bin(write, images, np.array([0, 9, 4]))
    assert write.stat().st_size == 3 * 3073  # label byte + 3072 pixel bytes each
    got, labels = data.read_bin([write])
    assert labels.tolist() == [0, 9, 4]
    assert np.array_equal(got, images.astype(np.uint8))
    raw = write.read_bytes()
    assert raw[0] == 0 and raw[3073] == 9 and raw[1] == 0 and raw[2] == 1  # label, then red row 0


def test_torch_cifar_load_from_files_and_refusals(tmp_path):
    make_cifar(tmp_path / "c", train=100, test=20)
    (x, y), (vx, vy) = data.load("cifar10", f"file://{tmp_path / 'c'}", train_examples=64)
    assert x.shape == (64, 3, 32, 32) and y.shape == (64,) and vx.shape == (20, 3, 32, 32)
    assert abs(float(x.mean())) < 1.5  # normalised by CIFAR's channel statistics
    with pytest.raises(FileNotFoundError, match="dataset_url"):
        data.load("cifar10", str(tmp_path / "missing"))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "data_batch_1.bin").write_bytes(b"\x00" * 100)
    (tmp_path / "bad" / "test_batch.bin").write_bytes(b"\x00" * 3073)
    with pytest.raises(ValueError, match="3073-byte"):
        data.load("cifar10", str(tmp_path / "bad"))


@pytest.mark.parametrize("workload, words", [
    ({"mode": "pipeline", "workers": 3}, "2 stages on 2 processes"),
    ({"mode": "pipeline", "workers": 1, "processes_per_vm": 4}, "workers × processes_per_vm"),
    ({"mode": "pipeline", "batch_size": 30, "microbatches": 4}, "micro-batches"),
    ({"depth": 12}, r"6n \+ 4"),
])
def test_torch_spec_refuses_shapes_it_cannot_train(workload, words):
    with pytest.raises(SpecError, match=words):
        load_spec({"name": "t", "cloud": "local", "workload": {"name": "torch", **workload}})


def _ctx(workers: int, index: int, **params) -> MemberContext:
    spec = load_spec({"name": "t", "cloud": "local",
                      "workload": {"name": "torch", "workers": workers, **params}})
    group = spec.plan()[0]
    addresses = {m.name: (f"10.0.0.{m.index + 1}", 29400) for m in group.members}
    return MemberContext.for_member(group, group.members[index], addresses=addresses,
                                    cloud="local", results_url="file:///r", done_url=None)


def test_torch_torchrun_command_rendezvous_at_the_leader():
    """Every member's torchrun: c10d at worker 0's address and port, is_host only there,
    its own address as --local-addr; pipeline spreads its 2 stages over the workers."""
    params = TorchParams(workers=3)
    lead = launch.torchrun_command(_ctx(3, 0), params, 2)
    other = launch.torchrun_command(_ctx(3, 2), params, 2)
    assert "--rdzv-backend=c10d" in lead and "--nnodes=3" in lead and "--nproc-per-node=2" in lead
    assert "--rdzv-endpoint=10.0.0.1:29400" in lead and "--rdzv-endpoint=10.0.0.1:29400" in other
    assert "--rdzv-conf=is_host=true" in lead and "--rdzv-conf=is_host=false" in other
    assert "--local-addr=10.0.0.3" in other
    assert lead[lead.index("-m", 2) + 1] == "workloads.torch_cifar.train"
    assert launch.processes(TorchParams(mode="pipeline", workers=2)) == 1
    assert launch.processes(TorchParams(mode="pipeline", workers=1)) == 2
    assert launch.processes(TorchParams(processes_per_vm=3)) == 3

"""The `torch` workload: PyTorch training of a small Wide ResNet on CIFAR-10-shaped data.

    mode: ddp        DistributedDataParallel over every process of every VM (NCCL on GPUs,
                     gloo on CPUs): the global batch split across copies of the network
    mode: pipeline   model parallel: the network in two stages on two ranks (two GPUs of a VM,
                     or two VMs), activations passed between them over micro-batches
                     (torch.distributed.pipelining, GPipe schedule)

Each member (VM) runs `torchrun` (`launch.py`: c10d rendezvous at worker 0, the leader);
`train.py` is the training process; `__main__.py` the member. Metrics: images/s, epoch time,
epochs/min, time to the target epochs, validation accuracy. With `checkpoint_every` the
leader keeps the newest checkpoint in the group's folder of the results store, so a
preempted group resumes. Data: CIFAR-10's binary files (`data.py`; the images ship them),
or `dataset: synthetic`.
"""

"""A Wide ResNet (Zagoruyko & Komodakis, 2016: WRN-d-k) for 32×32 RGB images, and its split
into two pipeline stages.

WRN-d-k: a 3×3 stem of 16 channels, three groups of (d − 4) / 6 pre-activation basic blocks
with 16k, 32k and 64k channels (the 2nd and 3rd halve the resolution), BN-ReLU, global
average pooling, a linear layer. WRN-10-1 (the default here) has about 78k parameters and
trains on a CPU; the paper's WRN-28-10 has 36.5M.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    """Pre-activation basic block: BN-ReLU-conv3×3-BN-ReLU-conv3×3 plus the shortcut (a 1×1
    conv when the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.shortcut = None if cin == cout and stride == 1 else nn.Conv2d(cin, cout, 1, stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = F.relu(self.bn1(x))
        y = self.conv1(o)
        y = self.conv2(F.relu(self.bn2(y)))
        return y + (x if self.shortcut is None else self.shortcut(o))


def blocks_per_group(depth: int) -> int:
    if depth < 10 or (depth - 4) % 6:
        raise ValueError(f"depth {depth}: a Wide ResNet has depth 6n + 4 (10, 16, 22, 28, …)")
    return (depth - 4) // 6


def _group(cin: int, cout: int, n: int, stride: int) -> list[nn.Module]:
    return [Block(cin if i == 0 else cout, cout, stride if i == 0 else 1) for i in range(n)]


class Head(nn.Module):
    def __init__(self, channels: int, classes: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        self.fc = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(F.relu(self.bn(x)), 1).flatten(1)
        return self.fc(x)


def wide_resnet_stages(depth: int = 10, width: int = 1, classes: int = 10) -> list[nn.Sequential]:
    """The network as two stages: stem + group 1 + group 2 | group 3 + head. Stage 0's output
    (the activations passed between them) is 32k × 16 × 16 per image."""
    n = blocks_per_group(depth)
    w = [16, 16 * width, 32 * width, 64 * width]
    first = nn.Sequential(nn.Conv2d(3, w[0], 3, 1, 1, bias=False),
                          *_group(w[0], w[1], n, 1), *_group(w[1], w[2], n, 2))
    second = nn.Sequential(*_group(w[2], w[3], n, 2), Head(w[3], classes))
    for stage in (first, second):
        for m in stage.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
    return [first, second]


class WideResNet(nn.Module):
    """Both stages in one module (data-parallel mode, evaluation): state-dict keys
    `stages.0.…`, `stages.1.…`, the same as the pipeline's stages put together."""

    def __init__(self, depth: int = 10, width: int = 1, classes: int = 10):
        super().__init__()
        self.stages = nn.ModuleList(wide_resnet_stages(depth, width, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stages[1](self.stages[0](x))

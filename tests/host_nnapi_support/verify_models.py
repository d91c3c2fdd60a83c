"""Small quantizable models for `invoke verify` tests (used as ``--model path/to/this.py:factory``).

``small_net`` has one of each operation family a torchvision classifier converts to: CONV_2D,
DEPTHWISE_CONV_2D, ADD (FloatFunctional), CONCATENATION (torch.cat), MAX_POOL_2D, AVERAGE_POOL_2D,
RESHAPE, FULLY_CONNECTED.  Small enough that a verify of all three modes takes seconds.
"""

import torch
from torch import nn
from torch.ao.nn.quantized import FloatFunctional


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu1 = nn.ReLU()
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.relu2 = nn.ReLU()
        self.pw = nn.Conv2d(8, 8, 1)
        self.skip = FloatFunctional()
        self.pool = nn.MaxPool2d(2)
        self.side = nn.Conv2d(8, 4, 1)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(12, 10)
        self.dequant = torch.ao.quantization.DeQuantStub()
        torch.manual_seed(0)
        with torch.no_grad():
            self.bn1.running_mean.uniform_(-0.2, 0.2)
            self.bn1.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        x = self.quant(x)
        x = self.relu1(self.bn1(self.conv1(x)))
        y = self.pw(self.relu2(self.dw(x)))
        x = self.skip.add(x, y)
        x = self.pool(x)
        x = torch.cat([x, self.side(x)], 1)  # plain cat: FloatFunctional.cat is quantized::cat, which NNAPI lacks
        x = self.gap(x).flatten(1)
        return self.dequant(self.fc(x))

    def fuse_model(self, is_qat=False):
        torch.ao.quantization.fuse_modules(self, [["conv1", "bn1", "relu1"], ["dw", "relu2"]], inplace=True)


def small_net():
    return SmallNet()


class Hardtanh6(nn.Module):
    """conv -> hardtanh(0, 6): PyTorch's quantized hardtanh returns wrongly ordered data on the channels_last
    tensors a converted model runs on (a CPU kernel bug); the NNAPI model computes it right."""

    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv = nn.Conv2d(3, 4, 3, stride=4, padding=1)
        self.act = nn.Hardtanh(0.0, 6.0)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 5)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        x = self.act(self.conv(self.quant(x)))
        return self.dequant(self.fc(self.gap(x).flatten(1)))


def hardtanh6():
    return Hardtanh6()


class PlainAdd(nn.Module):
    """A quantizable-looking model with a plain ``x + y``: eager-mode quantization needs FloatFunctional."""

    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.a = nn.Conv2d(3, 4, 3, stride=4, padding=1)
        self.b = nn.Conv2d(3, 4, 3, stride=4, padding=1)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        x = self.quant(x)
        return self.dequant(self.a(x) + self.b(x))


def plain_add():
    return PlainAdd()


class BranchingAdd(PlainAdd):
    """A plain ``x + y`` and Python branching on a tensor value: torch.fx cannot trace it, so neither eager mode
    nor FX graph mode can quantize it."""

    def forward(self, x):
        y = self.a(x) + self.b(x)
        return y if float(y.mean()) > -1e9 else -y


def branching_add():
    return BranchingAdd()


class InPlace(nn.Module):
    """A residual block written as torchvision's resnet writes it: ReLU(inplace=True) and ``out += identity``."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=4, padding=1)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        identity = self.relu(self.stem(x))
        out = self.conv(identity)
        out += identity
        return self.relu(out)


def in_place():
    return InPlace()


def conv_bn():
    """A plain factory model (no fuse_model): Conv-BatchNorm-ReLU blocks and a classifier."""
    return nn.Sequential(nn.Conv2d(3, 8, 3, stride=4, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))


class TwoHeads(nn.Module):
    """Two outputs (a tuple): both are converted, shipped and compared."""

    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv = nn.Conv2d(3, 6, 3, stride=4, padding=1)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Linear(6, 5)
        self.fc2 = nn.Linear(6, 3)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        x = self.gap(self.conv(self.quant(x))).flatten(1)
        return self.dequant(self.fc1(x)), self.dequant(self.fc2(x))


def two_heads():
    return TwoHeads()

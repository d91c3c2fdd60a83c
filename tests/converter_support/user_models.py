"""User model factories for `--model path/to/file.py:factory` tests."""

import torch
from torch import nn


class Tiny(nn.Module):
    """A small quantizable conv net (quant/dequant stubs, fusable conv+bn+relu)."""

    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        x = self.quant(x)
        x = self.relu(self.bn(self.conv(x)))
        x = self.pool(x).flatten(1)
        return self.dequant(self.fc(x))

    def fuse_model(self, is_qat=False):
        torch.ao.quantization.fuse_modules(self, [["conv", "bn", "relu"]], inplace=True)


def tiny():
    return Tiny()


class WithSin(nn.Module):
    """Uses aten::sin, which the NNAPI converter does not support."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.sin(self.conv(x))


def with_sin():
    return WithSin()


class Dead(Tiny):
    """Every activation after the first conv is zero: quantization collapses."""

    def __init__(self):
        super().__init__()
        with torch.no_grad():
            self.conv.weight.fill_(0.0)


def dead():
    return Dead()


def not_a_module():
    return 42

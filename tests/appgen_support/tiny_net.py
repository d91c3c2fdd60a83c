"""A tiny ImageNet-shaped classifier (224x224 RGB -> 1000 classes) that `invoke convert` turns into all three
quantization modes in seconds, so the make-app tests can render every variant quickly."""

import torch


class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, stride=4, padding=1),
            torch.nn.ReLU(),
            torch.nn.Conv2d(8, 16, 3, stride=4, padding=1),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = torch.nn.Linear(16, 1000)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def tiny_net():
    torch.manual_seed(0)
    return TinyNet()

"""Factories of the zoo's models that `invoke convert --model` does not list by name (benchmarks/zoo_table.py).

Plain torchvision models (random weights, no download) and two small non-image models built from torch.nn: a
transformer encoder on token ids (a larger one of the tests' ``Tokens``, tests/converter_support/user_models.py) and
a 1-D convolution audio classifier; each declares its example inputs next to its factory
(``<factory>_example_inputs``, docs/convert.md).
"""

import sys
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # loaded by path (--model benchmarks/zoo_models.py:...): the tests' model is one import away
    sys.path.insert(0, str(ROOT))

from tests.converter_support.user_models import Tokens  # noqa: E402 - the one definition of the token model


def _tv(name: str, **kwargs):
    import torchvision.models as tvm

    return getattr(tvm, name)(weights=None, **kwargs)


def _seg(name: str):
    import torchvision.models.segmentation as tvs

    return getattr(tvs, name)(weights=None, weights_backbone=None)


def mobilenet_v3_small():
    return _tv("mobilenet_v3_small")


def squeezenet1_1():
    return _tv("squeezenet1_1")


def efficientnet_b0():
    return _tv("efficientnet_b0")


def mnasnet1_0():
    return _tv("mnasnet1_0")


def regnet_y_400mf():
    return _tv("regnet_y_400mf")


def convnext_tiny():
    return _tv("convnext_tiny")


def vit_b_16():
    """torchvision's ViT-B/16 with its classification head drawn at random: torchvision initialises that head to
    zeros (torchvision 0.29.1, models/vision_transformer.py lines 265-266, ``nn.init.zeros_(self.heads.head.weight)``
    and its bias), so untrained every output is 0 and convert rightly refuses the constant output.  The zoo runs
    random weights throughout; a trained head is what a user brings (--weights)."""
    model = _tv("vit_b_16")
    with torch.no_grad():
        torch.manual_seed(0)
        nn.init.normal_(model.heads.head.weight, std=0.02)
    return model


def swin_t():
    return _tv("swin_t")


def lraspp_mobilenet_v3_large():
    return _seg("lraspp_mobilenet_v3_large")


def deeplabv3_mobilenet_v3_large():
    return _seg("deeplabv3_mobilenet_v3_large")


VOCAB, TOKENS = 1000, 32


def token_encoder():
    """A small transformer encoder classifying a sequence of token ids ([1, 32] int64 -> [1, 4] scores)."""
    return Tokens(vocab=VOCAB, width=64, heads=4, feedforward=128, layers=2, classes=4)


def token_encoder_example_inputs():
    return (torch.randint(0, VOCAB, (1, TOKENS)),)


SAMPLES = 16000  # one second at 16 kHz


class AudioClassifier(nn.Module):
    """A 1-D convolution classifier of raw audio ([1, 1, 16000] float -> [1, 10] scores)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 16, 80, stride=16), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(16, 32, 3), nn.BatchNorm1d(32), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(32, 64, 3), nn.BatchNorm1d(64), nn.ReLU(), nn.AdaptiveAvgPool1d(1))
        self.head = nn.Linear(64, 10)

    def forward(self, audio):
        return self.head(self.features(audio).flatten(1))


def audio_classifier():
    return AudioClassifier()


def audio_classifier_example_inputs():
    return (torch.randn(1, 1, SAMPLES),)

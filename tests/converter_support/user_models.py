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


class OneChannel(nn.Module):
    """Expects grayscale input: torchdroid's 3-channel images do not fit (a shape mismatch, not a tracing problem)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)

    def forward(self, x):
        return self.conv(x).mean(dim=(2, 3))


def one_channel():
    return OneChannel()


class PausingTiny(Tiny):
    """Tiny, but its eager forward on a batch (only calibration calls it so) announces itself and waits.

    With ``TD_TEST_PAUSE_DIR`` set, it writes ``calibrating`` there and sleeps, so a test can kill the run
    at a known point (during calibration, after the modes that need none).  Scripted or traced copies
    never pause (``torch.jit.unused``; tracing runs on a batch of one).
    """

    def forward(self, x):
        if not torch.jit.is_scripting() and x.shape[0] > 1:
            self.pause()
        x = self.quant(x)
        x = self.relu(self.bn(self.conv(x)))
        x = self.pool(x).flatten(1)
        return self.dequant(self.fc(x))

    @torch.jit.unused
    def pause(self):
        import os
        import pathlib
        import time

        where = os.environ.get("TD_TEST_PAUSE_DIR")
        if where:
            pathlib.Path(where, "calibrating").write_text(str(os.getpid()))
            time.sleep(float(os.environ.get("TD_TEST_PAUSE_SECONDS", "60")))


def pausing_tiny():
    return PausingTiny()


class FailsCalibrating(Tiny):
    """Tiny, but its eager forward on a batch (only calibration calls it so) raises: quant_none converts,
    the quantized modes fail while calibrating (scripted or traced copies never raise)."""

    def forward(self, x):
        if not torch.jit.is_scripting() and x.shape[0] > 1:
            self.fail()
        return super().forward(x)

    @torch.jit.unused
    def fail(self):
        raise RuntimeError("this model refuses batches (test)")


def fails_calibrating():
    return FailsCalibrating()


class ConstantWhenScripted(Tiny):
    """Tiny whose scripted copies output zeros: traced and eager runs (NNAPI conversion, calibration) are
    normal, the host check of the saved CPU model finds a constant output."""

    def forward(self, x):
        x = self.quant(x)
        x = self.relu(self.bn(self.conv(x)))
        x = self.dequant(self.fc(self.pool(x).flatten(1)))
        if torch.jit.is_scripting():
            return x * 0.0
        return x


def constant_when_scripted():
    return ConstantWhenScripted()


class TinyHardswish(Tiny):
    """Tiny with MobileNetV3's activations (hardswish, and hardsigmoid in a squeeze-excite gate): quantizable and
    fine on the CPU, but torch's NNAPI converter has no conversion for either."""

    def __init__(self):
        super().__init__()
        self.act = nn.Hardswish()
        self.gate = nn.Hardsigmoid()
        self.scale = torch.ao.nn.quantized.FloatFunctional()

    def forward(self, x):
        x = self.quant(x)
        x = self.act(self.bn(self.conv(x)))
        x = self.scale.mul(x, self.gate(x))
        x = self.pool(x).flatten(1)
        return self.dequant(self.fc(x))

    def fuse_model(self, is_qat=False):
        torch.ao.quantization.fuse_modules(self, [["conv", "bn"]], inplace=True)


def tiny_hardswish():
    return TinyHardswish()


class FeatureMap(nn.Module):
    """A segmentation-like model: its output is a [N, classes, H, W] map, not [N, classes] logits."""

    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.relu = nn.ReLU()
        self.head = nn.Conv2d(8, 5, 1)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        return self.dequant(self.head(self.relu(self.conv(self.quant(x)))))


def feature_map():
    return FeatureMap()


class TwoOutputs(Tiny):
    """Tiny with a second output: (logits [N, 10], pooled features [N, 8])."""

    def forward(self, x):
        x = self.quant(x)
        x = self.relu(self.bn(self.conv(x)))
        f = self.pool(x).flatten(1)
        return self.dequant(self.fc(f)), self.dequant(f)


def two_outputs():
    return TwoOutputs()


class DetectionLike(nn.Module):
    """A detection-style head: (boxes [N, A, 4], scores [N, A, classes]) from a feature map."""

    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv = nn.Conv2d(3, 8, 3, stride=4, padding=1)
        self.relu = nn.ReLU()
        self.boxes = nn.Conv2d(8, 4, 1)
        self.scores = nn.Conv2d(8, 3, 1)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        f = self.relu(self.conv(self.quant(x)))
        boxes = self.dequant(self.boxes(f)).flatten(2).transpose(1, 2)
        scores = self.dequant(self.scores(f)).flatten(2).transpose(1, 2)
        return boxes, scores


def detection_like():
    return DetectionLike()


class NanWeights(Tiny):
    """Tiny with one NaN in its classifier's weights: every output it gives is NaN."""

    def __init__(self):
        super().__init__()
        with torch.no_grad():
            self.fc.weight[0, 0] = float("nan")


def nan_weights():
    return NanWeights()


class InfWeights(Tiny):
    """Tiny with an infinite bias in its classifier."""

    def __init__(self):
        super().__init__()
        with torch.no_grad():
            self.fc.bias[0] = float("inf")


def inf_weights():
    return InfWeights()


class Overflows(Tiny):
    """Finite weights, but forward() overflows float32: every output is infinite."""

    def forward(self, x):
        return super().forward(x) * 1e30 * 1e30


def overflows():
    return Overflows()


class NanWhenScripted(Tiny):
    """Tiny whose scripted copies output NaN: eager and traced runs are finite, the host check of the saved CPU model
    (after its file is written) finds the NaN."""

    def forward(self, x):
        x = self.quant(x)
        x = self.relu(self.bn(self.conv(x)))
        x = self.dequant(self.fc(self.pool(x).flatten(1)))
        if torch.jit.is_scripting():
            return x * float("nan")
        return x


def nan_when_scripted():
    return NanWhenScripted()


class OneImageOnly(Tiny):
    """Tiny whose forward takes one image only (``view(1, -1)``): torch.export captures it for that input, never with
    a free batch dimension."""

    def forward(self, x):
        x = self.quant(x)
        x = self.relu(self.bn(self.conv(x)))
        return self.dequant(self.fc(self.pool(x).view(1, -1)))


def one_image_only():
    return OneImageOnly()


class Segmenter(nn.Module):
    """A segmentation-like head: ``{"out": per-pixel scores upsampled to the input, "aux": per-image scores}``; the
    bilinear upsampling runs in float after the int8 program's last dequantize (torchvision's segmentation models)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=4, padding=1)
        self.relu = nn.ReLU()
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        features = self.relu(self.conv(x))
        out = nn.functional.interpolate(self.head(features), size=x.shape[-2:], mode="bilinear", align_corners=False)
        return {"out": out, "aux": features.mean(dim=(2, 3))}


def segmenter():
    return Segmenter()


class Tokens(nn.Module):
    """Token ids in ([1, T] int64), class scores out: an embedding, ``layers`` transformer encoder layers, the mean
    over the tokens, a linear head.  The defaults are the tests' small one; benchmarks/zoo_models.py's
    ``token_encoder`` is a larger one of this class (one definition for both)."""

    def __init__(self, vocab: int = 100, width: int = 16, heads: int = 2, feedforward: int = 32, layers: int = 1,
                 classes: int = 5):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=feedforward, batch_first=True, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, classes)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)).mean(dim=1))


def tokens():
    return Tokens()


def tokens_example_inputs():
    """The inputs `tokens` takes, declared beside its factory (docs/convert.md)."""
    return (torch.randint(0, 100, (1, 16)),)


class Audio(nn.Module):
    """A 1-D conv audio classifier: a waveform in ([1, 1, 256] float32), class scores out; plain adds between
    activations (a residual), so its quantized modes need FX graph mode."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(1, 8, 9, stride=4, padding=4)
        self.conv2 = nn.Conv1d(8, 8, 3, padding=1)
        self.head = nn.Linear(8, 4)

    def forward(self, audio):
        x = self.conv1(audio).relu()
        x = x + self.conv2(x).relu()
        return self.head(x.mean(dim=2))


def audio():
    return Audio()


def audio_example_inputs():
    """The waveform `audio` takes, declared beside its factory (docs/convert.md)."""
    return (torch.randn(1, 1, 256),)


class Features(nn.Module):
    """A float feature vector in ([1, 32]), scores out: what torch's NNAPI converter takes beyond an image."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def features():
    return Features()


def features_example_inputs():
    return (torch.randn(1, 32),)


class TwoFeatures(nn.Module):
    """Two float feature vectors in ([1, 32] and [1, 8]), scores out: two inputs torch's NNAPI converter takes."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 4)
        self.b = nn.Linear(8, 4)

    def forward(self, x, y):
        return self.a(x).relu() + self.b(y).relu()


def two_features():
    return TwoFeatures()


def two_features_example_inputs():
    return (torch.randn(1, 32), torch.randn(1, 8))


class TokensAndAudio(nn.Module):
    """Two inputs, declared only on the command line (--inputs): token ids [1, 8] and a waveform [1, 1, 64]."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.conv = nn.Conv1d(1, 8, 9, stride=4)
        self.head = nn.Linear(8, 3)

    def forward(self, tokens, audio):
        return self.head(self.embed(tokens).mean(dim=1) + self.conv(audio).relu().mean(dim=2))


def tokens_and_audio():
    return TokensAndAudio()


class CollapsesInInt8(nn.Module):
    """Outputs that vary by ~1e-4 around 100: fp32 keeps the variation, an int8 output grid (steps of ~0.4) cannot,
    so the int8 program's output is constant (its quantization collapsed) while the fp32 programs are fine."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=4, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(self.conv(x).relu().mean(dim=(2, 3))) * 1e-4 + 100.0


def collapses_in_int8():
    return CollapsesInInt8()


class Shrinks(nn.Module):
    """A factory's untrained network whose BatchNorm hides how it shrinks: every convolution's weights scaled by
    1e-2 (no bias), BatchNorm with its untrained statistics (mean 0, variance 1: the identity), so the activations
    shrink ~100x per layer, to the float floor by the last one, and int8 calibration collapses; the BatchNorm
    statistics estimated on the calibration inputs (as for torchvision's random weights) give unit-scale
    activations again."""

    def __init__(self):
        super().__init__()
        layers, channels = [], 3
        for _ in range(4):
            conv = nn.Conv2d(channels, 8, 3, stride=2, padding=1, bias=False)
            with torch.no_grad():
                conv.weight.mul_(1e-2)
            layers += [conv, nn.BatchNorm2d(8), nn.ReLU()]
            channels = 8
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(self.features(x).mean(dim=(2, 3)))


def shrinks():
    return Shrinks()


def shrinks_with_statistics():
    """:class:`Shrinks` with BatchNorm statistics as a factory that loads trained weights returns them (not the
    untrained init): never re-estimated."""
    model = Shrinks()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_var.fill_(1e-8)
            m.num_batches_tracked.fill_(100)
    return model

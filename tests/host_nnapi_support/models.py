"""Small models converted with torch's own NNAPI converter, for the host NNAPI tests."""

from __future__ import annotations

import contextlib
from typing import Callable, Dict, Tuple

import torch
from torch.backends._nnapi.prepare import convert_model_to_nnapi


@contextlib.contextmanager
def qengine(name: str = "qnnpack"):
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = old


def nhwc(t: torch.Tensor) -> torch.Tensor:
    t = t.contiguous(memory_format=torch.channels_last)
    t.nnapi_nhwc = True
    return t


def convert(module: torch.nn.Module, *inputs: torch.Tensor):
    """Trace and convert; returns the NNAPI TorchScript model."""
    with torch.no_grad():
        traced = torch.jit.trace(module, inputs if len(inputs) > 1 else inputs[0])
    return convert_model_to_nnapi(traced, list(inputs))


class Fn(torch.nn.Module):
    def __init__(self, fn: Callable, **params):
        super().__init__()
        self.fn = fn
        for k, v in params.items():
            setattr(self, k, v)

    def forward(self, *xs):
        return self.fn(self, *xs)


def float_cases() -> Dict[str, Tuple[torch.nn.Module, Tuple[torch.Tensor, ...]]]:
    """One model per float operation the serializer emits: name -> (module, example inputs).

    Module weights come from a fixed seed, not from whatever the global generator holds after the tests
    collected before this one."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return _float_cases()


def _float_cases() -> Dict[str, Tuple[torch.nn.Module, Tuple[torch.Tensor, ...]]]:
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    img = r(1, 4, 9, 9)
    conv = torch.nn.Conv2d(4, 6, 3, stride=2, padding=1)
    dw = torch.nn.Conv2d(4, 4, 3, padding=1, groups=4)
    tconv = torch.nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1)
    lin = torch.nn.Linear(8, 5)
    cases = {
        "conv2d_nchw": (conv, (img,)),
        "conv2d_nhwc": (conv, (nhwc(img),)),
        "depthwise_nhwc": (dw, (nhwc(img),)),
        "depthwise_nchw": (dw, (img,)),
        "conv2d_nobias_rect": (torch.nn.Conv2d(4, 2, (3, 1), stride=(1, 2), padding=(1, 0), bias=False), (nhwc(img),)),
        "transpose_conv2d": (tconv, (img,)),
        "linear": (lin, (r(3, 8),)),
        "addmm": (Fn(lambda s, x: torch.addmm(s.b, x, s.w), w=r(8, 5), b=r(5)), (r(2, 8),)),
        "add": (Fn(lambda s, x, y: x + y), (r(2, 3, 4, 4), r(2, 3, 4, 4))),
        "sub": (Fn(lambda s, x, y: x - y), (r(2, 3, 4, 4), r(2, 3, 4, 4))),
        "mul_broadcast": (Fn(lambda s, x, y: x * y), (r(2, 3, 4, 4), r(1, 3, 1, 4))),
        "div": (Fn(lambda s, x, y: x / y), (r(2, 5), r(2, 5).abs() + 0.5)),
        "add_nhwc_mixed": (Fn(lambda s, x, y: x + y), (nhwc(r(1, 3, 4, 4)), r(1, 3, 1, 1))),
        "relu": (torch.nn.ReLU(), (r(2, 3, 5, 5),)),
        "relu6": (torch.nn.ReLU6(), (r(2, 3, 5, 5) * 5,)),
        "hardtanh_relu1": (torch.nn.Hardtanh(-1.0, 1.0), (r(2, 7) * 3,)),
        "sigmoid": (torch.nn.Sigmoid(), (r(2, 7),)),
        "softmax": (torch.nn.Softmax(dim=1), (r(3, 7),)),
        "log_softmax": (torch.nn.LogSoftmax(dim=1), (r(3, 7),)),
        "prelu": (torch.nn.PReLU(), (r(2, 3, 4, 4),)),
        "prelu_channels_nhwc": (torch.nn.PReLU(3), (nhwc(r(1, 3, 4, 4)),)),
        "max_pool_padded": (torch.nn.MaxPool2d(3, stride=2, padding=1), (img,)),
        "avg_pool": (torch.nn.AvgPool2d(2), (nhwc(img[:, :, :8, :8]),)),
        "adaptive_avg_pool": (torch.nn.AdaptiveAvgPool2d(1), (nhwc(img),)),
        "mean": (Fn(lambda s, x: x.mean([2, 3])), (img,)),
        "mean_keepdim": (Fn(lambda s, x: x.mean([1], keepdim=True)), (img,)),
        "reshape": (Fn(lambda s, x: x.reshape(2, -1)), (r(2, 3, 4),)),
        "flatten": (Fn(lambda s, x: torch.flatten(x, 1)), (r(2, 3, 4, 5),)),
        "flatten_nhwc_1x1": (Fn(lambda s, x: torch.flatten(x, 1)), (nhwc(r(1, 6, 1, 1)),)),
        "unsqueeze": (Fn(lambda s, x: x.unsqueeze(1)), (r(2, 5),)),
        "slice": (Fn(lambda s, x: x[:, 1:4]), (r(2, 6, 3),)),
        "cat": (Fn(lambda s, x, y: torch.cat([x, y], 1)), (r(1, 2, 3, 3), r(1, 4, 3, 3))),
        "cat_nhwc": (Fn(lambda s, x, y: torch.cat([x, y], 1)), (nhwc(r(1, 2, 3, 3)), nhwc(r(1, 4, 3, 3)))),
        "upsample_nearest_size": (Fn(lambda s, x: torch.nn.functional.interpolate(x, size=(6, 8))), (r(1, 2, 3, 4),)),
        "quantize_dequantize": (Fn(lambda s, x: torch.quantize_per_tensor(x, 0.05, 128, torch.quint8).dequantize()),
                                (nhwc(r(1, 3, 4, 4)),)),
        "upsample_nearest_scale": (Fn(lambda s, x: torch.nn.functional.interpolate(x, scale_factor=2.0)),
                                   (nhwc(r(1, 2, 3, 4)),)),
    }
    for m, _ in cases.values():
        m.eval()
    return cases


def _calibrated(module: torch.nn.Module, example: torch.Tensor, qconfig_engine: str = "qnnpack") -> torch.nn.Module:
    from torch.ao.quantization import convert as q_convert
    from torch.ao.quantization import get_default_qconfig, prepare

    module.eval()
    module.qconfig = get_default_qconfig(qconfig_engine)
    prepared = prepare(module, inplace=False)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _ in range(4):
            prepared(example + 0.1 * torch.randn(example.shape, generator=g))
    return q_convert(prepared, inplace=False)


class _QWrap(torch.nn.Module):
    """QuantStub -> body -> DeQuantStub, later swapped to Identity like the NNAPI tutorial."""

    def __init__(self, body: torch.nn.Module):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.body = body
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        return self.dequant(self.body(self.quant(x)))


def quantized_core(body: torch.nn.Module, example: torch.Tensor):
    """Quantize ``body`` (qnnpack), strip quant/dequant; returns (quantized core, its quint8 input)."""
    with qengine("qnnpack"):
        q = _calibrated(_QWrap(body), example)
        quantizer = q.quant
        q.quant = torch.nn.Identity()
        q.dequant = torch.nn.Identity()
        qin = quantizer(example)
    return q.eval(), qin


class _TwoBranch(torch.nn.Module):
    def __init__(self, op: str):
        super().__init__()
        self.a = torch.nn.Conv2d(3, 4, 1)
        self.b = torch.nn.Conv2d(3, 4, 1)
        self.ff = torch.ao.nn.quantized.FloatFunctional()
        self.op = op

    def forward(self, x):
        a, b = self.a(x), self.b(x)
        if self.op == "add":
            return self.ff.add(a, b)
        if self.op == "add_relu":
            return self.ff.add_relu(a, b)
        return self.ff.mul(a, b)


def quant_cases() -> Dict[str, Tuple[torch.nn.Module, torch.Tensor]]:
    """One float body per quantized operation: name -> (float body, float example input (NCHW)).

    Weights from a fixed seed (see float_cases)."""
    with torch.random.fork_rng():
        torch.manual_seed(1)
        return _quant_cases()


def _quant_cases() -> Dict[str, Tuple[torch.nn.Module, torch.Tensor]]:
    g = torch.Generator().manual_seed(2)
    img = torch.rand(1, 3, 10, 10, generator=g) * 2 - 1
    conv_relu = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, stride=2, padding=1), torch.nn.ReLU())
    torch.ao.quantization.fuse_modules(conv_relu.eval(), [["0", "1"]], inplace=True)
    cases = {
        "qconv2d": (torch.nn.Conv2d(3, 6, 3, stride=2, padding=1), img),
        "qconv2d_relu": (conv_relu, img),
        "qdepthwise": (torch.nn.Conv2d(3, 3, 3, padding=1, groups=3), img),
        "qadd": (_TwoBranch("add"), img),
        "qadd_relu": (_TwoBranch("add_relu"), img),
        "qmul": (_TwoBranch("mul"), img),
        # a 10x10 kernel makes the linear layer's input 1x1 without pooling, whose QNNPACK requantization
        # is only emulated to 1 LSB (and would be amplified by the linear layer)
        "qlinear": (torch.nn.Sequential(torch.nn.Conv2d(3, 8, 10), torch.nn.Flatten(), torch.nn.Linear(8, 10)), img),
        "qadaptive_avg_pool": (torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.AdaptiveAvgPool2d(1)), img),
        "qmax_pool": (torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.MaxPool2d(2)), img),
        "qrelu": (torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.ReLU()), img),
        "qflatten": (torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()), img),
    }
    return cases


def _realistic_init(model: torch.nn.Module, size: int) -> None:
    """Random weights whose activations neither vanish nor explode: BatchNorm statistics from data."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = None  # cumulative average over the passes below
            m.reset_running_stats()
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
        elif isinstance(m, torch.nn.Linear):
            torch.nn.init.normal_(m.weight, std=1.0 / m.in_features ** 0.5)
            torch.nn.init.uniform_(m.bias, -0.1, 0.1)
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.rand(4, 3, size, size) * 2 - 1)


def mobilenet_v2(mode: str, seed: int = 0, size: int = 224):
    """The NNAPI tutorial's MobileNetV2 conversion with random weights: (cpu scripted, nnapi model, input)."""
    import torchvision

    torch.manual_seed(seed)
    quantize_core = mode in ("core", "full")
    model = torchvision.models.quantization.mobilenet_v2(weights=None, quantize=False)
    _realistic_init(model, size)
    model.eval()
    model.fuse_model()
    model.classifier[0] = torch.nn.Identity()
    x = torch.rand(1, 3, size, size) * 2 - 1
    if not quantize_core:
        xi = nhwc(x)
        with torch.no_grad():
            traced = torch.jit.trace(model, xi)
        return traced, convert_model_to_nnapi(traced, xi), x
    with qengine("qnnpack"):
        from torch.ao.quantization import convert as q_convert
        from torch.ao.quantization import get_default_qconfig, prepare

        model.qconfig = get_default_qconfig("qnnpack")
        prepare(model, inplace=True)
        with torch.no_grad():
            for _ in range(3):
                model(torch.rand(1, 3, size, size) * 2 - 1)
        q_convert(model, inplace=True)
        quantizer, dequantizer = model.quant, model.dequant
        model.quant = torch.nn.Identity()
        model.dequant = torch.nn.Identity()
        qx = nhwc(quantizer(x))
        with torch.no_grad():
            traced = torch.jit.trace(model, qx)
        nnapi = convert_model_to_nnapi(traced, qx)
        if mode == "core":
            wrapped_nnapi = torch.nn.Sequential(quantizer, nnapi, dequantizer)
            model.quant, model.dequant = quantizer, dequantizer
            with torch.no_grad():
                cpu = torch.jit.trace(model, x)
            return cpu, wrapped_nnapi, x
        return traced, nnapi, qx

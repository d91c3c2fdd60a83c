"""The app-facing model for fully quantized variants (imported lazily: it imports torch).

pytorch_android's Java API cannot build quantized tensors, and quant_full models
take a quantized input.  So make-app wraps each of the variant's models in
:class:`Uint8Input`: it takes uint8 NHWC values the app already mapped through
the lookup table (see :func:`appgen.assets.input_lut`), reinterprets them as a
quantized tensor with the manifest's scale and zero point (the table did the
normalisation and quantization), views them as NCHW with channels-last memory,
runs the model and dequantizes its output.

torch has no public call that makes a quantized tensor from its integers; the
values are put on the grid they already name, ``(q - zero_point) * scale``, and
quantized with ``torch.quantize_per_tensor``, which rounds each back to ``q``
(exact for every uint8 value, scale and zero point: tests/unit/test_app_model.py).
"""

from __future__ import annotations

from pathlib import Path

import torch

from toolchain.fsutil import save_torch_module


class Uint8Input(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module, scale: float, zero_point: int):
        super().__init__()
        self.inner = inner
        self.scale = float(scale)
        self.zero_point = int(zero_point)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        on_grid = (pixels.contiguous().to(torch.float32) - self.zero_point) * self.scale
        q = torch.quantize_per_tensor(on_grid, self.scale, self.zero_point, torch.quint8)
        out = self.inner(q.permute(0, 3, 1, 2))  # NCHW view of NHWC memory: channels_last, no copy
        if out.is_quantized:
            out = out.dequantize()
        return out


def wrap_uint8_input(src: Path, dst: Path, scale: float, zero_point: int) -> Path:
    """Script :class:`Uint8Input` around the TorchScript model ``src`` and save it to ``dst`` atomically.

    torch serialises into memory and Python writes the file, so a full disk is a clean NoSpaceError
    (torch's own file writer aborts the process there).
    """
    inner = torch.jit.load(str(src), map_location="cpu")
    scripted = torch.jit.script(Uint8Input(inner, scale, zero_point))
    save_torch_module(scripted, dst)
    return Path(dst)

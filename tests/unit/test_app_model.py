"""appgen.app_model.Uint8Input makes the quantized input of a quant_full model from the app's uint8 values through
torch's public API: the quantized tensor it hands the model holds exactly the app's integers, scale and zero point."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from appgen.app_model import Uint8Input  # noqa: E402

SCALES = [1e-6, 0.0037, 1 / 255, 0.0186, 0.02, 0.0123456, 0.5, 7.3, 1e3]


class Seen(torch.nn.Module):
    """The model's view of its input: its integers (NCHW), scale and zero point."""

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        ints = q.int_repr().to(torch.float64)
        return torch.cat([ints.reshape(-1), torch.tensor([q.q_scale(), float(q.q_zero_point())], dtype=torch.float64)])  # noqa: E501


@pytest.mark.parametrize("scripted", [False, True], ids=["eager", "scripted"])
def test_the_model_gets_the_app_integers_for_every_value_scale_and_zero_point(scripted):
    pixels = torch.arange(256, dtype=torch.uint8).reshape(1, 8, 8, 4)  # NHWC, every uint8 value once
    expected_ints = pixels.permute(0, 3, 1, 2).reshape(-1).to(torch.float64)
    for scale in SCALES:
        # the scripted graph is the eager one's: a few zero points per scale show it runs the same
        for zero_point in (0, 114, 255) if scripted else range(256):
            wrapped = Uint8Input(Seen(), scale, zero_point)
            if scripted:
                wrapped = torch.jit.script(wrapped)
            got = wrapped(pixels)
            assert torch.equal(got[:-2], expected_ints), (scale, zero_point)
            assert got[-2].item() == pytest.approx(scale, rel=1e-7) and got[-1].item() == zero_point

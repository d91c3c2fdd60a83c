"""What the generated app does to a camera frame, on the host: the references the app tests compare its Java with
(test-only: the product writes the sample image and the lookup table, the app's Java applies them)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence


def preprocess_float(image_path: Path, size: int, mean: Sequence[float], std: Sequence[float]):
    """Reference float pipeline on the host: centre-crop, resize, /255, normalise -> [1, 3, H, W] float32."""
    import numpy as np
    import torch

    pixels = load_pixels(image_path, size)
    x = torch.from_numpy(pixels.astype(np.float32)).permute(2, 0, 1) / 255.0
    m = torch.tensor(mean, dtype=torch.float32).view(3, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(3, 1, 1)
    return ((x - m) / s).unsqueeze(0)


def load_pixels(image_path: Path, size: int):
    """Centre-crop to a square and resize to ``size`` (like the app's frame): uint8 [H, W, 3] RGB."""
    import numpy as np
    from PIL import Image

    with Image.open(image_path) as im:
        im = im.convert("RGB")
        w, h = im.size
        side = min(w, h)
        left, top = (w - side) // 2, (h - side) // 2
        im = im.crop((left, top, left + side, top + side)).resize((size, size), Image.BILINEAR)
        return np.asarray(im, dtype=np.uint8).copy()


def apply_lut(pixels, lut: bytes):
    """What the app's Java does per frame: NHWC uint8 pixels -> NHWC uint8 quantized values [1, H, W, 3]."""
    import numpy as np

    table = np.frombuffer(lut, dtype=np.uint8).reshape(3, 256)
    out = np.empty_like(pixels)
    for c in range(3):
        out[..., c] = table[c][pixels[..., c]]
    return out[None, ...]

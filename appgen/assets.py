"""What goes into the app's assets besides the models: labels, sample image, input lookup table."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, List, Mapping, Sequence, Tuple

from toolchain.errors import ToolNotFound

log = logging.getLogger(__name__)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
SAMPLE_IMAGE = "grace_hopper.jpg"  # ships with matplotlib (mpl-data/sample_data): no download


def imagenet_labels() -> List[str]:
    """The 1000 ImageNet class names torchvision ships with its weights' metadata (no download)."""
    from torchvision.models import MobileNet_V2_Weights

    return list(MobileNet_V2_Weights.IMAGENET1K_V1.meta["categories"])


def labels_for(num_classes: int) -> Tuple[List[str], str]:
    """Labels for a classifier with ``num_classes`` outputs, and where they came from."""
    if num_classes == 1000:
        return imagenet_labels(), "ImageNet-1k categories from torchvision"
    return [f"class {i}" for i in range(num_classes)], f"generic names (the model has {num_classes} classes, not 1000)"


def sample_image() -> Path:
    try:
        from matplotlib import cbook
    except ImportError as e:
        raise ToolNotFound("matplotlib is not installed (its sample image is the app's bundled input)",
                           cause=str(e), remedy="pip install matplotlib") from e
    path = Path(cbook.get_sample_data(SAMPLE_IMAGE, asfileobj=False))
    if not path.is_file():
        raise ToolNotFound(f"matplotlib's sample image {path} is missing",
                           remedy="reinstall matplotlib: pip install --force-reinstall matplotlib")
    return path


def normalization(conversion: Mapping[str, Any]) -> Tuple[Tuple[float, ...], Tuple[float, ...]]:
    """Mean/std the model was converted with (the manifest's conversion record), else ImageNet's."""
    for holder in (conversion.get("normalization"), conversion.get("preprocess"), conversion):
        if isinstance(holder, Mapping) and holder.get("mean") and holder.get("std"):
            mean = tuple(float(x) for x in holder["mean"])
            std = tuple(float(x) for x in holder["std"])
            if len(mean) == 3 and len(std) == 3:
                return mean, std
    return IMAGENET_MEAN, IMAGENET_STD


def input_lut(mean: Sequence[float], std: Sequence[float], scale: float, zero_point: int) -> bytes:
    """The 3 x 256 byte table the app indexes: channel c, 8-bit value p -> quantized input value.

    q = clamp(round(((p / 255 - mean_c) / std_c) / scale + zero_point), 0, 255), computed with
    ``torch.quantize_per_tensor`` on the same float32 values the float pipeline produces, so indexing
    the table gives bit for bit what quantizing the normalised image would.
    """
    import torch

    p = torch.arange(256, dtype=torch.float32) / 255.0
    rows = []
    for c in range(3):
        x = (p - mean[c]) / std[c]
        rows.append(torch.quantize_per_tensor(x, float(scale), int(zero_point), torch.quint8).int_repr())
    return bytes(torch.cat(rows).tolist())

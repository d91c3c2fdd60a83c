"""Calibration inputs: a user's image directory or the built-in synthetic set.

Both are normalised exactly as torchvision's ImageNet classification transforms
do (resize, centre crop, to [0, 1], normalise with the ImageNet mean/std), so the
activation ranges the observers see are the ones real images produce.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from toolchain.errors import UsageError

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".webp", ".tif", ".tiff")
MIN_SIDE = 32  # smaller images, upscaled to the model's input, are flat colour fields: they calibrate nothing
MAX_PIXELS = 64 * 10**6  # larger than any phone photo; a larger image is a mistake (or a decompression bomb)
FEW_IMAGES = 8  # fewer calibration inputs than this: activation ranges are a guess (warned, recorded)
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class CalibrationSpec:
    source: str  # "synthetic" | "dir"
    count: int
    seed: int
    path: Optional[Path] = None
    files: Tuple[Path, ...] = ()
    digest: Optional[str] = None  # sha256 over the images' names and contents

    def key(self) -> Dict[str, Any]:
        return {"source": self.source, "count": self.count, "seed": self.seed, "digest": self.digest}

    def record(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"source": self.source, "count": self.count}
        if self.source == "dir":
            out.update(path=str(self.path), digest=self.digest)
        else:
            out.update(seed=self.seed, kind="smooth random colour fields with edges, ImageNet-normalised")
        warning = few_images_warning(self)
        if warning:
            out["warning"] = warning
        return out


def _whole_number(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    raise UsageError(f"calibration count must be a whole number (got {value!r})",
                     cause="from convert.calibration_count (invoke.yaml or INVOKE_CONVERT_CALIBRATION_COUNT)",
                     remedy="set convert.calibration_count to an integer >= 1, e.g. 32")


def parse_calibration(path: Optional[Path], count: Any, seed: int, warn: bool = True) -> CalibrationSpec:
    """The calibration set, checked; ``warn``: say when it is small (off for `all`'s check before the stages run)."""
    count = _whole_number(count)
    if count < 1:
        raise UsageError(f"calibration count must be at least 1 (got {count})", remedy="set convert.calibration_count >= 1")
    if path is None:
        spec = CalibrationSpec("synthetic", count, seed)
        if warn:
            warn_if_few(spec)
        return spec
    path = Path(path).expanduser()
    if not path.is_dir():
        raise UsageError(
            f"calibration directory {path} does not exist or is not a directory",
            remedy="pass --calibration DIR with images (jpg/png/...), or leave it out to use the built-in synthetic set",
        )
    try:
        files = sorted(p for p in path.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
    except PermissionError as e:
        raise UsageError(f"calibration directory {path} is not readable", cause=str(e), remedy="fix its permissions") from e
    if not files:
        raise UsageError(
            f"calibration directory {path} has no images",
            cause=f"looked for {', '.join(IMAGE_SUFFIXES)} files, recursively",
            remedy="put some representative images there (a few dozen is enough)",
        )
    files = files[:count]
    h = hashlib.sha256()
    for f in files:
        try:
            data = f.read_bytes()
        except OSError as e:
            raise UsageError(f"calibration image {f} is not readable", cause=str(e), remedy="fix or remove it") from e
        _check_image(f, data)
        h.update(str(f.relative_to(path)).encode())
        h.update(data)
    spec = CalibrationSpec("dir", len(files), seed, path.resolve(), tuple(files), h.hexdigest())
    if warn:
        warn_if_few(spec)
    return spec


def record_for(spec: CalibrationSpec, declared: Optional[str] = None) -> Dict[str, Any]:
    """What the manifest says of the calibration inputs: ``spec.record()``, or (``declared``: where the model's
    inputs were declared, ``net_example_inputs()`` or ``--inputs ...``) the inputs made from it, never the synthetic
    images it did not use."""
    if declared is None:
        return spec.record()
    out: Dict[str, Any] = {"source": "declared", "count": spec.count, "seed": spec.seed,
                           "kind": f"{declared} called under torch.manual_seed(seed + i), i < count"}
    warning = few_images_warning(spec, declared)
    return {**out, "warning": warning} if warning else out


def few_images_warning(spec: CalibrationSpec, source: Optional[str] = None) -> Optional[str]:
    """Why a calibration set is too small to trust, or None; ``source``: where the inputs came from when not the
    spec's images (a model's declared inputs)."""
    if spec.count >= FEW_IMAGES:
        return None
    return (f"calibration uses only {spec.count} input(s) ({source or spec.source}): the quantization ranges are estimated from "
            f"that little data and may clip real inputs; use at least {FEW_IMAGES} (a few dozen is better)")


def warn_if_few(spec: CalibrationSpec) -> None:
    text = few_images_warning(spec)
    if text:
        log.warning("warning: %s", text)


def _check_image(path: Path, data: bytes) -> None:
    """Decodable and large enough to say something about real inputs (header only: cheap, no torch)."""
    import io

    from PIL import Image, UnidentifiedImageError

    limit, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None  # the header only: the size check is below
    try:
        with Image.open(io.BytesIO(data)) as im:
            w, h = im.size
    except (UnidentifiedImageError, OSError, ValueError) as e:
        raise UsageError(f"calibration image {path} cannot be decoded", cause=str(e),
                         remedy="fix or remove it (or pass another --calibration directory)") from e
    finally:
        Image.MAX_IMAGE_PIXELS = limit
    if w * h > MAX_PIXELS:
        raise UsageError(
            f"calibration image {path} is {w}x{h} pixels ({w * h / 1e6:.0f} megapixels)",
            cause=f"decoding it takes {w * h * 3 / 2**20:.0f} MB of memory or more, only to be shrunk to the model's "
                  f"input; the limit is {MAX_PIXELS // 10**6} megapixels",
            remedy=_too_large_remedy(),
        )
    if min(w, h) < MIN_SIDE:
        raise UsageError(
            f"calibration image {path} is {w}x{h} pixels",
            cause=f"images smaller than {MIN_SIDE}x{MIN_SIDE} become flat colour fields when resized to the model's "
                  "input, so the observers would calibrate on nothing like a real image",
            remedy=f"use real photos of at least {MIN_SIDE}x{MIN_SIDE} (ideally the model's input size or larger), "
                   "or leave --calibration out for the built-in synthetic set",
        )


def _too_large_remedy() -> str:
    return (f"downscale it (e.g. to 1024 pixels on the long side) or remove it from the --calibration directory; "
            f"images up to {MAX_PIXELS // 10**6} megapixels are accepted")


def load_batch(spec: CalibrationSpec, hw: Tuple[int, int]) -> List[Any]:
    """A list of ``[1, 3, H, W]`` normalised float tensors."""
    if spec.source == "dir":
        return [_load_image(f, hw) for f in spec.files]
    return synthetic_images(spec.count, spec.seed, hw)


def _load_image(path: Path, hw: Tuple[int, int]):
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            return preprocess_pil(im, hw)
    except (UnidentifiedImageError, OSError) as e:
        raise UsageError(f"calibration image {path} cannot be decoded", cause=str(e), remedy="fix or remove it") from e


def preprocess_pil(image, hw: Tuple[int, int]):
    """torchvision's ImageNet eval transform: resize shorter side to 256/224*H, centre crop, normalise."""
    import torch
    import torchvision.transforms.functional as TF

    resize = int(round(hw[0] * 256 / 224))
    image = TF.resize(image, resize)
    image = TF.center_crop(image, list(hw))
    t = TF.to_tensor(image)
    t = TF.normalize(t, MEAN, STD)
    return t.unsqueeze(0).to(torch.float32)


def synthetic_images(count: int, seed: int, hw: Tuple[int, int]):
    """Deterministic image-like inputs: smooth colour fields, gradients and hard edges.

    Values are drawn in pixel space ([0, 1]) and normalised like real images, so
    activations cover realistic ranges (unlike the tutorial's all-zero input,
    which with untrained weights gives activation scales at the float floor).
    """
    from .torch_state import pinned

    with pinned(threads=1):  # torch's bilinear upsampling rounds differently with 1 and with 2+ threads
        return _synthetic(count, seed, hw)


def _synthetic(count: int, seed: int, hw: Tuple[int, int]):
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(seed)
    h, w = hw
    out = []
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    for _ in range(count):
        low = torch.rand(1, 3, 4, 4, generator=g)
        mid = torch.rand(1, 3, 16, 16, generator=g) * 0.35
        img = F.interpolate(low, size=(h, w), mode="bicubic", align_corners=False)
        img = img + F.interpolate(mid, size=(h, w), mode="bilinear", align_corners=False) - 0.17
        # a few hard-edged rectangles (objects) and fine texture
        for _ in range(int(torch.randint(1, 5, (1,), generator=g))):
            y0, x0 = (int(v) for v in torch.randint(0, h - 8, (2,), generator=g))
            y1 = min(h, y0 + int(torch.randint(8, h // 2, (1,), generator=g)))
            x1 = min(w, x0 + int(torch.randint(8, w // 2, (1,), generator=g)))
            img[:, :, y0:y1, x0:x1] = torch.rand(1, 3, 1, 1, generator=g)
        img = img + torch.randn(1, 3, h, w, generator=g) * 0.03
        img = img.clamp(0.0, 1.0)
        out.append(((img - mean) / std).contiguous())
    return out


# --------------------------------------------------------------------------- inputs beyond one image


def declared_samples(fn, count: int, seed: int, label: str) -> List[Tuple[Any, ...]]:
    """``count`` inputs of a model that declares its own (``<factory>_example_inputs``, docs/convert.md): the
    function called once per input under ``torch.manual_seed(seed + i)``, each call a tuple of tensors (one per
    ``forward`` argument, batch 1).  Calibration and the held-out check inputs come from it with other seeds."""
    import torch

    samples = []
    for i in range(count):
        torch.manual_seed(seed + i)
        try:
            value = fn()
        except Exception as e:  # a user's function can raise anything
            raise UsageError(f"{label}: its example-inputs function raised", cause=f"{type(e).__name__}: {e}",
                             remedy="make it return a tuple of tensors, one per forward() argument") from e
        samples.append(_as_sample(value, label))
    return samples


def _as_sample(value: Any, label: str) -> Tuple[Any, ...]:
    import torch

    sample = (value,) if isinstance(value, torch.Tensor) else tuple(value) if isinstance(value, (tuple, list)) else ()
    if not sample or not all(isinstance(t, torch.Tensor) and t.dim() >= 1 and t.shape[0] == 1 for t in sample):
        raise UsageError(f"{label}: its example-inputs function returned {describe_sample(value)}",
                         cause="each input must be a tensor with a batch dimension of 1 (the model is called as "
                               "model(*inputs))",
                         remedy="return a tuple of tensors, e.g. (torch.randint(0, 1000, (1, 32)),) for token ids")
    return tuple(t.contiguous() for t in sample)


def describe_sample(value: Any) -> str:
    """``int64[1, 32], float32[1, 1, 16000]``: what a sample holds, for messages and records."""
    import torch

    items = value if isinstance(value, (tuple, list)) else (value,)
    return ", ".join(f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}" if isinstance(t, torch.Tensor)
                     else type(t).__name__ for t in items) or "nothing"


def is_image_sample(sample: Tuple[Any, ...]) -> bool:
    """One float ``[1, 3, H, W]`` tensor: what the legacy lane, NNAPI and the app's camera input take."""
    import torch

    return len(sample) == 1 and sample[0].dim() == 4 and sample[0].shape[1] == 3 and sample[0].is_floating_point() \
        and sample[0].dtype == torch.float32

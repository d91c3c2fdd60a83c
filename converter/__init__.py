"""``invoke convert``: a model -> CPU and NNAPI TorchScript models per quantization mode, with a manifest.

Importing this package does not import torch; only building does.
"""

from .pipeline import ConvertResult, ConvertSettings, convert, validate

__all__ = ["ConvertSettings", "ConvertResult", "convert", "validate"]

"""The float model with its weights and BatchNorm statistics, and the calibration batch: made once per process.

``invoke convert --format torchscript,executorch`` converts one model twice, once per format, in one process;
both formats start from the same float model (same weights, BatchNorm statistics re-estimated on the same
calibration inputs for random weights) and the same calibration batch.  The TorchScript lane keeps what it
made here; the ExecuTorch lane takes a copy instead of building the model, reading the calibration set and
re-estimating the statistics again.  The key holds everything they depend on (model, weights, calibration,
input size, and torch's numerics settings), the process holds one entry, and a run of one format alone is
unchanged.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from .calibration import CalibrationSpec
from .models import ModelSpec, WeightsSpec


@dataclass
class Prepared:
    model: Any  # the float model in eval mode, BatchNorm statistics estimated when the weights are random
    weights_record: Dict[str, Any]
    batch: List[Any]  # the calibration inputs, [1, 3, H, W] each, or a declared model's (a tuple for several)


_kept: Dict[str, Prepared] = {}


def key(spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec) -> str:
    import torch

    numerics = {"mkldnn": torch.backends.mkldnn.enabled, "threads": torch.get_num_threads(),
                "deterministic": torch.are_deterministic_algorithms_enabled()}
    return json.dumps([spec.key(), spec.identity(), list(spec.input_hw), weights.key(), calib.key(),
                       str(calib.path), numerics], sort_keys=True, default=str)


def keep(spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec, model, weights_record: Dict[str, Any],
         batch: List[Any]) -> None:
    """Remember copies of the prepared model and batch for this process (replacing any other model's)."""
    _kept.clear()
    _kept[key(spec, weights, calib)] = Prepared(copy.deepcopy(model), copy.deepcopy(weights_record),
                                                [_clone(x) for x in batch])


def take(spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec) -> Optional[Prepared]:
    """Copies of what :func:`keep` remembered for exactly these inputs, or None."""
    found = _kept.get(key(spec, weights, calib))
    if found is None:
        return None
    return Prepared(copy.deepcopy(found.model), copy.deepcopy(found.weights_record), [_clone(x) for x in found.batch])


def _clone(x):
    """A calibration input copied: a tensor, or a tuple of one per ``forward`` argument."""
    return tuple(t.clone() for t in x) if isinstance(x, tuple) else x.clone()


def forget() -> None:
    _kept.clear()

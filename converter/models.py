"""Which model to convert, and with which weights.

No torch at import time: validation of names, paths and weight choices happens
before torch is imported, so bad input fails in milliseconds.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

from toolchain.errors import ConversionError, UsageError
from toolchain.fsutil import sha256_file
from toolchain.settings import default

from .finite import refuse_non_finite_weights
from .worker import Worker
from .input_specs import InputSpec, inputs_text, parse_inputs, sampler

log = logging.getLogger(__name__)

# what random weights mean, in the same words wherever it is said (the notes channel then says it once per run)
RANDOM_WEIGHTS = "RANDOM weights: latencies are real, predictions are not"

# torchvision classification models that have a quantizable variant:
# name -> (file-name stem, input size (H, W))
TORCHVISION_MODELS: Dict[str, Tuple[str, Tuple[int, int]]] = {
    "mobilenet_v2": ("mobilenetv2", (224, 224)),
    "mobilenet_v3_large": ("mobilenetv3large", (224, 224)),
    "resnet18": ("resnet18", (224, 224)),
    "resnet50": ("resnet50", (224, 224)),
    "resnext101_32x8d": ("resnext101_32x8d", (224, 224)),
    "shufflenet_v2_x1_0": ("shufflenetv2_x1_0", (224, 224)),
    "googlenet": ("googlenet", (224, 224)),
    "inception_v3": ("inceptionv3", (299, 299)),
}

@dataclass(frozen=True)
class ModelSpec:
    """A validated ``--model`` value."""

    name: str  # as given: "mobilenet_v2" or "path/to/file.py:factory"
    stem: str  # file-name stem of the outputs
    source: str  # "torchvision" | "factory"
    input_hw: Tuple[int, int]
    factory_file: Optional[Path] = None
    factory_name: Optional[str] = None
    factory_sha256: Optional[str] = None
    factory_timeout: float = default("convert.factory_timeout")  # seconds to import the file and call the factory
    inputs: Tuple[InputSpec, ...] = ()  # --inputs (convert.inputs): the model's inputs declared on the command line

    def key(self) -> Dict[str, Any]:
        key = {"name": self.name, "source": self.source, "factory_sha256": self.factory_sha256}
        return {**key, "inputs": inputs_text(self.inputs)} if self.inputs else key

    def identity(self) -> str:
        """Which model this is, wherever it was named from: a torchvision name, or ``/abs/file.py:factory``."""
        return f"{self.factory_file}:{self.factory_name}" if self.source == "factory" else self.name


def recorded_identity(conv: Dict[str, Any]) -> Optional[str]:
    """The identity (:meth:`ModelSpec.identity`) of the model a manifest's conversion record was made from; None
    when an older record does not say (an ExecuTorch record before ``model_id``)."""
    if conv.get("model_id"):
        return str(conv["model_id"])
    model = str(conv.get("model") or "")
    if conv.get("source") == "factory" and conv.get("factory_file"):
        return f"{conv['factory_file']}:{model.rsplit(':', 1)[-1]}"
    if conv.get("source") == "torchvision":
        return model
    return None


def check_stem_free(spec: ModelSpec, out: Path) -> None:
    """Refuse, before anything is written, a model whose output names are another model's in ``out`` (in either
    lane's records): two factories of one name in different files, or a factory file named like a torchvision
    model.  An unreadable manifest is left to the lane that reads it."""
    from toolchain.errors import RecordError
    from toolchain.records import EXECUTORCH_SECTION, ConvertManifest

    if not ConvertManifest.exists(out):
        return
    try:
        man = ConvertManifest.load(out)
    except RecordError:
        return
    section = man.data.get(EXECUTORCH_SECTION)
    for conversions in (man.conversions, section.get("conversions") if isinstance(section, dict) else None):
        if isinstance(conversions, dict):
            _check_stem_free(spec, conversions, out)


def _check_stem_free(spec: ModelSpec, conversions: Dict[str, Any], out: Path) -> None:
    conv = conversions.get(spec.stem)
    other = recorded_identity(conv) if isinstance(conv, dict) else None
    if other is None or other == spec.identity():
        return
    raise UsageError(
        f"{out} already holds the model {other} under the name {spec.stem!r}, and {spec.identity()} would write its "
        f"files under the same name",
        cause="the output names come from the factory's name (or the file's name, for a factory called model, "
              "factory, make_model or build, or the torchvision name), so the second model would overwrite the "
              "first's files",
        remedy="give the factory a distinct name (e.g. def my_net(): ... and --model file.py:my_net), or convert it "
               "into another directory: --out build/models-2",
    )


@dataclass(frozen=True)
class WeightsSpec:
    """A validated ``--weights`` value: never silently substituted."""

    origin: str  # "pretrained" | "random" | "file"
    path: Optional[Path] = None
    sha256: Optional[str] = None
    seed: int = 0

    def key(self) -> Dict[str, Any]:
        return {"origin": self.origin, "sha256": self.sha256, "seed": self.seed if self.origin == "random" else None}


def parse_model(value: str, factory_timeout: float = default("convert.factory_timeout"),
                inputs: Optional[str] = None) -> ModelSpec:
    """``--model`` (and ``--inputs``, the inputs of a factory model) checked, without torch."""
    value = (value or "").strip()
    declared = parse_inputs(inputs)
    if ":" in value and value.rsplit(":", 1)[0].endswith(".py"):
        file_part, factory = value.rsplit(":", 1)
        path = Path(file_part).expanduser()
        if not path.is_file():
            raise UsageError(
                f"model factory file {path} does not exist",
                remedy="pass --model path/to/file.py:factory_function with an existing file",
            )
        if not factory.isidentifier():
            raise UsageError(f"{factory!r} is not a Python function name", remedy="use --model file.py:function_name")
        stem = _safe_stem(path.stem if factory in ("model", "factory", "make_model", "build") else factory)
        return ModelSpec(value, stem, "factory", (224, 224), path.resolve(), factory, sha256_file(path),
                         float(factory_timeout), declared)
    if value in TORCHVISION_MODELS and declared:
        raise UsageError(f"--inputs applies to a model file (--model file.py:factory), not to {value}",
                         cause=f"{value} takes the float32[1, 3, H, W] image its weights were made for",
                         remedy="drop --inputs, or wrap the model in a factory of your own")
    if value in TORCHVISION_MODELS:
        stem, hw = TORCHVISION_MODELS[value]
        return ModelSpec(value, stem, "torchvision", hw)
    raise UsageError(
        f"unknown model {value!r}",
        cause="torchdroid converts torchvision classification models that have a quantizable variant, or your own factory",
        remedy=f"use one of: {', '.join(TORCHVISION_MODELS)}; or --model path/to/file.py:factory",
    )


def _safe_stem(text: str) -> str:
    stem = "".join(ch if ch.isalnum() or ch in "_" else "_" for ch in text).strip("_").lower()
    return stem or "model"


def parse_weights(value: str, seed: int = 0) -> WeightsSpec:
    value = (value or "").strip()
    if value == "random":
        return WeightsSpec("random", seed=seed)
    if value == "pretrained":
        return WeightsSpec("pretrained")
    if value == "auto":  # the tasks decide it (workflow/stage_settings.weights); a library call must choose
        raise UsageError("weights 'auto' reached the converter undecided",
                         remedy="pass weights='pretrained', 'random' or a state_dict path to ConvertSettings")
    path = Path(value).expanduser()
    if value and path.is_file():
        return WeightsSpec("file", path.resolve(), sha256_file(path))
    raise UsageError(
        f"--weights {value!r} is neither 'pretrained', 'random' nor an existing file",
        remedy="use --weights pretrained (downloads once, needs internet), --weights random (explicitly untrained) "
        "or --weights path/to/state_dict.pth",
    )


def pretrained_enum(spec: ModelSpec):
    """torchvision's default float weights enum member for a torchvision model."""
    import torchvision.models as tvm

    return tvm.get_model_weights(spec.name).DEFAULT


def build_float_model(spec: ModelSpec, weights: WeightsSpec):
    """The float model (quantizable architecture when there is one), with the chosen weights, in eval mode.

    Returns ``(model, weights_record)``.
    """
    import torch

    record: Dict[str, Any] = {"origin": weights.origin}
    if spec.source == "torchvision":
        import torchvision.models.quantization as tvq

        builder = getattr(tvq, spec.name)
        kwargs: Dict[str, Any] = {"weights": None, "quantize": False}
        if spec.name in ("googlenet", "inception_v3"):
            kwargs.update(aux_logits=False, init_weights=True)
        if weights.origin == "random":
            torch.manual_seed(weights.seed)
            model = builder(**kwargs)
            record.update(seed=weights.seed, note="explicitly random (untrained): predictions are meaningless")
        elif weights.origin == "pretrained":
            enum = pretrained_enum(spec)
            model = builder(**kwargs)
            state = _download_state_dict(enum)
            _load_state(model, state, f"torchvision {enum}")
            record.update(tag=str(enum), url=enum.url)
        else:
            model = builder(**kwargs)
            state = _load_file(weights.path)
            _load_state(model, state, str(weights.path))
            record.update(path=str(weights.path), sha256=weights.sha256)
    else:
        model = _call_factory(spec, weights.seed)
        if weights.origin == "pretrained":
            raise UsageError(
                "--weights pretrained only applies to torchvision models",
                remedy="your factory loads its own weights: pass --weights random to use the factory's module as it "
                "returns it, or --weights path/to/state_dict.pth",
            )
        if weights.origin == "file":
            _load_state(model, _load_file(weights.path), str(weights.path))
            record.update(path=str(weights.path), sha256=weights.sha256)
        else:
            record.update(seed=weights.seed, note="as returned by the factory (seeded)")
    model.eval()
    refuse_non_finite_weights(model, spec.stem, str(record.get("origin")))  # before calibration, export, a manifest
    return model, record


def _batchnorms(model) -> list:
    import torch

    kinds = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d, torch.nn.SyncBatchNorm)  # + Lazy*
    return [m for m in model.modules() if isinstance(m, kinds)]


def estimate_batchnorm(model, batch) -> int:
    """Set BatchNorm running statistics from ``batch`` (one forward, cumulative average).

    Untrained torchvision weights shrink activations layer after layer (kaiming
    fan-out init on depthwise convolutions), so deep activations end up near the
    float floor and quantization collapses.  Re-estimating the BatchNorm
    statistics on image-like inputs gives the activation ranges a trained
    network has, without pretending the weights are trained.  ``batch``: images, or
    a declared model's tuples of inputs, joined in one call (one call per sample for
    a model that takes a batch of one only).  Returns the number of BatchNorm layers updated.
    """
    import torch

    from toolchain.records import program_args

    from .samples import stacked

    bns = _batchnorms(model)
    if not bns:
        return 0
    model.eval()
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    with torch.no_grad():
        try:
            model(*stacked(batch))
        except Exception:  # a batch of one fixed inside the model: every sample on its own, the same running average
            for m in bns:
                m.reset_running_stats()
            for x in batch:
                model(*program_args(x))
    model.eval()
    return len(bns)


def untrained_batchnorm(model) -> bool:
    """Does the model have BatchNorm layers whose running statistics are all the untrained init (mean 0, variance 1,
    no batch tracked), as ``nn.BatchNorm*d`` constructs them?  Statistics a factory loaded or estimated are not."""
    import torch

    bns = _batchnorms(model)
    return bool(bns) and all(
        m.track_running_stats and m.running_mean is not None and not bool(m.running_mean.any())
        and bool(torch.equal(m.running_var, torch.ones_like(m.running_var)))
        and (m.num_batches_tracked is None or int(m.num_batches_tracked) == 0) for m in bns)


def calibrate_batchnorm(spec: ModelSpec, weights: WeightsSpec, model, batch, record: Dict[str, Any]) -> Optional[str]:
    """Re-estimate the BatchNorm statistics on the calibration ``batch`` when the weights are known to be an
    untrained init: torchvision's random weights, or a factory's (``--weights random``: as the factory returns it)
    whose every BatchNorm layer has the untrained statistics (:func:`untrained_batchnorm`); never trained weights
    (``--weights PATH``, or statistics the factory loaded).  Recorded in ``record["batchnorm_statistics"]``;
    returns the run's note for a factory model (torchvision's random weights are already said), else None."""
    if weights.origin != "random" or not _batchnorms(model):
        return None
    if spec.source != "torchvision" and not untrained_batchnorm(model):
        record["batchnorm_statistics"] = ("kept as the factory returned them: not the untrained init (running mean "
                                          "0, variance 1), so never re-estimated")
        return None
    n = estimate_batchnorm(model, batch)
    record["batchnorm_statistics"] = f"estimated on the {len(batch)} calibration inputs ({n} layers)"
    if spec.source == "torchvision":
        return None
    record["batchnorm_statistics"] += ": the factory returned them untrained (running mean 0, variance 1)"
    return (f"{spec.stem}: BatchNorm statistics estimated on the {len(batch)} calibration inputs ({n} layers): the "
            "factory returned them untrained (running mean 0, variance 1), as torchvision's random weights are; the "
            "weights are unchanged")


FACTORY_STOP_WAIT = 30.0  # seconds a stopped run waits for the user's factory to return before it exits


def _call_factory(spec: ModelSpec, seed: int = 0):
    """The user's model: their file imported and its factory called in a worker thread, for at most
    ``spec.factory_timeout`` seconds.

    A Python thread cannot be stopped from outside: past the limit the error is raised and the process ends with
    it, leaving the (daemon) thread behind.  ``sys.exit()`` and ``KeyboardInterrupt`` in the user's code become
    usage errors naming the file, never a silent exit 0.  ``seed``: torch's global seed while the factory runs, so
    the random weights it initialises are the ones the manifest's ``weights.seed`` names."""
    def said() -> None:
        log.warning("stopping: waiting up to %g s for %s() in %s to return (a second Ctrl-C stops at once)",
                    FACTORY_STOP_WAIT, spec.factory_name, spec.factory_file)

    with working_directory_kept(spec):
        worker = Worker(_build_user_model, spec, seed, name="torchdroid-model-factory", daemon=True,
                        stop_wait=FACTORY_STOP_WAIT, on_stop=said)
        worker.wait(spec.factory_timeout)
    if not worker.done:
        worker.stop_wait = 0.0  # given up on: the exit does not wait for it either
        raise UsageError(
            f"the model file {spec.factory_file} took longer than {spec.factory_timeout:g} seconds to load and build "
            f"the model ({spec.factory_name}())",
            cause="it may be waiting for input, a download, a lock or a long computation; a thread cannot be "
                  "stopped, so convert ends here instead of waiting",
            remedy="make the file and its factory return sooner, or raise the limit: convert.factory_timeout in "
                   "invoke.yaml (or INVOKE_CONVERT_FACTORY_TIMEOUT=1800)",
        )
    return worker.result()


@contextlib.contextmanager
def working_directory_kept(spec: ModelSpec) -> Iterator[None]:
    """The working directory as it was before the user's file ran, restored after it returns (an ``os.chdir()``
    there would otherwise make every relative output path of convert point elsewhere); said once in the log."""
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        before = os.getcwd()
        yield
    finally:
        try:
            moved = os.getcwd() != before
        except FileNotFoundError:  # it moved into a directory it then removed
            moved = True
        if moved:
            os.fchdir(here)
            log.warning("the model file %s changed the working directory; convert restored it to %s",
                        spec.factory_file, before)
        os.close(here)


def _build_user_model(spec: ModelSpec, seed: int):
    """The worker thread's body: the model, or a UsageError naming the file."""
    return _import_and_call(spec, seed)


def _import_and_call(spec: ModelSpec, seed: int = 0):
    import torch

    mod_name = f"torchdroid_user_model_{spec.factory_sha256[:12]}"
    try:
        module_spec = importlib.util.spec_from_file_location(mod_name, spec.factory_file)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    except (SystemExit, KeyboardInterrupt) as e:
        raise _stopped(spec, e, "while loading") from e
    except Exception as e:  # a user's file can raise anything
        raise UsageError(
            f"could not import {spec.factory_file}",
            cause=f"{type(e).__name__}: {e}",
            remedy="fix the file so `python path/to/file.py` runs without error",
        ) from e
    sys.modules[mod_name] = module  # its example-inputs function is read from here (declared_inputs)
    factory = getattr(module, spec.factory_name, None)
    if not callable(factory):
        raise UsageError(
            f"{spec.factory_file} has no function {spec.factory_name!r}",
            remedy=f"define `def {spec.factory_name}(): return my_module` in that file",
        )
    torch.manual_seed(seed)  # the seed the record states (convert.seed)
    try:
        model = factory()
    except (SystemExit, KeyboardInterrupt) as e:
        raise _stopped(spec, e, "while building the model") from e
    except Exception as e:
        raise UsageError(f"{spec.name} raised while building the model", cause=f"{type(e).__name__}: {e}") from e
    if not isinstance(model, torch.nn.Module):
        raise UsageError(
            f"{spec.name} returned {type(model).__name__}, not a torch.nn.Module",
            remedy="make the factory return an nn.Module instance",
        )
    return model


EXAMPLE_INPUTS_SUFFIX = "_example_inputs"  # `def net_example_inputs(): return (tokens,)` beside `def net(): ...`


def declared_inputs(spec: ModelSpec):
    """The model's example-inputs function: ``--inputs`` made into one (converter/input_specs.py), else the factory's
    ``<factory>_example_inputs`` in the same file (docs/convert.md), or None: then the model takes one
    ``[1, 3, H, W]`` image.  The factory's is read from the module the factory was built from."""
    if spec.inputs:
        return sampler(spec.inputs)
    if spec.source != "factory" or not spec.factory_sha256:
        return None
    module = sys.modules.get(f"torchdroid_user_model_{spec.factory_sha256[:12]}")
    fn = getattr(module, f"{spec.factory_name}{EXAMPLE_INPUTS_SUFFIX}", None) if module is not None else None
    return fn if callable(fn) else None


def declared_origin(spec: ModelSpec) -> str:
    """Where the model's inputs were declared, for messages and records: ``--inputs TEXT`` or
    ``<factory>_example_inputs()``."""
    if spec.inputs:
        return f"--inputs {inputs_text(spec.inputs)}"
    return f"{spec.factory_name}{EXAMPLE_INPUTS_SUFFIX}()"


def _stopped(spec: ModelSpec, e: BaseException, when: str) -> UsageError:
    """The usage error for a model file that tried to end the program (``sys.exit``, ``KeyboardInterrupt``)."""
    if isinstance(e, SystemExit):
        call = "sys.exit()" if e.code is None else f"sys.exit({e.code!r})"
        return UsageError(
            f"the model file {spec.factory_file} called {call} {when}",
            cause="the file is imported into convert's process, and sys.exit() (or exit(), quit()) there would end "
                  "convert with nothing made",
            remedy="put script code under `if __name__ == \"__main__\":`, and raise an exception with the reason "
                   "instead of exiting",
        )
    return UsageError(
        f"the model file {spec.factory_file} raised {type(e).__name__} {when}",
        cause="an interrupt raised by the file itself (not Ctrl-C at the terminal) would end convert with nothing made",
        remedy="raise an ordinary exception with the reason instead",
    )


def _cache_path(enum) -> Path:
    """Where torchvision's download keeps a weights file (torch hub's checkpoints directory)."""
    import torch

    return Path(torch.hub.get_dir()) / "checkpoints" / enum.url.rsplit("/", 1)[-1]


def _download_state_dict(enum, alternatives: str = ""):
    """torchvision's weights file (hub cache, else downloaded); ``alternatives``: the remedy's other ways."""
    import urllib.error

    cached = _cache_path(enum)
    try:
        return enum.get_state_dict(progress=False, check_hash=True)
    except (urllib.error.URLError, OSError, RuntimeError) as e:
        raise UsageError(
            f"pretrained weights {enum} could not be downloaded",
            cause=f"{type(e).__name__}: {e} (no network here?)",
            remedy=(
                f"on a machine with internet, download {enum.url} and place it at {cached}; " + (alternatives or
                "or pass --weights path/to/state_dict.pth; or --weights random for an explicitly untrained model "
                "(the manifest records it as random)")
            ),
        ) from e


def _load_file(path: Path):
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise UsageError(
            f"{path} is not a loadable state_dict",
            cause=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
            remedy="save weights with torch.save(model.state_dict(), path)",
        ) from e
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise UsageError(f"{path} holds a {type(state).__name__}, not a state_dict", remedy="save model.state_dict()")
    return state


def _load_state(model, state, origin: str) -> None:
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        first = str(e).splitlines()
        raise ConversionError(
            f"the weights from {origin} do not fit the model",
            cause="; ".join(line.strip() for line in first[:3]),
            remedy="use weights saved from the same architecture (model.state_dict()), or --weights random",
        ) from e


def pretrained_status(model: str, timeout: float = 5.0,
                      location: Optional[Tuple[str, Path]] = None) -> Tuple[bool, str]:
    """Can ``--weights pretrained`` work for ``model`` here?  ``(True, where)`` or ``(False, why)``.

    Looks in torch's hub cache first, then asks the weights' server for the file's
    headers (nothing is downloaded).  A user's ``file.py:factory`` has no pretrained
    weights of torchvision's.
    """
    import urllib.error
    import urllib.request

    where = location if location is not None else pretrained_location(model)
    if where is None:
        return False, f"{model} is not a torchvision model, so torchvision has no pretrained weights for it"
    url, cached = where[0], Path(where[1])
    if cached.is_file():
        return True, f"cached at {cached}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            pass
    except (urllib.error.URLError, OSError, ValueError) as e:
        return False, (f"not cached at {cached} and {url} is unreachable "
                       f"({getattr(e, 'reason', None) or e})")
    return True, f"downloadable from {url}"


def pretrained_location(model: str) -> Optional[Tuple[str, Path]]:
    """``(url, hub cache path)`` of ``model``'s default pretrained weights; None for a user's factory.

    Imports torchvision: callers that ask often (``invoke all``) keep the answer per torchvision version.
    """
    spec = parse_model(model)
    if spec.source != "torchvision":
        return None
    enum = pretrained_enum(spec)
    return enum.url, _cache_path(enum)

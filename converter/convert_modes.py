"""The torch-heavy half of ``convert``: one model's requested modes, converted, saved and host-checked.

Imported only when something must be (re)built.  The float model, the calibration batch and the
quantized model are made once and shared by the modes; each mode is yielded as soon as its two files
are saved and checked, so the caller can record it at once (a killed run keeps every finished mode).
"""

from __future__ import annotations

from toolchain.errors import ConversionError, command

import contextlib
import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch

from toolchain import pins
from toolchain.records import UNOPTIMIZED_CPU, ModelFile, NnapiRefusal, TensorSpec, model_file_names, program_args
from toolchain.variants import MODES

from .calibration import CalibrationSpec, few_images_warning, load_batch
from .finite import refuse_non_finite_output
from .prepared import keep
from .export import (ExportedVariant, export_float, export_quantized, fused_float, prepare_quantization, probe, quantize,
                     top1_in_chunks, without_inplace,
                     xnnpack_available)
from .host_check import Agreement, as_float, host_check, is_logits, spec_of
from .worker import Worker
from .models import RANDOM_WEIGHTS, ModelSpec, WeightsSpec, build_float_model, calibrate_batchnorm, declared_origin
from .precheck import Problem, check_model, nnapi_refused, refusal_fix, refuse
from .prequantized import load_prequantized
from .precheck import describe as describe_check

log = logging.getLogger(__name__)
_warned_xnnpack = False

NNAPI_NEEDS = "libneuralnetworks.so (Android API >= 29, or torchdroid's host NNAPI)"


@contextlib.contextmanager
def quiet_torch():
    """torch 2.x deprecates torch.jit (trace/script/load) and warns on every call; NNAPI conversion needs it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*(quantize_per_tensor|calculate_qparams|TypedStorage).*")
        warnings.filterwarnings("ignore", module=r"torch\.ao\.quantization.*")
        yield


@dataclass
class ConversionFacts:
    """What holds for every mode of this run: weights, mobile optimisation, bundled input, notes."""

    weights_record: Dict[str, Any] = field(default_factory=dict)
    xnnpack: bool = False
    mobile_optimization: Dict[str, Any] = field(default_factory=dict)
    bundled_input: str = ""
    notes: List[str] = field(default_factory=list)
    quantization: Dict[str, Any] = field(default_factory=dict)  # how the quantized modes are made, and why
    batchnorm: Dict[str, Any] = field(default_factory=dict)  # BatchNorm layers folded into their convolutions
    declared_inputs: Optional[str] = None  # where the inputs it was calibrated on were declared (None: images)


@dataclass
class ModeDone:
    """One mode, saved and checked: its two files, the host check row, the agreement with quant_none."""

    mode: str
    files: List[ModelFile]
    host_model: Dict[str, Any]
    agreement: Optional[Dict[str, int]]
    notes: List[str]
    refused: Tuple[NnapiRefusal, ...] = ()  # its NNAPI model, when convert did not write one, and why
    error: Optional[ConversionError] = None  # the mode was not made (no file): why (raised when nothing is made)


def mode_refused(mode: str, error: ConversionError) -> ModeDone:
    """``mode`` not made (no file), for ``error``; the other modes are made all the same."""
    log.debug("quant_%s not made: %s", mode, error.what)  # said once, by convert's PartlyConverted
    return ModeDone(mode, [], {}, None, [], error=error)


def with_fix(error: ConversionError, *fixes: str) -> ConversionError:
    """``error`` with more ways around it added to its fix (a copy: the same error may refuse several modes)."""
    import copy

    more = [f for f in fixes if f and f not in (error.remedy or "")]
    if not more:
        return error
    out = copy.copy(error)
    out.remedy = "; or ".join(x for x in (error.remedy, *more) if x)
    return out


FLOAT_ALONE = "convert the float model alone: --quant none"


def _error_refusals(modes: List[str], error: ConversionError) -> Iterator[ModeDone]:
    """The quantized ``modes`` refused by one error (calibration, quantized export); quant_none is not among them."""
    for mode in modes:
        yield mode_refused(mode, with_fix(error, FLOAT_ALONE))


def _mobile_optimization(facts: ConversionFacts) -> None:
    global _warned_xnnpack
    facts.xnnpack = xnnpack_available()
    if facts.xnnpack:
        facts.mobile_optimization = {"applied": True, "how": "torch.utils.mobile_optimizer.optimize_for_mobile"}
        return
    if not _warned_xnnpack:
        log.warning("note: %s", UNOPTIMIZED_CPU)
        _warned_xnnpack = True
    facts.mobile_optimization = {"applied": False, "reason": "torch built without XNNPACK",
                                 "instead": "BatchNorm folding and dropout removal only", "note": UNOPTIMIZED_CPU}
    facts.notes.append(UNOPTIMIZED_CPU)  # said once per run: the warning above already did


def _next_export(exports: Iterator[ExportedVariant]) -> Optional[ExportedVariant]:
    with torch.no_grad():  # grad mode is per thread
        return next(exports, None)


def _wait_quietly(job: Worker) -> None:
    """Let a background job finish (its own error is dropped: the caller is raising a first one)."""
    try:
        job.result()
    except BaseException:  # noqa: BLE001 - the caller's exception is the one to report
        log.debug("a background conversion step failed after an earlier error", exc_info=True)


def executorch_alternative(model, example, name: str) -> str:
    """``--format executorch`` with the command when torch.export can capture ``model``; "" when it cannot."""
    import copy

    try:
        with torch.no_grad():
            torch.export.export(copy.deepcopy(model).eval(), tuple(t.contiguous() for t in program_args(example)))
    except Exception as e:  # noqa: BLE001 - any failure means the ExecuTorch lane cannot take it either
        log.debug("torch.export cannot capture %s: %s", name, e)
        return ""
    install = "" if pins.installed_version() else f" (after `{pins.INSTALL_COMMAND}`)"
    return (f"the ExecuTorch lane takes this model: `{command('invoke', 'convert', '--model', name, '--format', 'executorch')}`{install} "
            "(XNNPACK on the CPU, Vulkan on the GPU; docs/executorch.md)")


def mismatch_note(mode: str, agreement: Dict[str, int]) -> str:
    note = (f"quant_{mode} agrees with the float model on only {agreement['agree']}/{agreement['total']} inputs: "
            "the pre-quantized weights may not belong to the float weights (--weights)")
    log.warning("warning: %s", note)
    return note


def declared_batch(spec: ModelSpec, calib: CalibrationSpec) -> Optional[List[Tuple[torch.Tensor, ...]]]:
    """The calibration inputs of a model that declares inputs other than the one ``[1, 3, H, W]`` float image the
    image path is built around (token ids, audio, several tensors): ``calib.count`` samples of its example-inputs
    function (``<factory>_example_inputs`` or ``--inputs``), each the tuple of ``forward`` arguments.  None: the
    model takes the image (declared or not), and gets image calibration."""
    from .calibration import declared_samples, is_image_sample
    from .export import check_arity
    from .models import declared_inputs

    fn = declared_inputs(spec)
    if fn is None:
        return None
    samples = declared_samples(fn, calib.count, calib.seed, spec.stem)
    if is_image_sample(samples[0]) and tuple(samples[0][0].shape[2:]) == tuple(spec.input_hw):
        return None
    check_arity(samples[0], spec.stem)
    return samples


class ModeConverter:
    """Converts the modes of one model into ``out``; :meth:`prepare` first, then iterate :meth:`run`."""

    def __init__(self, spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec, out: Path,
                 quantized: Optional[WeightsSpec] = None):
        self.spec, self.weights, self.calib, self.out = spec, weights, calib, Path(out)
        self.quantized = quantized  # pre-quantized weights of core/full; None: calibrated here
        self.facts = ConversionFacts()
        self.model = None
        self.qmodel = None  # the quantized model made from self.quantized in prepare()
        self._float_top1: Optional[Worker] = None  # pre-quantized: the float predictions, still computing
        self._first_quantized: Optional[tuple] = None  # (mode, bundled-input output, agreement) of the first checked
        self.batch: List[torch.Tensor] = []
        self.agreement: Optional[Agreement] = None
        self.nnapi_problems: Dict[str, List[Problem]] = {}  # per mode: why NNAPI cannot take it (checked before)
        self._alternative: Optional[str] = None  # the lane that takes the model NNAPI refuses (found once)
        self.scheme = "eager"  # how the quantized modes are made: "eager" | "fx" (precheck decides)
        self.stopped: Dict[str, ModeDone] = {}  # the modes a problem found before converting stops: not made
        self.declared = False  # the model takes its declared inputs (a tuple per sample), not the image

    def prepare(self, describe=lambda text: None, modes=MODES) -> ConversionFacts:
        """The float model with its weights and the calibration batch (BatchNorm re-estimated for random weights).

        What NNAPI conversion would get wrong is refused right after the float model is built, before any
        calibration or conversion work (converter/precheck.py)."""
        spec, facts = self.spec, self.facts
        _mobile_optimization(facts)
        describe(f"{spec.stem}: loading the float model ({self.weights.origin} weights)")
        self.model, facts.weights_record = build_float_model(spec, self.weights)
        declared = declared_batch(spec, self.calib)
        self.declared = declared is not None
        self._precheck(modes, declared[0] if declared else None)
        if self.weights.origin == "random":
            facts.notes.append(RANDOM_WEIGHTS)
        self._calibration_inputs(declared, describe)
        # one forward pass on input #0: a shape mismatch named as such, NaN/inf outputs refused before any file
        refuse_non_finite_output(probe(self.model, self.batch[0], spec.name), spec.stem, "calibration input #0")
        said = calibrate_batchnorm(spec, self.weights, self.model, self.batch, facts.weights_record)
        facts.notes.extend([said] if said else [])
        keep(spec, self.weights, self.calib, self.model, facts.weights_record,  # for --format executorch
             [x if len(x) > 1 else x[0] for x in declared] if declared else self.batch)
        self.agreement = Agreement(self.batch)
        if self.quantized is not None and any(m != "none" and m not in self.stopped for m in modes):
            self._load_quantized(describe)
        return facts

    def _precheck(self, modes, example) -> None:
        """What NNAPI conversion would get wrong (converter/precheck.py): the modes a problem stops are refused
        (the others converted), the rest recorded per mode; the quantization scheme chosen."""
        check = check_model(self.model, self.spec.input_hw, modes, example=example)
        self._stopped(check, modes)  # what stops a mode's CPU model too
        self.nnapi_problems = {m: nnapi_refused(check, m) for m in modes}
        self.scheme = check.quantization
        if any(m != "none" for m in modes):
            self.facts.quantization = {"scheme": check.quantization, **({"why": check.quantization_reason}
                                                                        if check.quantization_reason else {})}
        self.facts.batchnorm = check.batchnorm
        self.facts.notes.extend(describe_check(check))

    def _stopped(self, check, modes) -> None:
        """The modes a problem stops (refused, the others converted: every mode stopped raises)."""
        self.stopped = {m: mode_refused(m, ConversionError(
            f"{self.spec.stem}: quant_{m} cannot be converted (checked before converting)",
            cause="; ".join(p.line() for p in problems), remedy=refusal_fix(problems)))
            for m, problems in refuse(check, self.spec.stem, modes).items()}

    def _calibration_inputs(self, declared, describe) -> None:
        """The calibration batch: the model's declared inputs (one tuple per sample), else the images."""
        spec, facts = self.spec, self.facts
        facts.declared_inputs = declared_origin(spec) if declared else None
        source = facts.declared_inputs or self.calib.source
        describe(f"{spec.stem}: preparing {self.calib.count} calibration inputs ({source})")
        self.batch = declared or load_batch(self.calib, spec.input_hw)
        facts.bundled_input = f"calibration input #0 ({source})"
        few = few_images_warning(self.calib, source)
        if few and self.quantized is None:  # pre-quantized: no ranges estimated here
            facts.notes.append(few)

    def _load_quantized(self, describe) -> None:
        """The pre-quantized weights, loaded and checked now: a file that does not fit is refused before any
        file is written."""
        if self.declared:
            from toolchain.errors import UsageError

            raise UsageError(f"{self.spec.stem}: pre-quantized weights (--quantized-weights {self.quantized.origin}) "
                             "are for a model that takes one image",
                             cause="they are loaded into eager mode's quantized structure of the model, whose one "
                                   "QuantStub quantizes an image; this model takes its declared inputs "
                                   f"({declared_origin(self.spec)}), which FX graph mode quantizes here",
                             remedy="leave --quantized-weights out (calibrate: quantize here on the declared inputs)")
        describe(f"{self.spec.stem}: loading the pre-quantized weights ({self.quantized.origin})")
        self.qmodel, record = load_prequantized(self.model, self.quantized, self.spec)
        self.facts.weights_record["quantized"] = record
        self.facts.notes.append("quant_core/quant_full use pre-quantized weights (not calibrated here): "
                                f"{record.get('path') or record.get('tag')}; the calibration inputs give the bundled "
                                "input and the top-1 agreement check")

    def _paths(self, mode: str):
        cpu, nnapi = model_file_names(self.spec.stem, mode)
        return self.out / cpu, self.out / nnapi

    def run(self, modes: List[str]) -> Iterator[ModeDone]:
        """Yield each requested mode once saved and checked (none first, then full and core).

        The quantized modes' calibration runs in a background thread while quant_none is exported and checked
        here: calibration is torch kernels (which release the GIL), tracing, scripting and NNAPI conversion are
        mostly Python on one core, so the two overlap on a multi-core machine.  quant_none is yielded (and so
        recorded) as soon as it is saved, before a calibration error is raised, exactly as without the thread."""
        yield from (self._with_alternative(self.stopped[m]) for m in modes if m in self.stopped)
        modes = [m for m in modes if m not in self.stopped]
        quantized_modes = [m for m in ("full", "core") if m in modes]
        calibration = yield from self._none_beside_calibration("none" in modes, quantized_modes)
        if calibration is not None:
            yield from self._from_calibration(calibration, quantized_modes)

    def _none_beside_calibration(self, none: bool, quantized_modes: List[str]):
        """quant_none made (yielded) while the quantized modes' calibration runs in a thread; returns that thread
        (None without quantized modes)."""
        fused = self._fused() if none else None
        # what torch.fx traces (FX graph mode's prepare, BatchNorm folding, the in-place rewrite) is done here: its
        # symbolic tracer patches torch.nn.Module calls process-wide while it runs, which would break a trace in the
        # other thread
        start = self._calibration_start() if quantized_modes else None
        calibration: Optional[Worker] = None
        try:
            if quantized_modes:
                calibration = Worker(self._calibrate, start)
            if fused is not None:
                yield self._none(*fused)
        except BaseException:  # an error here, or the caller stopped: never leave torch running in a thread
            if calibration is not None:  # while the process exits
                _wait_quietly(calibration)
            raise
        return calibration

    def _from_calibration(self, calibration: Worker, quantized_modes: List[str]) -> Iterator[ModeDone]:
        """The quantized modes once calibrated; a pre-quantized model is exported at once, its first check awaiting
        the float predictions."""
        if self.qmodel is None:
            yield from self._calibrated(calibration, quantized_modes)
            return
        self._float_top1 = calibration
        try:
            yield from self._quantized(self.qmodel, quantized_modes)
        finally:  # never leave torch running in a thread when the export failed first
            if self._float_top1 is not None:
                _wait_quietly(self._float_top1)

    def _fused(self) -> tuple:
        """(quant_none's fused float model, the copy NNAPI converts or None): made before the calibration thread
        starts (the thread copies the model too; torch.fx traces the in-place rewrite)."""
        with torch.no_grad():
            fused = fused_float(self.model)
        return fused, without_inplace(fused) if not self.nnapi_problems.get("none") else None

    def _calibrated(self, calibration: Worker, quantized_modes: List[str]) -> Iterator[ModeDone]:
        """The quantized modes from the calibration's model; refused when the calibration fails (quant_none is made
        all the same)."""
        try:
            qmodel, float_top1 = calibration.result()
        except ConversionError as e:
            yield from map(self._with_alternative, _error_refusals(quantized_modes, e))
            return
        self.agreement.set_reference(float_top1)
        yield from self._quantized(qmodel, quantized_modes)

    def _quantized(self, qmodel, quantized_modes: List[str]) -> Iterator[ModeDone]:
        exports = export_quantized(qmodel, quantized_modes, self.batch[0],
                                   {m: self._paths(m) for m in quantized_modes}, self.spec.stem,
                                   self.facts.xnnpack,
                                   nnapi=not any(self.nnapi_problems.get(m) for m in quantized_modes))
        left = list(quantized_modes)  # a mode whose export fails is refused with the ones after it
        try:
            ex = _next_export(exports)
        except ConversionError as e:
            yield from map(self._with_alternative, _error_refusals(left, e))
            return
        while ex is not None:  # the next mode is scripted and saved in a thread while this one is checked
            following: Optional[Worker] = None
            try:
                following = Worker(_next_export, exports)
                yield self._checked(ex)  # recorded now; the following mode's export goes on meanwhile
            except BaseException:  # the check failed or the caller stopped (e.g. its record could not be written):
                if following is not None:  # nothing may be written after this run gives up its lock
                    _wait_quietly(following)
                raise
            left.remove(ex.mode)
            try:
                ex = following.result()
            except ConversionError as e:
                yield from map(self._with_alternative, _error_refusals(left, e))
                return

    def _with_alternative(self, done: ModeDone) -> ModeDone:
        """A refused mode's fix, with the ExecuTorch lane when it takes the model (its PT2E quantization takes
        plain adds)."""
        if done.error is not None:
            done.error = with_fix(done.error, self.alternative())
        return done

    def _checked(self, ex: ExportedVariant) -> ModeDone:
        """A quantized mode saved and checked, or refused on its own when its host check fails (its quantization
        collapsed to a constant output...): its files are removed once the run is recorded, the other modes stay."""
        try:
            return self._check(ex)
        except ConversionError as e:
            return self._with_alternative(mode_refused(ex.mode, with_fix(e, FLOAT_ALONE)))

    def _none(self, fused, nnapi_model) -> ModeDone:
        with torch.no_grad():
            ex = export_float(fused, self.batch[0], self._paths("none"), f"{self.spec.stem} quant_none",
                              self.facts.xnnpack, nnapi=not self.nnapi_problems.get("none"), nnapi_model=nnapi_model)
        return self._check(ex)

    def _calibration_start(self):
        """What :meth:`_calibrate` runs: the fused float model (pre-quantized weights) or the prepared model."""
        with torch.no_grad():
            if self.qmodel is not None:
                return fused_float(self.model)
            return prepare_quantization(self.model, self.batch[0], self.scheme)

    def _calibrate(self, start):
        """The quantized model and the float model's top-1 per calibration input; pre-quantized: the top-1 only."""
        with torch.no_grad():  # grad mode is per thread
            if self.qmodel is not None:
                return top1_in_chunks(start, self.batch, self.spec.stem)
            return quantize(start, self.batch, f"{self.spec.stem} (quantized modes)", self.scheme)

    def _check(self, ex: ExportedVariant) -> ModeDone:
        checked = host_check(ex.cpu_path, ex.mode)
        agreement = None if ex.mode == "none" else self._agreement(ex, checked)
        if self._mismatched(agreement):
            ex.notes.append(mismatch_note(ex.mode, agreement))
        if ex.mode != "none" and not is_logits(as_float(checked.output)):
            ex.notes.append(f"quant_{ex.mode}: no top-1 agreement measured: the output is "
                            f"{list(checked.output.shape)}, not [N, classes] logits (the host check still refuses a "
                            "constant, NaN or infinite output)")
        out_spec = TensorSpec(**checked.record["output_spec"])
        common: Dict[str, Any] = {"format": "torchscript"}
        if self.declared:  # every forward() argument, as the ExecuTorch lane records them
            common["inputs"] = [spec_of(t).to_dict() for t in program_args(ex.cpu_input)]
        if ex.core_qparams:
            common["core_quantization"] = ex.core_qparams
        cpu = self._file(ex.cpu_path, ex.cpu_size, ex.cpu_sha256, ex.mode, "cpu", spec_of(program_args(ex.cpu_input)[0]), out_spec,
                         {**common, "export": ex.cpu_export, "mobile_optimized": ex.mobile_optimized})
        if ex.nnapi_path is None:
            refusal = self._refusal(ex)
            log.warning("warning: %s", refusal.line())
            return ModeDone(ex.mode, [cpu], checked.record, agreement, list(ex.notes), (refusal,))
        nnapi = self._file(ex.nnapi_path, ex.nnapi_size, ex.nnapi_sha256, ex.mode, "nnapi", spec_of(program_args(ex.nnapi_input)[0]),
                           out_spec, {**common, "nnapi_nhwc": True, "needs": NNAPI_NEEDS})
        return ModeDone(ex.mode, [cpu, nnapi], checked.record, agreement, list(ex.notes))

    def _refusal(self, ex: ExportedVariant) -> NnapiRefusal:
        """Why ``ex`` has no NNAPI model: the problems found before converting, or what the converter said."""
        problems = self.nnapi_problems.get(ex.mode) or []
        if problems:
            lines = tuple(p.line() for p in problems)
            reason = "torch's NNAPI converter cannot take it (checked before converting): " + "; ".join(lines[:3]) + (
                f"; and {len(lines) - 3} more" if len(lines) > 3 else "")
        else:
            err = ex.nnapi_error
            lines = tuple(x for x in (err.what if err else "", err.cause if err else "") if x)
            reason = "; ".join(lines) or "torch's NNAPI converter refused it"
        return NnapiRefusal(model_file_names(self.spec.stem, ex.mode)[1], self.spec.stem, ex.mode, reason, lines,
                            self.alternative())

    def alternative(self) -> str:
        """The lane that takes a model NNAPI refuses: ExecuTorch, when torch.export captures the model (its first
        step; the portable kernels run every core ATen operator, XNNPACK takes what it can on the CPU)."""
        if self._alternative is None:
            self._alternative = executorch_alternative(self.model, self.batch[0], self.spec.name)
        return self._alternative

    def _agreement(self, ex: ExportedVariant, checked) -> Optional[Dict[str, Any]]:
        """Top-1 agreement of a quantized mode with the float model on the calibration inputs.

        quant_full and quant_core run one quantized core (the same scripted modules; core adds the quantize and
        dequantize steps whose parameters full's input uses), so they predict alike.  The second of them is
        measured again only when its output on the bundled input (calibration input #0 in both) differs from the
        first's; otherwise it gets the first's figures, marked ``measured_on``."""
        output = as_float(checked.output)
        first = self._first_quantized
        if first is not None and output.shape == first[1].shape and torch.equal(output, first[1]):
            return {**first[2], "measured_on": f"quant_{first[0]}"} if first[2] else first[2]
        if self._float_top1 is not None:  # pre-quantized weights: the float predictions, computed meanwhile
            self.agreement.set_reference(self._float_top1.result())
            self._float_top1 = None
        qp = ex.core_qparams if ex.mode == "full" else None
        agreement = self.agreement.measure(checked.module, qp)
        if first is None:
            self._first_quantized = (ex.mode, output, agreement)
        return agreement

    def _mismatched(self, agreement: Optional[Dict[str, int]]) -> bool:
        """Pre-quantized weights that disagree with trained float weights on most inputs (random float weights
        predict noise, so there it says nothing)."""
        return (self.quantized is not None and self.weights.origin != "random" and bool(agreement)
                and agreement["agree"] * 2 < agreement["total"])

    def _file(self, path: Path, size: int, sha: str, mode: str, backend: str, inp: TensorSpec, outp: TensorSpec,
              extra: Dict[str, Any]) -> ModelFile:
        return ModelFile(file=path.name, path=path.resolve(), sha256=sha, size=size, model=self.spec.name,
                         stem=self.spec.stem, mode=mode, backend=backend, input=inp, output=outp, conversion={},
                         extra=extra)

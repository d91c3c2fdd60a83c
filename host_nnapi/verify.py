"""`invoke verify`: check every shipped NNAPI model, operation by operation, against its CPU model.

Per variant of a convert manifest (the files exactly as shipped; a file that does not match its manifest
sha256 is a record problem, exit 5):

1. static checks on the decoded NNAPI model (:mod:`host_nnapi.checks`);
2. the CPU model converted again (:mod:`host_nnapi.reference`) and aligned with the shipped model
   (:mod:`host_nnapi.align`): every operand's type, shape, quantization and constant bytes compared;
3. every shipped operation run on the CPU model's own input values and compared with the CPU model's output,
   within a per-operation LSB bound; a CPU kernel bug is told apart with a float reference
   (:mod:`host_nnapi.layerwise`);
4. end to end on the bundled (calibrated) inputs and random ones: against the CPU model's own conversion on
   the same kernels (0 LSB), against the CPU model (0 LSB under qnnpack rounding), top-1/top-5 agreement on
   the calibrated inputs.

The bounds and why are in :mod:`host_nnapi.rules` and docs/host-nnapi.md; the first operation that differs is
named in the failure (exit 8).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from toolchain.errors import RecordError, UsageError, VerificationError
from toolchain.fsutil import in_the_way, sha256_file
from toolchain.records import EXECUTORCH_SECTION, ConvertManifest, ModelFile, NnapiRefusal, VerifyRecord, verify_path
from toolchain.settings import default
from toolchain.variants import check_all

from . import checks, rules
from .align import Alignment, Difference, align, compare_operands, interface_differences
from .endtoend import EndToEnd, end_to_end, make_inputs
from .graph import Graph, decode_module, find_nnapi_module
from .kernels import ROUNDING_MODES
from .layerwise import FloatTolerance, LayerResult, compare_operations
from .reference import Reference, build_reference

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class VerifySettings:
    models: Path
    out: Optional[Path] = None  # default: <models>/verify.json
    variants: Tuple[str, ...] = ()  # default: all
    rounding: str = default("verify.rounding")
    float_atol: float = default("verify.float_atol")
    float_rtol: float = default("verify.float_rtol")
    max_lsb: int = default("verify.max_lsb")  # per operation under nnapi rounding (qnnpack: rules.op_bound)
    min_top1_agreement: float = default("verify.min_top1_agreement")
    min_top5_agreement: float = default("verify.min_top5_agreement")
    random_inputs: int = default("verify.random_inputs")
    seed: int = default("verify.seed")
    api_level: int = default("android.api_level")
    layerwise: str = default("verify.layerwise")  # "auto"/"always": operation by operation (every mode); "never": end to end only
    cache: Optional[Path] = None


@dataclass
class VariantResult:
    variant: str
    mode: str
    ok: bool
    quantized: bool
    files: Dict[str, Dict[str, str]] = field(default_factory=dict)
    inputs: int = 0
    calibrated_inputs: int = 0
    max_abs_diff: float = 0.0
    max_lsb_diff: Optional[int] = None
    lsb_vs_reference: Optional[int] = None
    e2e_bound: Optional[int] = None
    top1_agreement: Optional[float] = None
    top5_agreement: Optional[float] = None
    agreement_note: str = ""  # why top-1/top-5 agreement was reported, not judged
    findings: List[Dict[str, Any]] = field(default_factory=list)
    differences: List[Dict[str, Any]] = field(default_factory=list)
    layers: List[Dict[str, Any]] = field(default_factory=list)
    layerwise_note: str = ""
    cpu_kernel_issues: List[str] = field(default_factory=list)
    first_divergence: Optional[str] = None
    failures: List[str] = field(default_factory=list)
    error: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class VerifyResult:
    json_path: Optional[Path]  # None: nothing to verify (every selected NNAPI model was refused by convert)
    rows: List[VariantResult]
    library: str
    skipped: List[NnapiRefusal] = field(default_factory=list)  # variants whose NNAPI model convert did not write
    nothing: str = ""  # why nothing was verified (a directory of ExecuTorch programs only), said to the user

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)


def verify(settings: VerifySettings) -> VerifyResult:
    """Verify every (or the selected) variant; write verify.json; raise VerificationError if any fails."""
    if settings.rounding not in ROUNDING_MODES:
        raise UsageError(f"unknown rounding {settings.rounding!r}", remedy=f"use one of: {', '.join(ROUNDING_MODES)}")
    check_all(settings.variants, "--variant", programs=False)  # the values first: before the manifest is read
    manifest = ConvertManifest.load(settings.models)
    out = _results_path(settings, manifest)
    selected, skipped = _select_with_refusals(manifest, settings.variants)
    for refusal in skipped:  # said once, by the task's printer (workflow/show.verify; --json: in the document)
        log.debug("verify: skipped %s", refusal.line())
    if not selected:  # nothing to check: say so, write nothing (a record of no check would pass for one)
        return VerifyResult(None, [], "", skipped, "" if skipped else _nothing_to_verify(manifest))
    for _, pair in selected:  # a file that is not what the manifest recorded is a record problem (exit 5)
        pair["cpu"].check_hash()
        pair["nnapi"].check_hash()
    from . import runtime

    from .kernels.shared import shared_results

    lib = runtime.load(cache=settings.cache)
    from toolchain.logs import native_output_to_log
    from toolchain.progress import progress

    rows = []
    # torch's C++ warnings go to the run log, not between verify's lines; an operation run again on the same bytes
    # is computed once (kernels/shared.py)
    with native_output_to_log(), shared_results() as shared, progress("host NNAPI verify", len(selected)) as bar:
        for name, pair in selected:
            bar.describe(f"verifying {name}")
            rows.append(verify_pair(name, pair["cpu"], pair["nnapi"], settings))
            bar.advance()
    log.debug("host NNAPI operations: %d computed, %d identical ones shared", shared.misses, shared.hits)
    from .build import code_digest

    result = VerifyResult(out, rows, str(lib), skipped)
    out = result.json_path = _kept_apart_if_failed(out, result.ok)
    VerifyRecord(out, str(manifest.path), str(lib), sha256_file(Path(lib)), settings.rounding,
                 _thresholds(settings), [r.to_dict() for r in rows], code=code_digest()).write()
    if not result.ok:
        raise _failure(rows, out, settings.api_level)
    return result


def is_current(settings: VerifySettings) -> Tuple[bool, str]:
    """Is the verify record already what verifying these models again would write?  From hashes and records
    alone: no torch, nothing built or run (see ``VerifyRecord.current_for``)."""
    from .build import built_library, code_digest

    try:
        manifest = ConvertManifest.load(settings.models)
        out = Path(settings.out) if settings.out else verify_path(manifest.dir, settings.rounding)
        if not out.is_file():
            return False, f"no {out.name} yet"
        record = VerifyRecord.load(out)
        selected, skipped = _select_with_refusals(manifest, settings.variants)
        if not selected:
            return False, "no NNAPI model to verify"
        files = [f for _, pair in selected for f in (pair["cpu"], pair["nnapi"])]
        for f in files:
            f.check_hash()
    except (RecordError, UsageError) as e:
        return False, e.what
    lib = built_library(settings.cache)
    return record.current_for(files, sha256_file(lib) if lib else None, code_digest(), settings.rounding,
                              _thresholds(settings))


def _results_path(settings: VerifySettings, manifest: ConvertManifest) -> Path:
    out = Path(settings.out) if settings.out else verify_path(manifest.dir, settings.rounding)
    if out.is_dir():
        raise UsageError(f"the results file {out} is a directory", remedy="give a file name: --out path/to/verify.json")
    problem = in_the_way(out, "the results file (--out)")  # a file where one of its directories should be
    if problem is not None:
        raise problem
    out.parent.mkdir(parents=True, exist_ok=True)
    return out


def _nothing_to_verify(manifest: ConvertManifest) -> str:
    programs = " (it holds ExecuTorch programs: `invoke bench-executorch` checks those on this machine)" \
        if manifest.data.get(EXECUTORCH_SECTION) else ""
    return (f"{manifest.dir} has no TorchScript NNAPI models, which is what verify checks{programs}; "
            "convert them with `invoke convert --format torchscript`")


def _select_with_refusals(manifest: ConvertManifest,
                          wanted) -> Tuple[List[Tuple[str, Dict[str, ModelFile]]], List[NnapiRefusal]]:
    """The variants to verify, and those whose NNAPI model convert did not write (skipped with the reason)."""
    variants = manifest.variants()
    selected, skipped = [], []
    for name in list(wanted) or sorted(variants):
        pair = variants[name] if name in variants else manifest.find(name)
        refusal = manifest.refusal(pair["cpu"].stem, pair["cpu"].mode) if "cpu" in pair else None
        if "nnapi" not in pair and refusal is not None:
            skipped.append(refusal)
            continue
        if "cpu" not in pair or "nnapi" not in pair:
            raise RecordError(f"variant {name} lacks a {'cpu' if 'cpu' not in pair else 'nnapi'} model in {manifest.path}",
                              remedy="run `invoke convert` again")
        selected.append((pair["cpu"].qualified_variant, pair))
    return selected, skipped


def _thresholds(s: VerifySettings) -> Dict[str, Any]:
    return {"float_atol": s.float_atol, "float_rtol": s.float_rtol, "max_lsb": s.max_lsb,
            "op_lsb_bound": {"qnnpack": rules.OP_LSB_BOUND["qnnpack"], "nnapi": s.max_lsb},
            "qnnpack_inexact_ops": {str(k.name): v for k, v in rules.QNNPACK_INEXACT_OPS.items()},
            "e2e_lsb_vs_reference": rules.E2E_LSB_BOUND_VS_REFERENCE,
            "e2e_lsb_vs_cpu": rules.E2E_LSB_BOUND_VS_CPU, "float_reference_lsb": rules.FLOAT_REFERENCE_LSB,
            "min_top1_agreement": s.min_top1_agreement, "min_top5_agreement": s.min_top5_agreement}


def _kept_apart_if_failed(out: Path, ok: bool) -> Path:
    """A failing check never replaces a record of a passing one: it goes to ``<name>-failed.json`` beside it."""
    if ok or not out.is_file():
        return out
    try:
        if not VerifyRecord.load(out).ok:
            return out
    except RecordError:
        return out
    return out.with_name(f"{out.stem}-failed{out.suffix}")


def _api_level_only(row: VariantResult) -> bool:
    """Every failure of the row is a static finding that the target API level is too low (not a wrong model)."""
    level = {f["message"] for f in row.findings if f.get("check") == "feature-level" and f.get("severity") == "error"}
    return bool(row.failures) and set(row.failures) <= level


def _needed_level(rows: List[VariantResult]) -> int:
    import re

    return max((int(m) for r in rows for f in r.failures for m in re.findall(r"needs API level (\d+)", f)), default=0)


def _failure(rows: List[VariantResult], out: Path, api_level: int) -> VerificationError:
    bad = [r for r in rows if not r.ok]
    if all(_api_level_only(r) for r in bad):
        need = _needed_level(bad)
        return VerificationError(
            f"{len(bad)} of {len(rows)} NNAPI model(s) need API level {need}, above the target API level {api_level}: "
            + ", ".join(r.variant for r in bad),
            cause="the models are fine; the target given (--api-level / android.api_level) is below what they use "
                  f"(first: {bad[0].failures[0]})",
            remedy=f"verify for the phones' API level: `invoke verify --api-level {need}` (or set android.api_level); "
                   f"phones below API level {need} cannot run these NNAPI models (use the CPU models there)",
        )
    return VerificationError(
        f"{len(bad)} of {len(rows)} NNAPI model(s) do not match their CPU model on the host NNAPI: "
        + ", ".join(f"{r.variant} (first differing: {r.first_divergence or 'the model as a whole'})" for r in bad),
        cause="; ".join(f"{r.variant}: {'; '.join(r.failures)}" for r in bad),
        remedy=f"see {out} (differences, per-operation results); the named operation is where the shipped NNAPI "
               "model stops computing what the CPU model computes: re-run `invoke convert --force` and verify "
               "again, and report it if it persists",
    )


@contextlib.contextmanager
def _qengine(name: str):
    import torch

    old = torch.backends.quantized.engine
    if name in torch.backends.quantized.supported_engines:
        torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = old


def verify_pair(name: str, cpu_file: ModelFile, nnapi_file: ModelFile, s: VerifySettings) -> VariantResult:
    row = VariantResult(variant=name, mode=cpu_file.mode, ok=False, quantized=cpu_file.mode != "none",
                        files={b: {"file": f.file, "sha256": f.sha256} for b, f in (("cpu", cpu_file), ("nnapi", nnapi_file))})
    with _qengine("qnnpack"):  # quantized weights are packed for the engine current at load time
        loaded = _load(cpu_file, nnapi_file, row)
        if loaded is None:
            row.failures.append(row.error)
            return row
        cpu, nnapi, graph = loaded
        findings = checks.static_checks(graph, s.api_level) + checks.wrapper_checks(nnapi, graph)
        row.findings = [f.to_dict() for f in findings]
        inputs, row.calibrated_inputs = make_inputs(cpu, nnapi_file, s.random_inputs, s.seed)
        row.inputs = len(inputs)
        ref, al, layers = _operation_by_operation(cpu, nnapi, nnapi_file, graph, inputs, s, row)
        e2e = end_to_end(cpu, nnapi, inputs, row.calibrated_inputs, ref, al, graph, s.rounding)
    if s.rounding == "nnapi" and (cpu_file.conversion.get("weights") or {}).get("origin") == "random":
        row.agreement_note = ("reported, not judged: random weights give near-flat logits, so NNAPI's 1-LSB "
                              "requantization differences reorder the top classes (docs/host-nnapi.md); the "
                              "per-operation bounds decide")
    _judge(row, s, findings, al, layers, e2e, graph)
    return row


def _load(cpu_file: ModelFile, nnapi_file: ModelFile, row: VariantResult):
    import torch

    try:
        cpu = torch.jit.load(str(cpu_file.path), map_location="cpu").eval()
        nnapi = torch.jit.load(str(nnapi_file.path), map_location="cpu").eval()
    except RuntimeError as e:
        row.error = f"cannot load the models: {str(e).strip().splitlines()[0] if str(e).strip() else e}"
        return None
    try:
        graph = decode_module(nnapi)
    except (ValueError, RuntimeError) as e:
        row.error = f"cannot decode the NNAPI model inside {nnapi_file.file}: {e}"
        row.first_divergence = "the serialized NNAPI model"
        return None
    return cpu, nnapi, graph


def _operation_by_operation(cpu, nnapi, nnapi_file: ModelFile, graph: Graph, inputs, s: VerifySettings, row: VariantResult
                            ) -> Tuple[Optional[Reference], Optional[Alignment], List[LayerResult]]:
    import torch

    if not inputs or s.layerwise == "never" or len(inputs[0]) > 1:
        row.layerwise_note = ("no input to run the CPU model on" if not inputs else "not compared (--layerwise never)"
                              if s.layerwise == "never" else "not compared: the model takes several inputs (the "
                              "operation-by-operation reference is built for one); the end-to-end checks ran")
        return None, None, []
    try:
        with torch.no_grad():
            ref = build_reference(cpu, inputs[0][0], nnapi_file.input.memory_format == "channels_last")
    except Exception as e:  # noqa: BLE001 - the serializer raises bare Exceptions; say why instead
        row.layerwise_note = (f"operation-by-operation comparison not possible: the CPU model cannot be converted "
                              f"again ({type(e).__name__}: {str(e)[:200]}); only the end-to-end checks ran")
        return None, None, []
    al = align(graph, ref.graph)
    if al.ok:
        al.differences.extend(compare_operands(graph, ref.graph, al))
        al.differences.extend(interface_differences(find_nnapi_module(nnapi), graph, ref.channels_last, al))
        al.differences.sort(key=lambda d: (d.operation < 0, d.operation))
    row.differences = [d.to_dict() for d in al.differences]
    if al.differences and not al.operands:
        row.layerwise_note = "the shipped model's structure differs from the CPU model's conversion"
        return ref, al, []
    tol = FloatTolerance(s.float_atol, s.float_rtol)
    layers = compare_operations(graph, al, ref, s.rounding, tol, nnapi_bound=s.max_lsb)
    row.layers = [x.to_dict() for x in layers]
    row.layerwise_note = (f"{len(layers)} of {len(graph.operations)} operations of the shipped NNAPI model run on the "
                          "CPU model's own values")
    return ref, al, layers


def _judge(row: VariantResult, s: VerifySettings, findings, al: Optional[Alignment], layers: List[LayerResult],
           e2e: EndToEnd, graph: Graph) -> None:
    row.max_abs_diff, row.max_lsb_diff, row.lsb_vs_reference = e2e.max_abs, e2e.max_lsb, e2e.lsb_vs_reference
    row.top1_agreement, row.top5_agreement = e2e.top1, e2e.top5
    suspects = [x for x in layers if x.cpu_kernel_suspect]
    row.cpu_kernel_issues = [f"{x.describe()}: {x.note}" for x in suspects]
    row.findings.extend(checks.Finding("cpu-kernel", "warning", f"the CPU model is wrong at {issue}", x.operation).to_dict()
                        for issue, x in zip(row.cpu_kernel_issues, suspects))
    first = _first_divergence(al.differences if al else [], layers, checks.errors(findings), graph)
    row.first_divergence = row.first_divergence or first
    where = f" (first differing: {first})" if first else ""
    if e2e.error:
        row.failures.append(e2e.error + where)
    row.failures.extend(_operation_failures(al, layers))
    row.failures.extend(f + where for f in _end_to_end_failures(row, s, e2e, graph))
    row.failures.extend(f.message for f in checks.errors(findings))
    row.ok = not row.failures


def _operation_failures(al: Optional[Alignment], layers: List[LayerResult]) -> List[str]:
    out = []
    if al and al.differences:
        out.append(f"{len(al.differences)} difference(s) from the CPU model's conversion; first: "
                   f"{al.differences[0].describe()}")
    bad = [x for x in layers if not x.ok]
    if bad:
        out.append(f"{len(bad)} operation(s) differ from the CPU model when run on its values; first: "
                   f"{bad[0].describe()}: {_layer_detail(bad[0])}")
    return out


def _layer_detail(x: LayerResult) -> str:
    if x.note:
        return x.note
    if x.max_lsb is not None:
        return f"{x.max_lsb} LSB (bound {x.bound})"
    return f"max abs diff {x.max_abs:.3g}"


def _first_divergence(differences: List[Difference], layers: List[LayerResult], errors, graph: Graph) -> Optional[str]:
    cands = [(d.operation, d.name) for d in differences]
    cands += [(x.operation, x.describe()) for x in layers if not x.ok]
    cands += [(f.operation, f"operation {f.operation} {graph.operations[f.operation].name}") for f in errors
              if 0 <= f.operation < len(graph.operations)]
    if not cands:
        return None
    return min(cands, key=lambda c: (c[0] < 0, c[0]))[1]


def _float_failure(s: VerifySettings, e2e: EndToEnd) -> List[str]:
    limit = s.float_atol + s.float_rtol * max(e2e.ref_magnitude, 1.0)
    return [f"max abs diff {e2e.max_abs:.3g} > {limit:.3g}"] if e2e.max_abs > limit else []


def _agreement_failures(s: VerifySettings, e2e: EndToEnd) -> List[str]:
    out = []
    if e2e.top1 is not None and e2e.top1 < s.min_top1_agreement:
        out.append(f"top-1 agreement {e2e.top1:.2f} < {s.min_top1_agreement} on the calibrated inputs")
    if e2e.top5 is not None and e2e.top5 < s.min_top5_agreement:
        out.append(f"top-5 agreement {e2e.top5:.2f} < {s.min_top5_agreement} on the calibrated inputs")
    return out


def _quantized_failures(row: VariantResult, s: VerifySettings, e2e: EndToEnd, graph: Graph) -> List[str]:
    """Against the CPU model: its LSB bound (recorded in ``row.e2e_bound``), then top-1/top-5 agreement."""
    if row.cpu_kernel_issues:
        return []  # the CPU model is not a trustworthy reference end to end; the operations decided
    out = []
    row.e2e_bound = rules.e2e_bound_vs_cpu(s.rounding, {op.type for op in graph.operations})
    if row.e2e_bound is not None and (e2e.max_lsb or 0) > row.e2e_bound:
        out.append(f"end to end {e2e.max_lsb} LSB from the CPU model (bound {row.e2e_bound} under {s.rounding} rounding)")
    return out if row.agreement_note else out + _agreement_failures(s, e2e)


def _end_to_end_failures(row: VariantResult, s: VerifySettings, e2e: EndToEnd, graph: Graph) -> List[str]:
    if e2e.error:
        return []
    out = []
    if e2e.lsb_vs_reference is not None and e2e.lsb_vs_reference > rules.E2E_LSB_BOUND_VS_REFERENCE:
        out.append(f"end to end {e2e.lsb_vs_reference} LSB from the CPU model's own conversion on the same kernels "
                   f"(bound {rules.E2E_LSB_BOUND_VS_REFERENCE})")
    if not row.quantized:
        return out + _float_failure(s, e2e)
    return out + _quantized_failures(row, s, e2e, graph)


__all__ = ["VerifySettings", "VerifyResult", "VariantResult", "verify", "verify_pair", "make_inputs"]

"""The formats torchdroid makes and runs, behind one interface: TorchScript (CPU and NNAPI models) and ExecuTorch
(``.pte`` programs).  A stage loops over the formats asked for (``<stage>.format``) and calls each one's part here,
with the settings ``workflow/stage_settings.per_format`` resolved for it; no stage branches on a format's name.

Nothing here imports torch: each part imports its module when it is called.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple


class Format:
    """One format: how to make it from a model, and how to check and time it on the host."""

    name = ""
    title = ""  # its name in a sentence
    times_cpu_models = False  # its bench times the TorchScript CPU models (its baselines) in its own rounds

    def convert(self, settings: Any) -> Any:
        """Make the format's files from the model (``invoke convert``); the result has a ``manifest_path``."""
        raise NotImplementedError

    def bench(self, settings: Any, timed: Optional[Dict[str, Any]] = None, taken: Any = None) -> Any:
        """Check and time the format's files on this machine (``invoke bench``); ``timed``: the TorchScript CPU
        models' rounds of this command (file -> converter.rounds.Subject), filled by a format that
        ``times_cpu_models``, taken by the TorchScript format (with ``taken``, how the rounds were taken)."""
        raise NotImplementedError

    def raise_for_failures(self, bench_result: Any) -> None:
        """After the tables are shown: a typed error when a file does not compute what its reference does."""


class TorchScript(Format):
    name = "torchscript"
    title = "TorchScript"

    def convert(self, settings: Any) -> Any:
        from .pipeline import convert

        return convert(settings)

    def bench(self, settings: Any, timed: Optional[Dict[str, Any]] = None, taken: Any = None) -> Any:
        from .host_bench import run_host_bench

        return run_host_bench(settings, timed, taken)


class ExecuTorch(Format):
    name = "executorch"
    title = "ExecuTorch"
    times_cpu_models = True

    def convert(self, settings: Any) -> Any:
        from .executorch import convert_executorch

        return convert_executorch(settings)

    def bench(self, settings: Any, timed: Optional[Dict[str, Any]] = None, taken: Any = None) -> Any:
        from .host_bench import run_pte_bench

        return run_pte_bench(settings, timed)

    def raise_for_failures(self, bench_result: Any) -> None:
        bench_result.raise_for_failures()  # exit 8 naming the programs that differ from their reference


FORMATS: Dict[str, Format] = {f.name: f for f in (TorchScript(), ExecuTorch())}


def bench_all(settings: Dict[str, Any]) -> Dict[str, Any]:
    """``invoke bench``'s loop: ``{format: result}`` in ``settings``' order.  With TorchScript and a format that times
    the TorchScript CPU models as its baselines (same models and protocol), that format runs first and times every
    CPU model in its rounds; the TorchScript result is made from those rounds: each CPU model is timed once."""
    ts = settings.get(TorchScript.name)
    timer = next((n for n in settings if FORMATS[n].times_cpu_models and getattr(settings[n], "legacy", False)
                  and ts is not None and _same_protocol(ts, settings[n])), None)
    timed: Optional[Dict[str, Any]] = {} if timer else None
    results = {timer: FORMATS[timer].bench(settings[timer], timed)} if timer else {}
    taken = getattr(results.get(timer), "conditions", None)
    for name in settings:
        if name not in results:
            results[name] = FORMATS[name].bench(settings[name], timed, taken)
    return {name: results[name] for name in settings}


def _same_protocol(a: Any, b: Any) -> bool:
    """The same models timed with the same protocol (converter/host_bench.HostBenchSettings)."""
    return all(getattr(a, k) == getattr(b, k) for k in ("models", "warmup", "iters", "threads", "repeat"))


def convert_each(settings: Dict[str, Any]) -> Tuple[Dict[str, Any], Optional[Exception]]:
    """Each format's convert on its own (``{format: settings}``): ``({format: result}, the error to raise after
    the results are shown, or None)``.

    A format that refuses part of what was asked (PartlyConverted, exit 10) gives its result and its error; a format
    that makes nothing (ConversionError, exit 6) does not stop the others: the run is then partly converted (exit 10)
    when another format made something, and refused with the first error when none did."""
    from toolchain.errors import ConversionError, PartlyConverted

    results: Dict[str, Any] = {}
    errors: Dict[str, ConversionError] = {}
    for name, s in settings.items():
        try:
            results[name] = FORMATS[name].convert(s)
        except PartlyConverted as e:
            results[name], errors[name] = e.result, e
        except ConversionError as e:
            errors[name] = e
    if not results:
        raise next(iter(errors.values()))
    if len(errors) <= 1 and all(name in results for name in errors):
        return results, next(iter(errors.values()), None)
    return results, PartlyConverted(
        "; ".join(f"{name}: {e.what}" if name in results else f"the {name} format made nothing: {e.what}"
                  for name, e in errors.items()),
        cause=" | ".join(f"{name}: {e.cause}" for name, e in errors.items() if e.cause),
        remedy=" | ".join(f"{name}: {e.remedy}" for name, e in errors.items() if e.remedy))

"""The formats torchdroid makes and runs, behind one interface: TorchScript (CPU and NNAPI models) and ExecuTorch
(``.pte`` programs).  A stage loops over the formats asked for (``<stage>.format``) and calls each one's part here,
with the settings ``workflow/stage_settings.per_format`` resolved for it; no stage branches on a format's name.

Nothing here imports torch: each part imports its module when it is called.
"""

from __future__ import annotations

from typing import Any, Dict


class Format:
    """One format: how to make it from a model, and how to check and time it on the host."""

    name = ""

    def convert(self, settings: Any) -> Any:
        """Make the format's files from the model (``invoke convert``); the result has a ``manifest_path``."""
        raise NotImplementedError

    def bench(self, settings: Any) -> Any:
        """Check and time the format's files on this machine (``invoke bench``)."""
        raise NotImplementedError

    def raise_for_failures(self, bench_result: Any) -> None:
        """After the tables are shown: a typed error when a file does not compute what its reference does."""


class TorchScript(Format):
    name = "torchscript"

    def convert(self, settings: Any) -> Any:
        from .pipeline import convert

        return convert(settings)

    def bench(self, settings: Any) -> Any:
        from .host_bench import run_host_bench

        return run_host_bench(settings)


class ExecuTorch(Format):
    name = "executorch"

    def convert(self, settings: Any) -> Any:
        from .executorch_lane import convert_executorch

        return convert_executorch(settings)

    def bench(self, settings: Any) -> Any:
        from .pte_host import run_pte_bench

        return run_pte_bench(settings)

    def raise_for_failures(self, bench_result: Any) -> None:
        bench_result.raise_for_failures()  # exit 8 naming the programs that differ from their reference


FORMATS: Dict[str, Format] = {f.name: f for f in (TorchScript(), ExecuTorch())}

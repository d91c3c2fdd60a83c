"""A test's ExecuTorch section written into a models directory, through the one manifest record (a new manifest when
there is none): the fixtures of the stages that read the section."""

from pathlib import Path
from typing import Any, Dict

from toolchain.records import ConvertManifest


def write_section(models_dir: Path, section: Dict[str, Any]) -> Path:
    man = ConvertManifest.load(models_dir) if ConvertManifest.exists(models_dir) else ConvertManifest.empty(models_dir)
    return man.write_executorch(section)

"""Variant names: the one format of the names convert writes and make-app, deploy, verify and `all` look up.

A variant is a TorchScript quantization mode, ``quant_none``, ``quant_core`` or ``quant_full`` (:data:`MODES`),
or an ExecuTorch program, ``<precision>-<delegate>`` such as ``fp32-xnnpack`` (:data:`PRECISIONS`,
:data:`DELEGATES`); optionally after its model's file-name stem and a hyphen (``mobilenetv2-quant_full``,
``resnet18-int8-xnnpack``), so that two models in one directory never share a name.  Files add a suffix:
``mobilenetv2-quant_full-cpu.pt``, ``mobilenetv2-fp32-xnnpack.pte``.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional, Tuple

from .errors import UsageError

MODES = ("none", "core", "full")  # TorchScript quantization modes, in pipeline order
PRECISIONS = ("fp32", "int8")  # ExecuTorch programs
DELEGATES = ("xnnpack", "portable", "vulkan")  # what `invoke convert --format executorch` lowers to on this machine
# --quant chooses the ExecuTorch precisions too: none -> the fp32 programs, a quantized mode (core, full) -> int8
PRECISION_OF_MODE = {"none": "fp32", "core": "int8", "full": "int8"}
MODE_OF_PRECISION = {"fp32": "none", "int8": "full"}  # the --quant that asks for a precision's programs alone


def precisions(modes: Iterable[str]) -> Tuple[str, ...]:
    """The ExecuTorch precisions the quantization modes ``modes`` ask for (:data:`PRECISION_OF_MODE`), in
    :data:`PRECISIONS` order."""
    asked = {PRECISION_OF_MODE[m] for m in modes}
    return tuple(p for p in PRECISIONS if p in asked)


_STEM = r"[A-Za-z0-9_.]+"  # a model's file-name stem (converter.models writes [a-z0-9_])
_LEGACY = rf"quant_(?:{'|'.join(MODES)})"
_PROGRAM = rf"(?:{'|'.join(PRECISIONS)})-(?:{'|'.join(DELEGATES)})"
_NAME = re.compile(rf"(?:(?P<stem>{_STEM})-)?(?P<variant>{_LEGACY}|{_PROGRAM})")
# a program of a delegate the converter does not write: named as such rather than as a malformed name
_ANY_DELEGATE = re.compile(rf"(?:{_STEM}-)?(?:{'|'.join(PRECISIONS)})-(?P<delegate>[a-z][a-z0-9_]*)")
# (stem or None, variant) inside a file name: ``assets/mobilenetv2-quant_full-cpu.pt``, ``fp32-xnnpack.pte``
IN_FILE_NAME = re.compile(rf"(?:([A-Za-z0-9_.+-]+?)-)?({_LEGACY}|{_PROGRAM})(?=$|[-.])")

_LEGACY_REMEDY = "quant_none, quant_core or quant_full (or <model>-quant_full, e.g. mobilenetv2-quant_full)"
_PROGRAM_REMEDY = "an ExecuTorch program: fp32-xnnpack, int8-xnnpack, fp32-portable (or <model>-fp32-xnnpack)"


def split(name: str) -> Optional[Tuple[str, str]]:
    """``(stem, variant)`` of a well-formed name (stem ``""`` when it has none), else None."""
    m = _NAME.fullmatch(name or "")
    return (m["stem"] or "", m["variant"]) if m else None


def is_program(name: str) -> bool:
    """Does ``name`` name an ExecuTorch program (``fp32-xnnpack``) rather than a TorchScript variant?"""
    parts = split(name)
    return parts is not None and not parts[1].startswith("quant_")


def with_stem(variant: str, stem: str) -> str:
    """A bare variant named with its model (``quant_full`` -> ``mobilenetv2-quant_full``); a named one is kept."""
    parts = split(variant)
    return f"{stem}-{variant}" if parts and not parts[0] else variant


def check(name: str, option: str, programs: bool = True) -> str:
    """``name`` when it is a variant name (a TorchScript one, or a program too when ``programs``); else a
    UsageError naming the option (exit 2), before any record is read."""
    value = name or ""
    parts = split(value)
    if parts and (programs or not is_program(value)):
        return value
    remedy = f"pass {option} {_LEGACY_REMEDY}" + (f", or {_PROGRAM_REMEDY}" if programs else "")
    other = _ANY_DELEGATE.fullmatch(value)
    if programs and other:
        raise UsageError(f"{option} {value!r} names an unknown ExecuTorch delegate {other['delegate']!r}",
                         cause=f"`invoke convert --format executorch` writes programs for: {', '.join(DELEGATES)}",
                         remedy=remedy)
    raise UsageError(f"{option} {name!r} is not a converted variant name",
                     cause="a variant is a quantization mode" + (" or an ExecuTorch program" if programs else "")
                           + ", optionally after its model's name", remedy=remedy)


def check_all(names: Iterable[str], option: str, programs: bool = True) -> None:
    """:func:`check` for each name."""
    for name in names:
        check(name, option, programs)

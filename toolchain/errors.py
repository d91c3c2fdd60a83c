"""One exception root for torchdroid.

Every failure a user can meet is a :class:`TorchdroidError` subclass that says
*what* failed, the likely *cause* and *what to do* (an exact command or
setting).  ``tasks.py`` turns it into a clean message and the exit code of the
subclass; ``--debug`` shows the traceback as well.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Sequence


class TorchdroidError(Exception):
    """Root of every error torchdroid reports to a user."""

    exit_code = 1
    label = "error"

    def __init__(
        self,
        what: str,
        *,
        cause: Optional[str] = None,
        remedy: Optional[str] = None,
        log_path: Optional[Path] = None,
        tail: Optional[Iterable[str]] = None,
    ) -> None:
        super().__init__(what)
        self.what = what
        self.cause = cause
        self.remedy = remedy
        self.log_path = Path(log_path) if log_path else None
        self.tail = list(tail or [])

    def __str__(self) -> str:
        lines = [self.what]
        if self.cause:
            lines.append(f"  cause: {self.cause}")
        if self.tail:
            lines.append("  last lines of output:")
            lines.extend(f"    | {line}" for line in self.tail)
        if self.log_path:
            lines.append(f"  full log: {self.log_path}")
        if self.remedy:
            lines.append(f"  fix: {self.remedy}")
        return "\n".join(lines)

    def one_line(self) -> str:
        """What, cause and fix on one line: a refusal as a manifest records it."""
        return "; ".join(part for part in (self.what, self.cause, self.remedy and f"fix: {self.remedy}") if part)


class UsageError(TorchdroidError):
    """Bad command-line or configuration input (unknown model, mode, path...)."""

    exit_code = 2
    label = "bad input"


class BusyError(UsageError):
    """Another torchdroid run holds the lock of the output directory (exit 2: wait and run again)."""

    label = "busy"


class NoSpaceError(UsageError):
    """Not enough disk space for a write (checked before, or ENOSPC during it); exit 2: free space or use another place."""

    label = "no space"


class WriteError(UsageError):
    """The file system refused a write (read-only, permission taken away, a failing disk); exit 2: fix it or write
    elsewhere."""

    label = "file system"


class ToolNotFound(TorchdroidError):
    """An external tool (NDK, adb, javac, gradle, a C compiler...) is missing or unusable."""

    exit_code = 3
    label = "missing tool"


class ToolFailed(TorchdroidError):
    """An external tool ran and failed; carries the log path and the last lines."""

    exit_code = 4
    label = "tool failed"


class RecordError(TorchdroidError):
    """A machine-readable record (manifest, build-info) is missing, stale or corrupt."""

    exit_code = 5
    label = "record"


class ConversionError(TorchdroidError):
    """A model could not be quantized, traced or converted."""

    exit_code = 6
    label = "conversion"


class PartlyConverted(ConversionError):
    """Some of the programs asked for were made and recorded, others refused (each with its reason in the manifest):
    exit 10, so a script sees that not everything it asked for exists, and later stages use what does.  ``result``
    is the lane's result (what was made), for the caller to show before the error."""

    exit_code = 10
    label = "conversion (partly made)"

    def __init__(self, what: str, *, result: Any = None, **kwargs: Any) -> None:
        super().__init__(what, **kwargs)
        self.result = result

    @classmethod
    def of(cls, lane: str, stem: str, made: Sequence[str], refused: Dict[str, str], where: Path, fix: str = "",
           result: Any = None) -> "PartlyConverted":
        """The one message of both lanes: what was made, what was refused and why (``refused``: name -> reason,
        as the manifest records it), where the made ones are."""
        return cls(f"{stem}: {len(made)} {lane} program(s) made ({', '.join(made)}), {len(refused)} refused "
                   f"({', '.join(refused)})",
                   cause="; ".join(f"{', '.join(n for n in refused if refused[n] == why)}: {why}"
                                   for why in dict.fromkeys(refused.values())),  # one reason once
                   remedy=f"the programs made are in {where} and its manifest (the later stages use them); "
                          f"for the refused: {fix or 'see the cause'}", result=result)


class DeviceError(TorchdroidError):
    """A device is absent, unauthorized, offline or unsuitable."""

    exit_code = 7
    label = "device"


class VerificationError(TorchdroidError):
    """A produced artefact does not check out (wrong ELF, hash mismatch, NNAPI != CPU...)."""

    exit_code = 8
    label = "verification"


class CompatibilityError(TorchdroidError):
    """Converter torch and Android runtime do not match."""

    exit_code = 9
    label = "compatibility"


def command(*argv: object) -> str:
    """A command for the user to copy into a shell (remedies, `next:` lines): each word quoted as the shell needs
    (``invoke build-app --out 'my app'``), so a path with a space, a quote or a ``$`` runs as printed."""
    import shlex

    return shlex.join(str(a) for a in argv)

"""``python -m tests.adversarial.fsfault_invoke ARGS``: ``invoke ARGS`` on a file system that fails (test-only).

The fault-injection layer of the adversarial suite: every writer of torchdroid ends a file with ``os.replace``
(toolchain/fsutil.atomic_path, the one way a final name appears) and most flush it with ``os.fsync``; with
``TORCHDROID_FS_FAULT=CALL:N:ERRNO`` (CALL ``replace`` or ``fsync``) the N-th such call of the process fails with
that errno, as a full disk, a quota, a read-only remount, a permission change or a failing disk would make it fail
there.  tests/adversarial/test_fs_faults.py generates the calls and errnos.
"""

from __future__ import annotations

import errno
import os
import sys

ENV = "TORCHDROID_FS_FAULT"


def install(spec: str) -> None:
    call, nth, name = spec.split(":")
    code, real, seen = getattr(errno, name), getattr(os, call), [0]

    def failing(*args, **kwargs):
        seen[0] += 1
        if seen[0] == int(nth):
            raise OSError(code, os.strerror(code), str(args[1]) if call == "replace" else None)
        return real(*args, **kwargs)

    setattr(os, call, failing)


def main() -> None:
    if os.environ.get(ENV):
        install(os.environ[ENV])
    from invoke.main import program

    program.run(["invoke", *sys.argv[1:]])


if __name__ == "__main__":
    main()

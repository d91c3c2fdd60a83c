"""``python -m host_nnapi``: build the host libneuralnetworks.so if needed and print its path.

For using it without torchdroid, e.g. PyTorch's own NNAPI tests::

    LIBNEURALNETWORKS_PATH=$(python -m host_nnapi) python test/test_nnapi.py
    LD_LIBRARY_PATH=$(dirname "$(python -m host_nnapi)") python my_script.py
"""

from __future__ import annotations

import sys

from toolchain.errors import TorchdroidError

from .build import build_library


def main() -> int:
    try:
        path = build_library()
    except TorchdroidError as e:
        sys.stderr.write(f"host_nnapi: {e}\n")
        return e.exit_code
    sys.stdout.write(f"{path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A fork server for the adversarial suite: the real ``invoke`` program, without paying for torch's import per case.

Most adversarial cases start ``invoke`` and many of them import torch (and torchvision): 2-5 s of interpreter and
third-party start-up per case, paid again and again.  :class:`ForkServer` is one long-lived process per pytest
process that imports only third-party libraries (:data:`PRELOAD`) -- none of torchdroid's own modules: it even
takes out any it finds -- and, per case, forks a child that becomes the case's
``invoke`` process (tests/forkserver.py: its real stdin/stdout/stderr pipes, working directory, environment,
signal dispositions, ``sys.argv``, ``sys.orig_argv``, ``sys.path[0]`` and ``__main__`` as ``python
.venv/bin/invoke ARGS`` sets them, Python's exit).

What cannot be the same in a forked child is start-up itself: variables read while the interpreter starts or
while the preloaded libraries import (:func:`import_time_keys`).  A case whose environment differs from the
server's in one of those runs as a real subprocess, and so does every case that asks for ``fresh=True``
(tests/adversarial/test_environment.py).  ``TORCHDROID_TEST_FORK=0`` turns the server off altogether.  A request
with ``TORCHDROID_FS_FAULT`` set gets the file-system fault layer (tests/adversarial/fsfault_invoke.py) before the
program starts, as ``python -m tests.adversarial.fsfault_invoke`` does.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

if __name__ == "__main__":  # the server, started as a script: the shared machinery is in tests/
    sys.path[0] = str(Path(__file__).resolve().parents[1])
    import forkserver
    from adversarial import fsfault_invoke
else:
    from tests import forkserver
    from tests.adversarial import fsfault_invoke

# Third-party modules our tasks import.  ExecuTorch's import logs one torch warning (a deprecation from
# torch/utils/_pytree.py); a real run sends it to its run log (toolchain/logs.py), so what a case prints on the
# console is the same, and only that one upstream line is missing from a forked case's run log.
PRELOAD = ("invoke", "invoke.main", "invoke.config", "yaml", "rich", "rich.console", "rich.table", "numpy",
           "torch", "torchvision", "filelock", "executorch.exir", "executorch.runtime",
           "executorch.extension.pybindings.portable_lib", "executorch.backends.xnnpack.partition.xnnpack_partitioner",
           "executorch.backends.xnnpack.quantizer.xnnpack_quantizer", "executorch.devtools")

# Environment variables read while the interpreter starts (Python: PYTHON*, locale; the dynamic loader: LD_*,
# malloc tunables) or while PRELOAD imports (found by recording os.environ look-ups during those imports, torch
# 2.14 / numpy / invoke / tqdm / networkx / sympy; the OpenMP, MKL and OpenBLAS runtimes read theirs from C).
IMPORT_TIME_PREFIXES = (
    "PYTHON", "LC_", "LD_", "MALLOC_", "GLIBC_", "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "NUMEXPR_", "NPY_",
    "NUMPY_", "TORCH_", "TORCHINDUCTOR_", "TORCHDYNAMO_", "TORCHEXPORT_", "TORCHAO_", "TORCHVISION_", "PYTORCH_",
    "AOT", "INDUCTOR_", "CUDA", "NVIDIA_", "NVPL_", "TRITON_", "KINETO_", "FX_", "SYMPY_", "MPMATH_", "PILLOW_", "TQDM_", "NETWORKX_", "COMPILE_STROBELIGHT_", "CUTEDSL_", "CUTLASS_",
    "ENABLE_", "PARTITIONER_", "PT2_", "LOG_", "INVOKE_DEBUG",
)
IMPORT_TIME_NAMES = frozenset({
    "LANG", "LANGUAGE", "HOME", "USER", "USERNAME", "LOGNAME", "LNAME", "TMPDIR", "TEMP", "TMP", "XDG_CACHE_HOME",
    "TERM", "CXX", "FAKE_ALLOW_META", "DUMP_AOTI_MINIFIER", "UNSAFE_SKIP_FSDP_MODULE_GUARDS",
})

HERE = Path(__file__).resolve()
OWN_PACKAGES = ("tasks", "toolchain", "converter", "deploy", "workflow", "appgen", "host_nnapi", "ndk_build",
                "benchmarks")


def import_time_keys(a: Dict[str, str], b: Dict[str, str]) -> list:
    """The variables set differently in ``a`` and ``b`` that a forked child could not honour."""
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)
                  and (k in IMPORT_TIME_NAMES or k.startswith(IMPORT_TIME_PREFIXES)))


def own_modules() -> list:
    return sorted(m for m in sys.modules if m.split(".")[0] in OWN_PACKAGES)


# ---------------------------------------------------------------------------------------------------------------
# The test side


def _text(data: bytes) -> str:
    """What ``subprocess.run(text=True)`` makes of a stream: locale encoding, universal newlines."""
    import locale

    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


class ForkServer:
    """One per pytest process; :meth:`run` is ``subprocess.run(argv, cwd, env, capture_output, text, timeout,
    input)`` for ``argv = [script, *args]`` with the script run by a forked child."""

    def __init__(self, script: str, env: Dict[str, str]) -> None:
        self.script = script
        self.env = dict(env)
        self.lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = ours
        self.proc = subprocess.Popen([sys.executable, str(HERE), script, str(theirs.fileno())], env=self.env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     pass_fds=[theirs.fileno()], cwd="/")
        theirs.close()
        try:
            ready, _ = forkserver.recv(self.sock)
        except EOFError:
            raise RuntimeError(f"the fork server did not start:\n{self.proc.stderr.read().decode()}") from None
        self.preloaded = json.loads(ready)

    def close(self) -> None:
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stderr.close()

    def run(self, args: Sequence[str], cwd, env: Dict[str, str], timeout: Optional[float] = None,
            stdin: Optional[str] = None) -> Tuple[int, str, str]:
        with self.lock:
            args, cwd = list(args), str(cwd)
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            in_r, in_w = os.pipe() if stdin is not None else (os.dup(0), None)
            try:
                pid = forkserver.request(self.sock, [self.script, *args], cwd, env, [in_r, out_w, err_w])
            finally:
                for fd in (in_r, out_w, err_w):
                    os.close(fd)
            chunks = {out_r: [], err_r: []}

            def drain(fd):
                while True:
                    data = os.read(fd, 65536)
                    if not data:
                        break
                    chunks[fd].append(data)

            def feed():
                try:
                    os.write(in_w, stdin.encode()) if stdin else None
                except BrokenPipeError:
                    pass
                finally:
                    os.close(in_w)

            threads = [threading.Thread(target=drain, args=(fd,), daemon=True) for fd in (out_r, err_r)]
            if in_w is not None:
                threads.append(threading.Thread(target=feed, daemon=True))
            for t in threads:
                t.start()
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                for t in threads:
                    t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
                    if t.is_alive():
                        os.kill(pid, signal.SIGKILL)
                        for t2 in threads:
                            t2.join(5)
                        raise subprocess.TimeoutExpired([self.script, *args], timeout, _text(b"".join(chunks[out_r])),
                                                        _text(b"".join(chunks[err_r])))
                self.sock.settimeout(None if deadline is None else max(1.0, deadline - time.monotonic()))
                try:
                    status, _ = forkserver.recv(self.sock)
                except socket.timeout:
                    os.kill(pid, signal.SIGKILL)
                    forkserver.recv(self.sock)
                    raise subprocess.TimeoutExpired([self.script, *args], timeout) from None
                finally:
                    self.sock.settimeout(None)
            finally:
                os.close(out_r)
                os.close(err_r)
            return int(status), _text(b"".join(chunks[out_r])), _text(b"".join(chunks[err_r]))


# ---------------------------------------------------------------------------------------------------------------
# The server side


def _forget_logging_set_up_by_imports() -> None:
    """ExecuTorch's XNNPACK partitioner calls ``logging.basicConfig`` when imported: a stderr handler on the root
    logger.  In a real run our tasks have set up logging by then, so that call does nothing; a child must not
    inherit a handler a real run never has (it printed Invoke's DEBUG lines on the case's stderr)."""
    import logging

    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)


def serve(script: str, fd: int) -> None:
    handlers = forkserver.signal_handlers()
    sys.path[0] = os.path.dirname(os.path.realpath(script))
    sock = socket.socket(fileno=fd)
    for name in own_modules():
        del sys.modules[name]
    for name in PRELOAD:
        importlib.import_module(name)
    _forget_logging_set_up_by_imports()
    leaked = own_modules()
    if leaked:
        raise SystemExit(f"fork server: preloading imported torchdroid modules {leaked}")
    gc.collect()
    gc.freeze()  # the children's collections skip the preloaded objects (and do not copy their pages)
    forkserver.send(sock, json.dumps(sorted(PRELOAD)).encode())

    def run_hook(request):
        if os.environ.get(fsfault_invoke.ENV):  # the fault layer, installed where `-m fsfault_invoke` installs it
            fsfault_invoke.install(os.environ[fsfault_invoke.ENV])

    forkserver.serve_connection(sock, handlers, run_hook)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))

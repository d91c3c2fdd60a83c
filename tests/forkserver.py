"""A fork server's common machinery (test-only; stdlib only: warm-python's client runs under ``python -S``).

A server imports what is slow to import once, then per request forks a child that becomes ``python SCRIPT ARGS``:
the caller's stdin, stdout and stderr as real file descriptors (sent over a unix socket: SCM_RIGHTS), working
directory and environment (``os.environ`` replaced, so the C environment too), the signal dispositions the server
started with (a fresh interpreter's under the caller), ``sys.argv``, ``sys.orig_argv``, ``sys.path[0]`` and
``__main__`` as the interpreter sets them, and Python's exit (:func:`_finish`: ``SystemExit`` codes, an uncaught
exception's traceback from the script's frame on and exit 1, KeyboardInterrupt as a death by SIGINT, threads
joined, atexit handlers run, stdout flushed).  The server answers a request with the child's pid, then its exit
code as ``subprocess`` gives it.  The layers choose what to preload, how callers reach the server and when not to
fork: tests/warm_python.py (the virtual phones' python), tests/adversarial/forkrun.py (the adversarial ``invoke``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
from typing import Callable, Optional, Sequence, Tuple


def send(sock: socket.socket, payload: bytes, fds: Sequence[int] = ()) -> None:
    head = struct.pack("!I", len(payload))
    socket.send_fds(sock, [head], list(fds)) if fds else sock.sendall(head)
    sock.sendall(payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("fork server closed the connection")
        buf += chunk
    return buf


def recv(sock: socket.socket, maxfds: int = 0) -> Tuple[bytes, list]:
    head, fds, _flags, _addr = socket.recv_fds(sock, 4, maxfds)
    if not head:
        raise EOFError("fork server closed the connection")
    (n,) = struct.unpack("!I", head + _recv_exact(sock, 4 - len(head)))
    return _recv_exact(sock, n), list(fds)


def request(sock: socket.socket, argv: Sequence[str], cwd: str, env: dict, fds: Sequence[int]) -> int:
    """Ask for ``argv`` (``[script, *args]``) to run with ``fds`` as its stdin, stdout, stderr; the child's pid."""
    send(sock, json.dumps({"argv": list(argv), "cwd": cwd, "env": env}).encode(), fds)
    return int(recv(sock)[0])


def signal_handlers() -> dict:
    """The dispositions to give every child: call at server start, before the server changes any."""
    return {s: signal.getsignal(s) for s in signal.valid_signals()
            if s not in (signal.SIGKILL, signal.SIGSTOP) and signal.getsignal(s) is not None}


def serve_connection(sock: socket.socket, handlers: dict, setup: Optional[Callable[[dict], None]] = None) -> None:
    """Serve the requests on ``sock`` one at a time until the other side closes it."""
    while True:
        try:
            payload, fds = recv(sock, maxfds=3)
        except EOFError:
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                sock.close()
                _child(json.loads(payload), fds, handlers, setup)
            finally:
                os._exit(70)
        for f in fds:
            os.close(f)
        send(sock, str(pid).encode())
        _, status = os.waitpid(pid, 0)
        send(sock, str(os.waitstatus_to_exitcode(status)).encode())


def _child(request: dict, fds: list, handlers: dict, setup) -> None:
    import importlib
    import tempfile
    import types
    from importlib.machinery import SourceFileLoader

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds) - {0, 1, 2}:
        os.close(fd)
    for sig, handler in handlers.items():
        signal.signal(sig, handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None
    script = request["argv"][0]
    sys.argv = list(request["argv"])
    sys.orig_argv = [sys.executable, *sys.argv]
    sys.path[0] = os.path.dirname(os.path.realpath(script))  # as the interpreter sets it: symlinks resolved
    importlib.invalidate_caches()
    if setup is not None:
        setup(request)
    main = types.ModuleType("__main__")
    main.__file__ = script
    main.__cached__ = None
    main.__loader__ = SourceFileLoader("__main__", script)
    sys.modules["__main__"] = main
    code, interrupted = 0, False
    try:
        exec(compile(main.__loader__.get_data(script), script, "exec"), main.__dict__)  # noqa: S102
    except SystemExit as e:
        code = _exit_code(e)
    except BaseException as e:  # noqa: BLE001
        tb = e.__traceback__.tb_next if e.__traceback__ is not None else None  # from the script's frame on
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        code, interrupted = 1, isinstance(e, KeyboardInterrupt)
    _finish(code, interrupted)


def _exit_code(exc: SystemExit) -> int:
    """Python's own handling of an uncaught SystemExit (Python/pythonrun.c handle_system_exit)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    try:
        sys.stderr.write(str(code) + "\n")
    except Exception:  # noqa: BLE001
        pass
    return 1


def _finish(code: int, interrupted: bool) -> None:
    """What the interpreter does after the main module (Py_FinalizeEx's order), then leave without more."""
    import atexit
    import threading

    try:
        threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads are joined
    except BaseException:  # noqa: BLE001
        pass
    atexit._run_exitfuncs()
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            if stream is not None and not stream.closed:
                stream.flush()
        except Exception as e:  # noqa: BLE001
            if name == "stdout":
                code = 120
                try:
                    sys.stderr.write(f"Exception ignored in: {stream!r}\n{type(e).__name__}: {e}\n")
                    sys.stderr.flush()
                except Exception:  # noqa: BLE001
                    pass
    if interrupted:  # Python re-raises an uncaught KeyboardInterrupt as a death by SIGINT
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)

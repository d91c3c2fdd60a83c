"""A warm python for the scripts virtual phones run (test-only): torch and ExecuTorch imported once per test process.

The stand-ins on a virtual phone start a python script per call (the fixture runner's ETDump writer and output
printer, the benchmark stand-in's NNAPI runtime log and output printer); each cold import of torch and ExecuTorch
costs seconds (tens of seconds on a loaded CI machine), and one deploy makes dozens of such calls.  The server
imports them once and per call forks a child that runs the script as ``python SCRIPT ARGS`` would (with the
caller's PYTHONPATH too; tests/forkserver.py).  Each call stays a process of its own that starts from the same
state, as on a phone; only the import is shared.

tests/conftest.py :func:`enable`s it for the session; the virtual phone's shell then has ``$VDEV_PYTHON`` pointing
to ``tests/warm-python``, which runs the client (``python -S``, stdlib only: milliseconds).  The first client
starts the server (under a lock), so a run that needs no phone script pays nothing; the server ends with the test
process that owns it.  A server that was enabled but does not answer is an error (exit 127, its log shown),
never a silent fallback to a cold python.
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import subprocess
import sys
import time

if __name__ == "__main__":  # the server or warm-python's client: this directory is sys.path[0]
    import forkserver
else:
    from tests import forkserver

ENV = "TORCHDROID_WARM_PYTHON"  # the server's directory (socket, pid, lock, log); set by tests/conftest.py
OWNER = "TORCHDROID_WARM_PYTHON_OWNER"  # the test process the server belongs to: it ends with it
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PRELOAD_ENV = "TORCHDROID_WARM_PYTHON_PRELOAD"  # modules to import once (comma-separated; default PRELOAD)
PRELOAD = ("torch", "executorch.runtime", "executorch.extension.pybindings.portable_lib", "host_nnapi.graph")


def python_env() -> dict:
    """``VDEV_PYTHON`` (and what it needs) for a stand-in started outside a virtual phone: the warm python when the
    run enabled one (tests/virtual_device/device.py gives its phones the same), else this python."""
    if not os.environ.get(ENV):
        return {"VDEV_PYTHON": sys.executable}
    return {"VDEV_PYTHON": os.path.join(HERE, "warm-python"), "VDEV_HOST_PYTHON": sys.executable,
            ENV: os.environ[ENV], OWNER: os.environ[OWNER]}


# ---------------------------------------------------------------------------------------------------- server


def enable(directory: str) -> None:
    """Scripts started by this process and its children use a warm python in ``directory``, started by the first
    call that needs it (a run that never needs one pays nothing)."""
    os.makedirs(directory, exist_ok=True)
    os.environ[ENV] = directory
    os.environ[OWNER] = str(os.getpid())


def disable() -> None:
    """Stop this process's server, if one was started."""
    directory = os.environ.pop(ENV, None)
    os.environ.pop(OWNER, None)
    pid = _read_pid(directory) if directory else None
    if pid:
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            pass


def _read_pid(directory: str):
    try:
        return int(open(os.path.join(directory, "pid")).read())
    except (OSError, ValueError):
        return None


def _spawn(directory: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    python = os.environ.get("VDEV_HOST_PYTHON") or sys.executable
    with open(os.path.join(directory, "log"), "ab") as log:
        proc = subprocess.Popen([python, os.path.abspath(__file__), "--serve", directory, os.environ[OWNER]],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # not killed with the phone's shell that started it
    with open(os.path.join(directory, "pid"), "w") as f:
        f.write(str(proc.pid))
    return proc


def serve(directory: str, owner: int) -> None:
    for name in os.environ.get(PRELOAD_ENV, ",".join(PRELOAD)).split(","):
        try:
            name and importlib.import_module(name)
        except ImportError as e:  # a machine without ExecuTorch: its scripts fail in the child as they would cold
            print(f"warm python: not preloaded: {name}: {e}", flush=True)
    handlers = forkserver.signal_handlers()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the connections' processes are reaped by the kernel
    socket_path = os.path.join(directory, "sock")
    tmp = f"{socket_path}.{os.getpid()}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(tmp)
    server.listen(64)
    os.replace(tmp, socket_path)  # the path appears once the server accepts
    server.settimeout(2.0)
    while True:
        try:
            conn, _ = server.accept()
        except socket.timeout:
            if not _alive(owner):  # the test process is gone (killed without its finaliser): so is this server
                return
            continue
        if os.fork() == 0:  # one process per connection (phones call at once): it forks the script's child
            server.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            conn.settimeout(None)
            forkserver.serve_connection(conn, handlers, _add_pythonpath)
            os._exit(0)
        conn.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _add_pythonpath(request: dict) -> None:
    """The caller's PYTHONPATH, which the server's own start did not see."""
    for extra in reversed([p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]):
        if extra not in sys.path:
            sys.path.insert(1, extra)


# ---------------------------------------------------------------------------------------------------- client


def client(argv: list) -> int:
    directory = os.environ.get(ENV)
    if not directory:
        os.execv(sys.executable, [sys.executable, *argv])
    conn = _connect(directory)
    if conn is None:
        return 127
    try:
        forkserver.request(conn, argv, os.getcwd(), dict(os.environ), [0, 1, 2])
        code = int(forkserver.recv(conn)[0])
    except EOFError:
        code = -1
    if code < 0:
        print("warm python: the server's child died without an exit code", file=sys.stderr)
        return 127
    return code


def _connect(directory: str):
    """A connection to the server, started now (under a lock) if no server runs; None (said why) if none answers."""
    import fcntl

    path = os.path.join(directory, "sock")
    deadline = time.monotonic() + 300  # the server imports torch and ExecuTorch before it answers
    pid, spawned = None, None
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(path)
            return conn
        except (FileNotFoundError, ConnectionRefusedError):
            conn.close()
        if pid is None:
            with open(os.path.join(directory, "lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                pid = _read_pid(directory)
                if pid is None or not _alive(pid):
                    spawned = _spawn(directory)
                    pid = spawned.pid
        elif not _alive(pid) or (spawned and spawned.poll() is not None) or time.monotonic() > deadline:
            log = open(os.path.join(directory, "log"), errors="replace").read()[-2000:]
            print(f"warm python: no server answers at {path} ({ENV}); its log:\n{log}", file=sys.stderr)
            return None
        time.sleep(0.05)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(client(sys.argv[1:]))

"""Run `panio` for the tests the way a user's shell does, without paying the interpreter's imports each time.

The suite runs `panio` a few thousand times; each run is a new Python that imports, before any of panio's own
code, the same libraries (SQLAlchemy alone is 0.3 s of CPU). On two cores that was a third of the suite's
CPU. So each pytest process starts one *zygote* (``python tests/forkserver.py SOCKET``): a Python that has
imported those third-party libraries and the standard modules they pull in, **but none of panio's modules**,
and then waits. Each `panio` run is a request to it: the argv, the environment, the working directory and the
three standard streams (passed as file descriptors). The zygote forks; the child closes every other
descriptor, takes the streams as 0, 1 and 2, the environment as its own (``os.environ``, so its children get
it too), and runs the console script's ``main`` exactly as ``.venv/bin/panio`` does, then exits the way
Python exits (``SystemExit``: atexit handlers, non-daemon threads joined). panio's code is imported fresh in
every child, so no panio state crosses from one run to the next; the caller reads stdout and stderr to their
end and gets the exit status, a timeout kills the child as ``subprocess.run`` would.

What a fork does not give: the interpreter's own start-up with the run's environment (``PYTHON*`` variables,
``-X`` options), and a start-up's imports of those libraries. The tests about start-up (what `--help` or a
reading command imports, how long they take) start real processes themselves; ``PANIO_TEST_EXEC=1`` makes
every `panio` of the suite a real process again.
"""

from __future__ import annotations

import atexit
import json
import locale
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

# Third-party libraries panio's commands import (the job store, Celery, the lab file's editor, SSH), and the
# standard modules that come with them; never panio's own (``bench_agent``, ``controller``, ``scenarios``).
PRELOAD = ("argparse", "asyncio", "concurrent.futures", "dataclasses", "datetime", "email.utils", "hashlib",
           "json", "logging", "shlex", "sqlite3", "ssl", "subprocess", "tempfile", "typing", "uuid", "zipfile",
           "sqlalchemy", "sqlalchemy.orm", "sqlalchemy.dialects.sqlite", "tomlkit", "redis", "kombu", "celery",
           "paramiko", "psycopg")


# --- the zygote --------------------------------------------------------------------------------------------

def serve(path: str) -> None:
    """Preload, then fork a child for each request on the unix socket at ``path`` until the socket's parent
    (the pytest process) is gone."""
    import gc
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    sys.path[0] = os.path.dirname(os.path.abspath(sys.executable))  # as a console script's sys.path[0]
    gc.collect()
    gc.freeze()  # what is here now is shared with every child, never collected by one
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # a request is one message, never split
    # Bound under another name, listening, then renamed: the caller connects as soon as the path exists, and a
    # connect between ``bind`` (which makes the file) and ``listen`` is refused (it was, on a loaded machine).
    listener.bind(path + ".new")
    listener.listen(64)
    os.rename(path + ".new", path)
    parent = os.getppid()
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    while os.getppid() == parent:
        for key, _ in sel.select(timeout=1.0):
            if key.data == "accept":
                conn, _ = listener.accept()
                sel.register(conn, selectors.EVENT_READ, "request")
            elif key.data == "request":
                sel.unregister(key.fileobj)
                _start(key.fileobj, sel)
            else:  # a child's pidfd: it ended
                conn, pid = key.data
                sel.unregister(key.fd)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                try:
                    conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
                except OSError:
                    pass
                conn.close()


def _start(conn: socket.socket, sel: selectors.BaseSelector) -> None:
    try:
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        request = json.loads(msg)
    except (OSError, ValueError):
        conn.close()
        return
    if len(fds) != 3:
        conn.close()
        return
    pid = os.fork()
    if pid == 0:
        _child(request, fds)  # never returns
    for fd in fds:
        os.close(fd)
    conn.sendall(b"%d\n" % pid)
    sel.register(os.pidfd_open(pid), selectors.EVENT_READ, (conn, pid))  # readable once the child ended


def _child(request: dict, fds: list[int]) -> None:
    for i, fd in enumerate(fds):
        os.dup2(fd, i)
    os.closerange(3, 1 << 16)  # the listener, other requests' sockets and pidfds: a new process has none
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    sys.argv[0] = sys.argv[0].removesuffix(".exe")
    try:
        from controller.cli.main import main

        code = main()
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        _exit_python()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)  # as Python ends on an uncaught ^C: killed by the signal
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    _exit_python()
    os._exit(code or 0)


def _exit_python() -> None:
    """What Python does when it exits, but tearing down the preloaded modules (0.4 s of freeing objects a run
    never made, shared with the zygote): non-daemon threads joined, atexit handlers run, the run's own garbage
    collected (its open files flushed), the standard streams flushed."""
    import atexit
    import gc

    threading._shutdown()
    atexit._run_exitfuncs()
    gc.collect()  # the zygote's objects are frozen: only the run's are looked at
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


# --- the caller --------------------------------------------------------------------------------------------

class Zygote:
    """The pytest process's zygote: started on first use, one per process (pytest-xdist worker)."""

    _lock = threading.Lock()
    _proc: subprocess.Popen | None = None
    _path = ""

    @classmethod
    def socket_path(cls) -> str:
        with cls._lock:
            if cls._proc is None or cls._proc.poll() is not None:
                folder = tempfile.mkdtemp(prefix="panio-zygote-")
                cls._path = os.path.join(folder, "sock")
                cls._proc = subprocess.Popen([sys.executable, __file__, cls._path], stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL, close_fds=True)
                atexit.register(cls._stop, cls._proc, folder)
                deadline = time.monotonic() + 120
                while not os.path.exists(cls._path):
                    if cls._proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"the panio zygote did not start (exit {cls._proc.poll()})")
                    time.sleep(0.01)
            return cls._path


    @staticmethod
    def _stop(proc: subprocess.Popen, folder: str) -> None:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


def run(argv: list[str], env: dict[str, str], timeout: float, input: str | None) -> tuple[int, str, str]:
    """``subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, input=input)``
    through the zygote: (exit code, stdout, stderr). Raises ``subprocess.TimeoutExpired`` as it would."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(Zygote.socket_path())
        request = json.dumps({"argv": argv, "env": env, "cwd": os.getcwd()}).encode()
        socket.send_fds(sock, [request], [in_r, out_w, err_w])
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    deadline = time.monotonic() + timeout
    with sock:
        pid = int(sock.recv(64))
        threading.Thread(target=_feed, args=(in_w, (input or "").encode()), daemon=True).start()
        out, err = _drain(out_r, err_r, deadline)
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            if out is None:
                raise TimeoutError
            code = int(sock.recv(64))
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            sock.settimeout(None)
            sock.recv(64)  # reaped
            raise subprocess.TimeoutExpired(argv, timeout) from None
    return code, _text(out), _text(err)


def _text(data: bytes) -> str:
    """As ``subprocess.run(..., text=True)`` decodes: the locale's encoding, universal newlines."""
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


def _feed(fd: int, data: bytes) -> None:
    try:
        if data:
            os.write(fd, data)
    except OSError:
        pass
    finally:
        os.close(fd)


def _drain(out_r: int, err_r: int, deadline: float) -> tuple[bytes | None, bytes]:
    """Both pipes read to their end; (None, ...) when the deadline came first."""
    chunks = {out_r: [], err_r: []}
    sel = selectors.DefaultSelector()
    for fd in chunks:
        sel.register(fd, selectors.EVENT_READ)
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return None, b""
            for key, _ in sel.select(timeout=left):
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()
        os.close(out_r)
        os.close(err_r)
    return b"".join(chunks[out_r]), b"".join(chunks[err_r])


if __name__ == "__main__":
    serve(sys.argv[1])

"""Calls that must return within a bound, from any thread: a worker process that is killed when a call runs past
its deadline (:class:`WorkerProcess`), and a worker thread that is abandoned then (:func:`call_with_timeout`).

Why not ``signal.alarm`` (math-verify's own timeout): it works on the main thread only, so in a server's handler, a
reward's worker thread or a notebook's executor a call runs without any limit, and a C-level computation (sympy on
``10^{10^{100}}``) is not interrupted even there. A process can always be killed; a thread cannot, but its caller
can stop waiting for it.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any, Callable

__all__ = ["CallFailed", "CallTimedOut", "WorkerProcess", "call_with_timeout", "serve"]


class CallTimedOut(RuntimeError):
    """A bounded call did not return within its time limit (the worker was killed or abandoned)."""


class CallFailed(RuntimeError):
    """The handler raised in the worker process (its type and message); the worker lives on."""


def serve(handler: str) -> None:
    """The worker's loop, run as ``python -c`` by :class:`WorkerProcess` (in the child's main thread): ``(op,
    args)`` frames in on standard input, ``(True, value)`` or ``(False, error text)`` out, until input closes.
    Standard output is the reply channel, so anything the handler prints goes to standard error."""
    import os
    from multiprocessing.connection import Connection

    replies = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)  # a print (or a C library's write) must not end up inside a reply
    requests = Connection(os.dup(0), writable=False)
    module_name, _, attr = handler.partition(":")
    fn = getattr(importlib.import_module(module_name), attr)
    while True:
        try:
            op, args = requests.recv()
        except (EOFError, OSError):
            return
        try:
            answer = (True, None) if args is None else (True, fn(op, *args))  # args None: "are you up?"
        except Exception as err:  # noqa: BLE001 -- the caller decides; the worker lives on
            answer = (False, f"{type(err).__name__}: {err}")
        try:
            replies.send(answer)
        except (OSError, ValueError):
            return


#: Seconds a new worker child may take to start (interpreter, imports, the handler's ``start_op``).
START_TIMEOUT = 120.0


class WorkerProcess:
    """One child interpreter running ``handler(op, *args)``, a module-level function named
    ``"package.module:function"``; started at the first call and again after a call that timed out (the stuck child
    is killed) or a child that died. Calls from several threads take turns.

    The child is a fresh ``python -c`` with this process's ``sys.path`` (not ``multiprocessing``'s ``spawn``, which
    would run a user's script again in the child when it has no ``if __name__ == "__main__"`` guard).

    Args:
        handler: ``"package.module:function"``, importable in a fresh interpreter.
        name: Said in errors (e.g. ``"math-verify"``).
        start_op: An operation the handler runs once in each new child before any timed call (its imports and
            set-up: math-verify's grammar and sympy take seconds on a loaded machine, which a 1 s bound on the
            first real call would count as a hang); waited for at most :data:`START_TIMEOUT` seconds.
    """

    def __init__(self, handler: str, name: str, start_op: str | None = None) -> None:
        self.handler, self.name, self.start_op = handler, name, start_op
        self._lock = threading.Lock()
        self._process: Any = None
        self._send: Any = None
        self._recv: Any = None
        self._stderr: Any = None
        self.killed = 0  # children killed for running past a deadline

    def call(self, op: str, args: tuple, timeout: float) -> Any:
        """``handler(op, *args)`` in the child, within ``timeout`` seconds (a child's start not counted).

        Raises:
            CallTimedOut: No answer in time (the child is killed; the next call starts another).
            CallFailed: The handler raised (its type and message).
            RuntimeError: The child died (it could not start, or was killed from outside); the message has the
                end of its standard error.
        """
        with self._lock:
            self._ensure()
            try:
                self._send.send((op, args))
                ready = self._recv.poll(timeout)
                answer = self._recv.recv() if ready else None
            except (EOFError, OSError):
                said = self._kill()
                raise RuntimeError(f"the {self.name} worker process died during {op} ({said or 'no message'}); a "
                                   "later call starts another.") from None
            if answer is None:
                self._kill()
                self.killed += 1
                raise CallTimedOut(f"{self.name} did not return within {timeout:g} s ({op})")
        ok, value = answer
        if not ok:
            raise CallFailed(f"{self.name} failed in {op}: {value}")
        return value

    def _ensure(self) -> None:
        import os
        import subprocess
        import sys
        from multiprocessing.connection import Connection

        if self._process is not None and self._process.poll() is None:
            return
        self._kill()
        import tempfile

        # The child searches this process's sys.path, in its order, so it imports the very package (and handler)
        # this process imported; the working directory that -c puts first is dropped: a checkout of another version
        # there must not answer for this one.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        code = f"import sys; del sys.path[0]; from ares_rerank.utils.bounded import serve; serve({self.handler!r})"
        self._stderr = tempfile.TemporaryFile()  # read back when the child dies: why it did
        process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=self._stderr, env=env, close_fds=True)
        self._send = Connection(os.dup(process.stdin.fileno()), readable=False)
        self._recv = Connection(os.dup(process.stdout.fileno()), writable=False)
        process.stdin.close()
        process.stdout.close()
        self._process = process
        # The child's start (interpreter, imports, the handler's own set-up) is waited for here, not counted in
        # the bound of the call that started it.
        try:
            self._send.send((self.start_op, ()) if self.start_op else ("", None))
            answer = self._recv.recv() if self._recv.poll(START_TIMEOUT) else None
        except (EOFError, OSError):
            said = self._kill()
            raise RuntimeError(f"the {self.name} worker process died as it started ({said or 'no message'}); a "
                               "later call starts another.") from None
        if answer is None:
            self._kill()
            raise RuntimeError(f"the {self.name} worker process did not start within {START_TIMEOUT:g} s; a later "
                               "call starts another.")
        if not answer[0]:
            self._kill()
            raise RuntimeError(f"the {self.name} worker process failed to set up ({answer[1]}); a later call "
                               "starts another.")

    def _kill(self) -> str:
        """Stop the child; the last line of what it wrote to standard error (copied to ours)."""
        import sys

        process, self._process = self._process, None
        for conn in (self._send, self._recv):
            if conn is not None:
                conn.close()
        self._send = self._recv = None
        if process is not None:
            if process.poll() is None:
                process.kill()
            process.wait(5)
        said, stream, self._stderr = "", self._stderr, None
        if stream is not None:
            stream.seek(0)
            text = stream.read()[-4000:].decode("utf-8", "replace")
            stream.close()
            if text:
                sys.stderr.write(text if text.endswith("\n") else text + "\n")
            said = text.strip().splitlines()[-1] if text.strip() else ""
        return said

    def close(self) -> None:
        """Stop the child (a later call starts a new one)."""
        with self._lock:
            self._kill()


def call_with_timeout(fn: Callable[..., Any], args: tuple, timeout: float, name: str = "ares-bounded") -> Any:
    """``fn(*args)`` in a daemon thread, waited for at most ``timeout`` seconds: works from any thread, for any
    callable (a lambda too), but a call that runs past the bound is abandoned, not stopped (it runs on in the
    background, and its result is dropped).

    Raises:
        CallTimedOut: ``fn`` did not return in time.
        BaseException: Whatever ``fn`` raised.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as err:  # noqa: BLE001 -- re-raised in the caller's thread
            box["error"] = err

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise CallTimedOut(f"did not return within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]

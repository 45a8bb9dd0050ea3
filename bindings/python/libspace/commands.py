# SPDX-License-Identifier: Apache-2.0
"""Commands in a sandbox: what Sandbox.run() returns, and the Process that Sandbox.start() returns."""

from __future__ import annotations

import codecs
import ctypes
import errno as _errno
import os
import select
import signal as _signal
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence, Tuple, Union

from . import _lib
from ._lib import lib
from ._util import PathArg, U16_MAX, U64_MAX, argv_of, cstr_array, cstr_opt, env_of, fsname, memfd_of, millis, uint
from .context import _options_init, interrupted
from .errors import CommandError

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import Sandbox

__all__ = ["CommandResult", "Process", "DEFAULT_MAX_OUTPUT"]

DEFAULT_MAX_OUTPUT = 64 << 20
"""The most bytes of each stream run() keeps by default; beyond it output is dropped (result.truncated)."""

Command = Union[str, bytes, Sequence[Union[str, bytes, "os.PathLike[str]"]]]
OutputFn = Callable[[Any], None]


@dataclass(frozen=True)
class CommandResult:
    """What a command did. ``stdout``/``stderr`` are bytes, or str with ``text=True``.

    ``returncode`` follows subprocess: the exit code, or -N when signal N ended it. A timeout is a result
    (``timed_out``), not an exception, so its partial output is there; ``check=True`` turns any of them
    into CommandError.
    """

    argv: Tuple[str, ...]
    exited: bool
    exit_code: Optional[int]  # None when a signal ended it
    signal: Optional[int]  # the signal that ended it, None when it exited
    timed_out: bool  # killed at its timeout
    oom_killed: bool  # jail: ended by the out-of-memory killer at the sandbox's memory limit
    stdout: Any = b""
    stderr: Any = b""
    truncated: bool = False  # output beyond max_output was dropped
    rolled_back_to: Optional[str] = None  # run(rollback_on_failure=True): the checkpoint returned to

    @property
    def returncode(self) -> int:
        if self.exited:
            return int(self.exit_code or 0)
        return -int(self.signal or 0)

    @property
    def ok(self) -> bool:
        """Exited with 0 and did not time out."""
        return self.exited and self.exit_code == 0 and not self.timed_out

    def check_returncode(self) -> "CommandResult":
        """Raises CommandError unless ok; returns self."""
        if not self.ok:
            raise CommandError(self)
        return self

    def describe(self) -> str:
        if self.timed_out:
            return "timed out"
        if self.exited:
            return f"exited with {self.exit_code}"
        try:
            name = _signal.Signals(self.signal).name
        except (ValueError, TypeError):
            name = f"signal {self.signal}"
        return f"was killed by {name}" + (" (out of memory)" if self.oom_killed else "")


def _result(argv: Sequence[bytes], r: Any, out: "_Output", rolled_back: Optional[str] = None) -> CommandResult:
    f = _lib.field
    exited = bool(f(r, "exited", False))
    stdout, stderr = out.values()
    return CommandResult(
        argv=tuple(fsname(a) for a in argv), exited=exited, exit_code=int(f(r, "exit_code", 0)) if exited else None,
        signal=None if exited else int(f(r, "signal", 0)), timed_out=bool(f(r, "timed_out", False)),
        oom_killed=bool(f(r, "oom_killed", False)), stdout=stdout, stderr=stderr, truncated=out.truncated,
        rolled_back_to=rolled_back)


class _Output:
    """Collects a command's two streams (capped) and feeds the caller's callbacks; the C callback."""

    def __init__(self, capture: bool, max_output: Optional[int], text_mode: bool, encoding: str, errors: str,
                 on_stdout: Optional[OutputFn], on_stderr: Optional[OutputFn]) -> None:
        if max_output is not None:
            max_output = uint(max_output, "max_output", 0, U64_MAX)
        self.capture, self.max, self.text = capture, max_output, text_mode
        self.encoding, self.errors = encoding, errors
        codecs.lookup(encoding)  # a bad encoding is a LookupError now, not inside a callback
        for cb, what in ((on_stdout, "on_stdout"), (on_stderr, "on_stderr")):
            if cb is not None and not callable(cb):
                raise TypeError(f"{what} must be callable")
        self.cbs = {1: on_stdout, 2: on_stderr}
        self.bufs = {1: bytearray(), 2: bytearray()}
        self.decoders = {s: codecs.getincrementaldecoder(encoding)(errors) for s in (1, 2)} if text_mode else {}
        self.truncated = False
        self.error: Optional[BaseException] = None
        self.fn = _lib.OUTPUT_FN(self._cb)

    def _cb(self, stream: int, data: Any, length: int, userdata: Any) -> int:
        if self.error is None and interrupted():
            self.error = KeyboardInterrupt()
        if self.error is not None:
            return -_errno.ECANCELED
        try:
            chunk = ctypes.string_at(data, length) if length and data else b""
            stream = 2 if stream == 2 else 1
            if self.capture:
                buf = self.bufs[stream]
                room = len(chunk) if self.max is None else max(0, self.max - len(buf))
                if room < len(chunk):
                    self.truncated = True
                buf += chunk[:room]
            cb = self.cbs[stream]
            if cb is not None:
                cb(self.decoders[stream].decode(chunk) if self.text else chunk)
            return 0
        except BaseException as e:  # kept and raised when the call returns; the process is killed
            self.error = e
            return -_errno.ECANCELED

    def flush(self) -> None:
        if self.text and self.error is None:
            for s, cb in self.cbs.items():
                tail = self.decoders[s].decode(b"", final=True)
                if cb is not None and tail:
                    cb(tail)

    def values(self) -> Tuple[Any, Any]:
        out, err = bytes(self.bufs[1]), bytes(self.bufs[2])
        if self.text:
            return out.decode(self.encoding, self.errors), err.decode(self.encoding, self.errors)
        return out, err


def _fileno(obj: Any, what: str) -> int:
    if isinstance(obj, bool):
        raise TypeError(f"{what} must be a file descriptor or a file object")
    if isinstance(obj, int):
        fd = obj
    elif hasattr(obj, "fileno"):
        fd = obj.fileno()
    else:
        raise TypeError(f"{what} must be a file descriptor or a file object with fileno()")
    if not isinstance(fd, int) or fd < 0:
        raise ValueError(f"{what} is not an open file descriptor")
    return fd


class _ExecOptions:
    """space_exec_options of version 2, filled from run()/start() arguments; keeps what it points to."""

    def __init__(self, cmd: Command, *, env: Optional[Mapping[str, str]], cwd: Optional[PathArg],
                 uid: Optional[int], gid: Optional[int], pty: bool, rows: Optional[int], cols: Optional[int],
                 timeout: Optional[float]) -> None:
        o = _lib.ExecOptions()
        _options_init(lib.space_exec_options_init, o, _lib.EXEC_OPTIONS_VERSION)
        # init sets stdin_fd = -1 and flags = 0: no stdin unless asked for, never the caller's own.
        self.argv = argv_of(cmd)
        self.keep = [cstr_array(self.argv), cstr_array(env_of(env)), cstr_opt(cwd, "cwd", allow_empty=False)]
        o.argv, o.env, o.cwd = self.keep
        # None: the template's user (an image's User), else root; a uid or gid given: exactly that user.
        if uid is not None or gid is not None:
            o.uid = uint(uid if uid is not None else 0, "uid")
            o.gid = uint(gid if gid is not None else 0, "gid")
            o.flags |= _lib.EXEC_USER
        if not isinstance(pty, bool):
            raise TypeError("pty must be True or False")
        o.pty = pty
        if (rows is not None or cols is not None) and not pty:
            raise ValueError("rows and cols are for pty=True")
        o.rows = uint(rows, "rows", 1, U16_MAX) if rows is not None else 0
        o.cols = uint(cols, "cols", 1, U16_MAX) if cols is not None else 0
        o.timeout_ms = millis(timeout, "timeout") if timeout is not None else 0
        self.opts = o


def _stdin_fd(input: Any, stdin: Any) -> Tuple[Optional[int], Optional[int]]:
    """(the fd to feed, a memfd to close after) for run()'s input= or stdin=; (None, None) for no stdin."""
    if input is not None and stdin is not None:
        raise ValueError("give input or stdin, not both")
    if input is not None:
        if isinstance(input, str):
            input = input.encode("utf-8")
        if not isinstance(input, (bytes, bytearray, memoryview)):
            raise TypeError("input must be bytes or str")
        fd = memfd_of(input, "libspace-stdin")
        return fd, fd
    if stdin is not None:
        return _fileno(stdin, "stdin"), None
    return None, None


class Process:
    """A command started with Sandbox.start(): write its stdin, signal it, wait for it.

    Its output goes to the callbacks given to start() and, with capture, to ``stdout``/``stderr`` so far.
    Output is delivered while poll() or wait() run (or pump(), when fileno() polls readable: for a
    selector or an event loop). close() (or leaving its ``with`` block) kills it if it still runs.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("use Sandbox.start()")

    @classmethod
    def _wrap(cls, sb: "Sandbox", ptr: Any, eo: _ExecOptions, out: _Output, stdin: bool) -> "Process":
        p = cls.__new__(cls)
        p._sb, p._ptr, p._eo, p._out, p._stdin_open = sb, ptr, eo, out, stdin
        # The output callback stays alive as long as the native process (its free may still deliver).
        p._fin = sb._ctx._h.adopt(p, lib.space_process_free, ptr, out)
        p._result = None
        p._rec = _lib.record(_lib.ExecResult)
        p._pid = p._call("space_process_pid")
        p._fd = p._call("space_process_fd")
        return p

    def _call(self, function: str, *args: Any) -> int:
        ctx = self._sb._ctx
        with ctx._h.enter():
            if not self._fin.alive:
                raise ValueError("libspace: this process handle is closed")
            r = getattr(lib, function)(self._ptr, *args)
            if r < 0:
                ctx._raise(function, r)
            return r

    @property
    def pid(self) -> int:
        """Its process id inside the sandbox."""
        return self._pid

    @property
    def argv(self) -> Tuple[str, ...]:
        return tuple(fsname(a) for a in self._eo.argv)

    def fileno(self) -> int:
        """A descriptor that polls readable when pump() has output to deliver (owned by the process)."""
        return self._fd

    @property
    def stdout(self) -> Any:
        return self._out.values()[0]

    @property
    def stderr(self) -> Any:
        return self._out.values()[1]

    @property
    def returncode(self) -> Optional[int]:
        """None while it runs; then as CommandResult.returncode."""
        return self._result.returncode if self._result else None

    @property
    def result(self) -> Optional[CommandResult]:
        return self._result

    def write(self, data: Union[bytes, str]) -> None:
        """Feeds its stdin (start(stdin=True)). Blocks while the sandbox does not take it."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("write() takes bytes or str")
        if not self._stdin_open:
            raise ValueError("this process has no open stdin (start(stdin=True), not closed)")
        data = bytes(data)
        if data:
            self._call("space_process_write_stdin", data, len(data))

    def close_stdin(self) -> None:
        """Closes its stdin (it reads EOF)."""
        if self._stdin_open:
            self._call("space_process_write_stdin", None, 0)
            self._stdin_open = False

    def send_signal(self, sig: int) -> None:
        if self._result is None:
            self._call("space_process_signal", uint(int(sig), "signal", 1, 64))

    def terminate(self) -> None:
        self.send_signal(_signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(_signal.SIGKILL)

    def resize(self, rows: int, cols: int) -> None:
        """Sets its terminal's size (start(pty=True))."""
        self._call("space_process_resize", uint(rows, "rows", 1, U16_MAX), uint(cols, "cols", 1, U16_MAX))

    def pump(self) -> Optional[CommandResult]:
        """Delivers the output that arrived (blocks until some does); the result once it ended, else None."""
        if self._result is not None:
            return self._result
        try:
            r = self._call("space_process_pump", ctypes.byref(self._rec))
        except Exception:
            if self._out.error is not None:
                raise self._out.error from None
            raise
        if self._out.error is not None:
            raise self._out.error
        if r == 1:
            self._out.flush()
            self._result = _result(self._eo.argv, self._rec, self._out)
        return self._result

    def _ready(self, timeout: Optional[float]) -> bool:
        with self._sb._ctx._h.enter():
            if not self._fin.alive:
                raise ValueError("libspace: this process handle is closed")
            if lib.space_process_pending(self._ptr):
                return True
        poller = select.poll()  # not select(): the descriptor may be above FD_SETSIZE
        poller.register(self._fd, select.POLLIN)
        return bool(poller.poll(None if timeout is None else max(0, int(timeout * 1000 + 0.999))))

    def poll(self) -> Optional[CommandResult]:
        """Delivers what output is there without blocking; the result if it ended, else None."""
        while self._result is None and self._ready(0):
            self.pump()
        return self._result

    def wait(self, timeout: Optional[float] = None, *, check: bool = False) -> CommandResult:
        """Waits for it to end (delivering its output) and returns its CommandResult.

        ``timeout`` (seconds) raises TimeoutError when it still runs then (it keeps running).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._result is None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if self._ready(left):
                self.pump()
            elif deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"process {self._pid} still runs after {timeout} s")
        if check:
            self._result.check_returncode()
        return self._result

    def close(self) -> None:
        """Releases the handle; a process still running is killed. Idempotent."""
        self._fin()

    def __enter__(self) -> "Process":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = self._result.describe() if self._result else "running"
        return f"<libspace.Process {self._pid} {list(self.argv)!r} {state}>"



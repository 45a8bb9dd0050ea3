# SPDX-License-Identifier: Apache-2.0
"""Sandboxes: create, open, list; run commands, reach files; pause, lifetime, checkpoints, rollback."""

from __future__ import annotations

import ctypes
import json
import os
import socket
from dataclasses import dataclass
from typing import Any, Iterable, List, Mapping, Optional, Union

from . import _lib
from ._lib import lib
from ._util import (
    PathArg,
    cstr,
    cstr_array,
    cstr_opt,
    env_of,
    fsname,
    memfd,
    read_all,
    seconds,
    strings_of,
    text,
    uint,
    when,
)
from .checkpoints import Checkpoint
from .commands import DEFAULT_MAX_OUTPUT, Command, CommandResult, OutputFn, Process, _ExecOptions, _Output, _result, _stdin_fd
from .context import Context, _options_init, resolve
from .errors import CheckpointNotFound, SandboxNotFound, TemplateNotFound
from .files import Files

__all__ = ["Sandbox", "SandboxInfo", "SandboxGroup", "SandboxUsage"]


@dataclass(frozen=True)
class SandboxInfo:
    """A sandbox as the store records it (after the liveness check of a listing)."""

    id: str
    template: str
    isolation: str  # "vm" or "jail" (a weaker boundary: shares the host kernel)
    status: str  # "creating", "running", "paused", "stopped", "failed" or "destroyed"
    reason: str  # why it failed or stopped, "" otherwise
    pid: int  # its host process (space-vmm or the jail's PID 1), 0 if none
    cpus: int
    memory_mib: int
    created_ms: int
    updated_ms: int
    expires_ms: int  # 0: no lifetime limit
    path: str  # its subvolume

    @property
    def created(self):
        return when(self.created_ms)

    @property
    def updated(self):
        return when(self.updated_ms)

    @property
    def expires(self):
        """When its lifetime ends (an aware datetime), None without a limit."""
        return when(self.expires_ms)


@dataclass(frozen=True)
class SandboxUsage:
    """What a sandbox uses at one moment, as the host sees it (space_sandbox_get_usage)."""

    cpus: int
    cpu_ns: int  # CPU time since it started; a share is the difference of two readings over their time
    memory_bytes: int  # in use, without reclaimable page cache (shared memory and tmpfs count)
    memory_cache_bytes: int  # reclaimable page cache besides
    memory_limit_bytes: int  # its memory
    disk_used_bytes: int  # a jail's file system; a VM's disk image as the host sees it
    disk_total_bytes: int
    time_ms: int  # when it was read (milliseconds since the epoch)


def _status_name(status: int) -> str:
    return text(lib.space_sandbox_status_name(status))


def _sandbox_info(o: Any) -> SandboxInfo:
    f = _lib.field
    return SandboxInfo(
        id=fsname(o.id), template=fsname(f(o, "template_name")), isolation=fsname(f(o, "isolation")),
        status=_status_name(f(o, "status", -1)), reason=text(f(o, "reason")), pid=f(o, "pid", 0),
        cpus=f(o, "cpus", 0), memory_mib=f(o, "memory_mib", 0), created_ms=f(o, "created_ms", 0),
        updated_ms=f(o, "updated_ms", 0), expires_ms=f(o, "expires_ms", 0), path=fsname(f(o, "path")))


class Sandbox:
    """A handle on a sandbox: a disposable computer with its own root disk.

    Make one with Sandbox.create() (a new sandbox) or Sandbox.open() (one that exists, by id). The handle
    is a reference: close() releases it and the sandbox keeps running; destroy() ends the sandbox. As a
    context manager it destroys the sandbox on exit when it was created here (``destroy_on_exit``,
    default True for create and False for open), and closes the handle otherwise.
    """

    _fin: Any
    _ctx: Context

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("use Sandbox.create() or Sandbox.open()")

    @classmethod
    def _wrap(cls, ctx: Context, ptr: Any, destroy_on_exit: bool) -> "Sandbox":
        sb = cls.__new__(cls)
        sb._ctx = ctx
        sb._fin = ctx._h.adopt(sb, lib.space_sandbox_free, ptr)
        sb._sbp = ptr
        with ctx._h.enter():
            sb._id = fsname(lib.space_sandbox_id(ptr))
            sb._log_path = fsname(lib.space_sandbox_log_path(ptr))
        sb.destroy_on_exit = destroy_on_exit
        sb._destroyed = False
        return sb

    @classmethod
    def _adopt(cls, ctx: Context, ptrs: List[Any], destroy_on_exit: bool, destroy: bool) -> List["Sandbox"]:
        """Handles for native sandboxes just made (destroy) or opened; on failure none is left behind."""
        done: List[Sandbox] = []
        try:
            for p in ptrs:
                done.append(cls._wrap(ctx, p, destroy_on_exit))
            return done
        except BaseException:
            with ctx._h.enter():
                for p in ptrs[len(done):]:
                    if destroy:
                        lib.space_sandbox_destroy(p)
                    lib.space_sandbox_free(p)
            for sb in done:
                if destroy:
                    try:
                        sb.destroy()
                    except Exception:
                        pass
                sb.close()
            raise

    # -- making and finding ---------------------------------------------------------------------------
    @classmethod
    def create(cls, template: Optional[str] = None, *, isolation: Optional[str] = None, cpus: Optional[int] = None,
               memory_mib: Optional[int] = None, timeout_s: Optional[float] = None, hostname: Optional[str] = None,
               env: Optional[Mapping[str, str]] = None, network: Union[None, str, Mapping[str, Any]] = None,
               network_trusted: bool = False, network_allow_resolve: Optional[Iterable[str]] = None,
               snapshot_every: Optional[float] = None, snapshot_keep: Optional[int] = None, tether: bool = False,
               destroy_on_exit: bool = True, ctx: Optional[Context] = None) -> "Sandbox":
        """Creates a sandbox and returns once its agent answers.

        ``template``: None for "base". ``isolation``: "vm", "jail" (a weaker boundary: it shares the host
        kernel) or None for the state directory's default. ``cpus``, ``memory_mib``: None for 1 and 512.
        ``timeout_s``: its lifetime in seconds (None: no limit; at most 366 days; a fraction rounds up).
        ``hostname``: None for its id. ``env``: variables every process gets. ``network``: the egress policy
        (docs/network.md: a dict or its JSON; None: no egress at all); ``network_trusted``: the policy is
        the operator's own (it may read secrets from the environment or files; leave it False for a policy
        that came from someone else); ``network_allow_resolve``: IPv4 CIDRs an untrusted policy's resolve
        entries may point into. ``snapshot_every``/``snapshot_keep``: periodic disk snapshots (seconds;
        how many kept). ``tether``: the sandbox ends when this process does, however it ends.
        ``destroy_on_exit``: what leaving a ``with`` block does (True: destroy it; False: release the
        handle only). TemplateNotFound for an unknown template, Unsupported when the isolation cannot run
        here (the message says why). On failure nothing of it is left.
        """
        ctx = resolve(ctx)
        o = _lib.SandboxOptions()
        _options_init(lib.space_sandbox_options_init, o, _lib.SANDBOX_OPTIONS_VERSION)
        if isinstance(network, Mapping):
            network = json.dumps(network)
        if not isinstance(network_trusted, bool):
            raise TypeError("network_trusted must be True or False")
        keep = [cstr_opt(template, "template", allow_empty=False), cstr_opt(isolation, "isolation", allow_empty=False),
                cstr_opt(hostname, "hostname", allow_empty=False), cstr_array(env_of(env)),
                cstr_opt(network, "network"),
                cstr_array(strings_of(network_allow_resolve, "network_allow_resolve"))]
        o.template_name, o.isolation, o.hostname, o.env, o.network_policy, o.network_allow_resolve = keep
        o.network_policy_trusted = network_trusted
        o.cpus = uint(cpus, "cpus", 1) if cpus is not None else 0
        o.memory_mib = uint(memory_mib, "memory_mib", 1) if memory_mib is not None else 0
        o.timeout_s = seconds(timeout_s, "timeout_s", _lib.TIMEOUT_MAX_S) if timeout_s is not None else 0
        o.snapshot_every_s = seconds(snapshot_every, "snapshot_every", 604800) if snapshot_every is not None else 0
        o.snapshot_keep = uint(snapshot_keep, "snapshot_keep", 1, 100) if snapshot_keep is not None else 0
        ptr = _lib.SANDBOX_P()
        ctx._call("space_sandbox_create", ctx._ptr, ctypes.byref(o), ctypes.byref(ptr), not_found=TemplateNotFound)
        sb = cls._adopt(ctx, [ptr], destroy_on_exit, destroy=True)[0]
        if tether:
            try:
                sb.tether()
            except BaseException:
                sb.destroy()
                raise
        return sb

    @classmethod
    def open(cls, id: str, *, destroy_on_exit: bool = False, ctx: Optional[Context] = None) -> "Sandbox":
        """Opens a running sandbox by id (SandboxNotFound if there is none, NotRunning if it ended)."""
        ctx = resolve(ctx)
        ptr = _lib.SANDBOX_P()
        ctx._call("space_sandbox_open", ctx._ptr, cstr(id, "sandbox id", allow_empty=False), ctypes.byref(ptr),
                  not_found=SandboxNotFound)
        return cls._adopt(ctx, [ptr], destroy_on_exit, destroy=False)[0]

    @staticmethod
    def list(*, ctx: Optional[Context] = None) -> List[SandboxInfo]:
        """The sandboxes that are not destroyed, oldest first (dead ones shown failed; nothing is written)."""
        ctx = resolve(ctx)
        out = ctypes.POINTER(ctypes.POINTER(_lib.SandboxInfo))()
        with ctx._h.enter():
            r = lib.space_sandbox_list(ctx._h.ptr, ctypes.byref(out), None)
            if r < 0:
                ctx._raise("space_sandbox_list", r)
            try:
                res, i = [], 0
                while out[i]:
                    res.append(_sandbox_info(out[i].contents))
                    i += 1
                return res
            finally:
                lib.space_sandbox_info_list_free(out)

    @staticmethod
    def remove(id: str, *, keep_events: bool = False, with_checkpoints: bool = False,
               ctx: Optional[Context] = None) -> None:
        """Destroys a sandbox by id whatever its state (failed, half-created after a crash): `space rm`."""
        ctx = resolve(ctx)
        flags = (_lib.REMOVE_KEEP_EVENTS if keep_events else 0) | (_lib.REMOVE_WITH_CHECKPOINTS if with_checkpoints else 0)
        ctx._call("space_sandbox_remove_v2", ctx._ptr, cstr(id, "sandbox id", allow_empty=False), flags,
                  not_found=SandboxNotFound)

    @staticmethod
    def get_status(id: str, *, ctx: Optional[Context] = None) -> str:
        """The status recorded for a sandbox, destroyed ones included while their row remains (read-only)."""
        ctx = resolve(ctx)
        st = ctypes.c_int()
        ctx._call("space_sandbox_get_status", ctx._ptr, cstr(id, "sandbox id", allow_empty=False), ctypes.byref(st),
                  not_found=SandboxNotFound)
        return _status_name(st.value)

    @staticmethod
    def read_log(id: str, *, ctx: Optional[Context] = None) -> str:
        """A sandbox's log by id (its agent's messages: start-up, errors), also after it failed."""
        ctx = resolve(ctx)
        fd = memfd("libspace-log")
        try:
            ctx._call("space_sandbox_read_log", ctx._ptr, cstr(id, "sandbox id", allow_empty=False), fd,
                      not_found=SandboxNotFound)
            return read_all(fd).decode("utf-8", "backslashreplace")
        finally:
            os.close(fd)

    # -- the handle -----------------------------------------------------------------------------------
    def _call(self, function: str, *args: Any, not_found: Any = None) -> int:
        h = self._ctx._h
        with h.enter():
            if not self._fin.alive:
                raise ValueError(f"libspace: the handle of sandbox {self._id} is closed")
            r = getattr(lib, function)(self._sbp, *args)
            if r < 0:
                self._ctx._raise(function, r, not_found)
            return r

    @property
    def id(self) -> str:
        """The sandbox's id ("sb-...")."""
        return self._id

    @property
    def context(self) -> Context:
        return self._ctx

    @property
    def closed(self) -> bool:
        """True once the handle is released (the sandbox may still run)."""
        return not self._fin.alive

    @property
    def log_path(self) -> str:
        """The path of the sandbox's log on the host."""
        return self._log_path

    def info(self) -> SandboxInfo:
        """Its current state from the store (with the liveness check of a listing)."""
        out = ctypes.POINTER(_lib.SandboxInfo)()
        h = self._ctx._h
        with h.enter():
            if not self._fin.alive:
                raise ValueError(f"libspace: the handle of sandbox {self._id} is closed")
            r = lib.space_sandbox_get_info(self._sbp, ctypes.byref(out))
            if r < 0:
                self._ctx._raise("space_sandbox_get_info", r)
            try:
                return _sandbox_info(out.contents)
            finally:
                lib.space_sandbox_info_free(out)

    def usage(self) -> SandboxUsage:
        """What it uses now: CPU time and memory from its cgroup, its disk."""
        u = _lib.record(_lib.SandboxUsage)
        self._call("space_sandbox_get_usage", ctypes.byref(u))
        return SandboxUsage(u.cpus, u.cpu_ns, u.memory_bytes, u.memory_cache_bytes, u.memory_limit_bytes,
                            u.disk_used_bytes, u.disk_total_bytes, u.time_ms)

    @property
    def status(self) -> str:
        return self.info().status

    def log(self) -> str:
        """The sandbox's log (start-up, errors; not commands' output)."""
        return Sandbox.read_log(self._id, ctx=self._ctx)

    def close(self) -> None:
        """Releases the handle; the sandbox keeps running. Idempotent."""
        self._fin()

    def destroy(self) -> None:
        """Ends the sandbox: stops it and deletes its disk and runtime files; releases the handle.

        On failure the handle stays open, so destroy() can be called again (Sandbox.remove(id) also
        cleans up a sandbox whose handle is gone).
        """
        if self._destroyed:
            return
        self._call("space_sandbox_destroy")
        self._destroyed = True
        self.close()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.destroy_on_exit and not self._destroyed and self._fin.alive:
                self.destroy()
        finally:
            self.close()

    def __repr__(self) -> str:
        state = "destroyed" if self._destroyed else ("closed" if not self._fin.alive else "open")
        return f"<libspace.Sandbox {self._id} ({state})>"

    # -- lifecycle ------------------------------------------------------------------------------------
    def pause(self) -> None:
        """Freezes every process of the sandbox; commands fail with Busy until resume()."""
        self._call("space_sandbox_pause")

    def resume(self) -> None:
        self._call("space_sandbox_resume")

    def set_timeout(self, timeout_s: Optional[float]) -> None:
        """Its lifetime now ends ``timeout_s`` seconds from now (None: no limit), shorter or longer.

        Busy for a paused sandbox (resume it first), NotRunning for one that has ended."""
        s = seconds(timeout_s, "timeout_s", _lib.TIMEOUT_MAX_S) if timeout_s is not None else 0
        self._call("space_sandbox_set_timeout", s)

    def connect(self, port: int) -> socket.socket:
        """A stream to ``port`` on the sandbox's own loopback (127.0.0.1, else ::1), through its agent: a
        server started inside is reachable with no route into the sandbox, and nothing else is (not another
        sandbox's ports, not the host's). The bytes are the port's from the first one on; the socket is the
        caller's to close and does not depend on this handle.

        PortRefused (a ConnectionRefusedError) when nothing listens there; Busy when paused; Unsupported
        for an agent older than ports (a template snapshot made by an older version)."""
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise ValueError(f"libspace: port must be an int from 1 to 65535, not {port!r}")
        fd = ctypes.c_int(-1)
        self._call("space_sandbox_port_connect", port, ctypes.byref(fd))
        return socket.socket(fileno=fd.value)

    def tether(self) -> None:
        """The sandbox ends when this process ends (however it ends) or when this handle is closed."""
        self._call("space_sandbox_tether")

    # -- commands -------------------------------------------------------------------------------------
    def run(self, cmd: Command, *, check: bool = False, input: Any = None, stdin: Any = None, text: bool = False,
            encoding: str = "utf-8", errors: str = "replace", env: Optional[Mapping[str, str]] = None,
            cwd: Optional[PathArg] = None, uid: Optional[int] = None, gid: Optional[int] = None, timeout: Optional[float] = None,
            pty: bool = False, rows: Optional[int] = None, cols: Optional[int] = None,
            on_stdout: Optional[OutputFn] = None, on_stderr: Optional[OutputFn] = None, capture: bool = True,
            max_output: Optional[int] = DEFAULT_MAX_OUTPUT, rollback_on_failure: bool = False,
            checkpoint_first: bool = False) -> CommandResult:
        """Runs a command to its end and returns its CommandResult.

        ``cmd``: a list of arguments (argv[0] is looked up in the sandbox's PATH), or a str run by
        ``/bin/sh -c``. A program that does not exist raises NotFoundError (a FileNotFoundError); a
        non-zero exit is a result, unless ``check`` is set (then CommandError).

        ``input``: bytes (or str) fed to its stdin; ``stdin``: a file descriptor or file object read to its
        end instead. Without either the command has no stdin (never this process's own).
        ``text``: stdout and stderr (and what the callbacks get) are str, decoded with ``encoding`` and
        ``errors`` (default "replace": a sandbox's output is not trusted to be valid).
        ``timeout``: seconds after which its process group is killed (result.timed_out).
        ``on_stdout``/``on_stderr``: called with each chunk as it arrives; an exception raised there kills
        the command and is raised from run(). ``capture``: keep the output in the result, at most
        ``max_output`` bytes of each stream (None: no cap). ``pty``: on a terminal of ``rows`` x ``cols``
        (stdout and stderr merge).
        ``rollback_on_failure``: when the command fails, the sandbox returns to its newest checkpoint
        (result.rolled_back_to); with ``checkpoint_first`` one is taken first and returned to.
        """
        if checkpoint_first and not rollback_on_failure:
            raise ValueError("checkpoint_first needs rollback_on_failure=True")
        if not isinstance(check, bool):
            raise TypeError("check must be True or False")
        eo = _ExecOptions(cmd, env=env, cwd=cwd, uid=uid, gid=gid, pty=pty, rows=rows, cols=cols,
                          timeout=timeout)
        out = _Output(capture, max_output, text, encoding, errors, on_stdout, on_stderr)
        o = eo.opts
        o.output = out.fn
        fd, to_close = _stdin_fd(input, stdin)
        if fd is not None:
            o.flags |= _lib.EXEC_STDIN
            o.stdin_fd = fd
        res = _lib.record(_lib.ExecResult)
        rolled = None
        try:
            try:
                if rollback_on_failure:
                    buf = ctypes.create_string_buffer(_lib.CHECKPOINT_ID_MAX)
                    flags = _lib.STEP_CHECKPOINT_FIRST if checkpoint_first else 0
                    self._call("space_sandbox_exec_step", ctypes.byref(o), flags, ctypes.byref(res), buf)
                    rolled = fsname(buf.value) or None
                else:
                    self._call("space_sandbox_exec", ctypes.byref(o), ctypes.byref(res))
            except Exception:
                if out.error is not None:
                    raise out.error from None
                raise
        finally:
            if to_close is not None:
                os.close(to_close)
        if out.error is not None:
            raise out.error
        out.flush()
        result = _result(eo.argv, res, out, rolled)
        if check:
            result.check_returncode()
        return result

    def start(self, cmd: Command, *, stdin: bool = False, text: bool = False, encoding: str = "utf-8",
              errors: str = "replace", env: Optional[Mapping[str, str]] = None, cwd: Optional[PathArg] = None,
              uid: Optional[int] = None, gid: Optional[int] = None, timeout: Optional[float] = None, pty: bool = False,
              rows: Optional[int] = None, cols: Optional[int] = None, on_stdout: Optional[OutputFn] = None,
              on_stderr: Optional[OutputFn] = None, capture: bool = True,
              max_output: Optional[int] = DEFAULT_MAX_OUTPUT) -> "Process":
        """Starts a command and returns its Process: input, signals and terminal size while it runs.

        ``stdin``: True gives it a stdin fed with Process.write() (and closed with close_stdin()); False
        gives it none. The other arguments are run()'s.
        """
        if not isinstance(stdin, bool):
            raise TypeError("start(stdin=) is True or False; write the input with Process.write()")
        eo = _ExecOptions(cmd, env=env, cwd=cwd, uid=uid, gid=gid, pty=pty, rows=rows, cols=cols,
                          timeout=timeout)
        out = _Output(capture, max_output, text, encoding, errors, on_stdout, on_stderr)
        o = eo.opts
        o.output = out.fn
        if stdin:
            o.flags |= _lib.EXEC_STDIN
        ptr = _lib.PROCESS_P()
        self._call("space_process_start", ctypes.byref(o), ctypes.byref(ptr))
        return Process._wrap(self, ptr, eo, out, stdin)

    # -- files ----------------------------------------------------------------------------------------
    @property
    def files(self) -> "Files":
        """The sandbox's file system: read, write, list, remove, ..."""
        return Files(self)

    # -- checkpoints ----------------------------------------------------------------------------------
    def checkpoint(self, name: Optional[str] = None) -> "Checkpoint":
        """Takes a checkpoint (jail: its disk; VM: disk and memory) and returns it. The sandbox stays as it was."""
        buf = ctypes.create_string_buffer(_lib.CHECKPOINT_ID_MAX)
        self._call("space_checkpoint_create", cstr_opt(name, "checkpoint name", allow_empty=False), buf)
        return Checkpoint.get(fsname(buf.value), ctx=self._ctx)

    def checkpoints(self) -> List["Checkpoint"]:
        """This sandbox's checkpoints, oldest first."""
        return Checkpoint.list(sandbox_id=self._id, ctx=self._ctx)

    def rollback(self, checkpoint: Union["Checkpoint", str]) -> None:
        """Returns the sandbox to one of its own checkpoints (a Checkpoint, an id or a name).

        Jail: the processes running inside are lost; it restarts on the checkpoint's disk with the same id.
        """
        cp = checkpoint.id if isinstance(checkpoint, Checkpoint) else checkpoint
        self._call("space_sandbox_rollback", cstr(cp, "checkpoint", allow_empty=False), not_found=CheckpointNotFound)


class SandboxGroup(list):
    """Sandboxes made together (Checkpoint.fork): a list that, as a context manager, destroys them all."""

    def destroy(self) -> None:
        """Destroys every sandbox still open; raises the first failure after trying all."""
        first: Optional[BaseException] = None
        for sb in self:
            try:
                if not sb.closed:
                    sb.destroy()
            except BaseException as e:
                first = first or e
        if first is not None:
            raise first

    def close(self) -> None:
        for sb in self:
            sb.close()

    def __enter__(self) -> "SandboxGroup":
        return self

    def __exit__(self, *exc: Any) -> None:
        first: Optional[BaseException] = None
        for sb in self:
            try:
                sb.__exit__(*exc)
            except BaseException as e:
                first = first or e
        if first is not None:
            raise first



# SPDX-License-Identifier: Apache-2.0
"""Context: one space_ctx, the state directory it works on, and the thread rules of the C library.

The C library allows one thread at a time per space_ctx (and the objects made from it) and any number of
contexts in parallel. A Context enforces that with a lock: calls on one context from several threads are
serialized, never concurrent, so sharing one is safe but not parallel; give each thread that should run in
parallel its own Context (default_context() does: one per thread). The lock is not reentrant: a callback
the library is running (a command's output, a progress report) must not call the same context again, and
doing so raises RuntimeError instead of re-entering the library.

After os.fork() a child must not use a context its parent made (its SQLite connection and descriptors are
the parent's): every call in the child raises RuntimeError, and the child never frees the parent's
handles. Create a new Context in the child (default_context() does so by itself).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional

from . import _lib
from ._lib import lib
from ._util import PathArg, cstr, cstr_opt, fsname, text, uint, when, U64_MAX
from .errors import error_class

__all__ = ["Context", "PoolInfo", "Event", "SecretInfo", "default_context", "version"]

logger = logging.getLogger("libspace")
logger.addHandler(logging.NullHandler())

_LEVELS = {_lib.LOG_ERROR: logging.ERROR, _lib.LOG_WARNING: logging.WARNING, _lib.LOG_INFO: logging.INFO,
           _lib.LOG_DEBUG: logging.DEBUG}

ProgressFn = Callable[[str, int, int], None]


def version() -> str:
    """The version of the libspace library actually loaded, e.g. "0.1.0"."""
    return text(lib.space_version())


def strerror(code: int) -> str:
    """The library's description of an error code (negative or positive errno)."""
    return text(lib.space_strerror(int(code)))


def _log_trampoline(level: int, message: bytes, userdata: Any) -> None:
    try:
        logger.log(_LEVELS.get(level, logging.INFO), "%s", text(message))
    except Exception:  # a callback must not raise into C
        pass


_LOG_FN = _lib.LOG_FN(_log_trampoline)  # one for every context; lives as long as the module


class _Sigint:
    """Ctrl-C while the library runs a callback of ours.

    Python's default SIGINT handler raises KeyboardInterrupt at the next bytecode, which may be the first
    one of a callback that ctypes is running for the library; ctypes can only print and drop an exception
    raised there, and the call would go on. So while a call runs in the main thread with that default
    handler, a handler that only records the signal takes its place: callbacks see interrupted() and stop
    the call (a command is killed), and the call raises KeyboardInterrupt when it returns. Any other handler
    the program installed is left alone.
    """

    def __init__(self) -> None:
        self.depth = 0
        self.prev: Any = None
        self.hit = False

    def _on(self, signum: int, frame: Any) -> None:
        self.hit = True

    def enter(self) -> bool:
        if threading.current_thread() is not threading.main_thread():
            return False
        if self.depth == 0:
            if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
                return False
            try:
                self.prev = signal.signal(signal.SIGINT, self._on)
            except (ValueError, OSError):
                return False
            self.hit = False
        self.depth += 1
        return True

    def leave(self) -> bool:
        """True when a SIGINT came during the outermost call: raise KeyboardInterrupt."""
        self.depth -= 1
        if self.depth:
            return False
        signal.signal(signal.SIGINT, self.prev)
        self.prev = None
        hit, self.hit = self.hit, False
        return hit


_sigint = _Sigint()


def interrupted() -> bool:
    """A SIGINT arrived during the current call (callbacks stop the call then)."""
    return _sigint.hit


class _Handle:
    """The space_ctx pointer, its lock, and the native objects made from it (private)."""

    def __init__(self, ptr: Any) -> None:
        self.ptr = ptr
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.owner: Optional[int] = None
        self.freed = False
        self.children: "set[weakref.finalize]" = set()  # of each native object made from the context
        self.prune_at = 64
        self.deferred: List[Any] = []

    def usable(self) -> None:
        if self.pid != os.getpid():
            raise RuntimeError("libspace: this Context was made by the parent of a forked process; create a new "
                               "Context in the child")
        if self.freed:
            raise RuntimeError("libspace: this Context is closed")

    @contextmanager
    def enter(self) -> Iterator[None]:
        self.usable()
        me = threading.get_ident()
        if self.owner == me:
            raise RuntimeError("libspace: called back into a Context from a callback it is running (the library "
                               "is not reentrant); do it after the call returns")
        with self.lock:
            self.owner = me
            guarded = _sigint.enter()
            try:
                yield
            finally:
                self.drain()
                self.owner = None
                if guarded and _sigint.leave():
                    raise KeyboardInterrupt

    def drain(self) -> None:
        while self.deferred:
            free_fn, ptr, _keep = self.deferred.pop()
            free_fn(ptr)

    def release(self, free_fn: Callable[[Any], None], ptr: Any, *keep: Any) -> None:
        """Frees a native object of this context now if the context is idle, else when its call ends.

        Finalizers call this at any moment, also while this thread is inside a call on the context (a
        garbage collection in a callback), so it never waits for the lock.
        """
        if self.pid != os.getpid() or self.freed:
            return
        if self.owner is None and self.lock.acquire(blocking=False):
            try:
                free_fn(ptr)
                self.drain()
            finally:
                self.lock.release()
        else:
            self.deferred.append((free_fn, ptr, keep))

    def adopt(self, obj: Any, free_fn: Callable[[Any], None], ptr: Any, *keep: Any) -> "weakref.finalize":
        """Ties a native object to obj: freed when obj is collected, closed, or the context closes.

        ``keep``: objects the native one refers to (callbacks), kept alive until it is freed."""
        fin = weakref.finalize(obj, self.release, free_fn, ptr, *keep)
        if len(self.children) >= self.prune_at:  # forget the finalizers that ran (amortized)
            self.children = {f for f in self.children if f.alive}
            self.prune_at = max(64, 2 * len(self.children))
        self.children.add(fin)
        return fin

    def close(self) -> None:
        if self.freed or self.pid != os.getpid():
            return
        if self.owner == threading.get_ident():
            raise RuntimeError("libspace: a Context cannot be closed from a callback it is running")
        with self.lock:
            for fin in list(self.children):
                got = fin.detach()
                if got is not None:
                    _obj, _func, args, _kw = got
                    args[0](args[1])  # free_fn(ptr)
            self.drain()
            lib.space_ctx_free(self.ptr)
            self.freed = True


def _finalize_handle(h: _Handle) -> None:
    try:
        h.close()
    except RuntimeError:
        pass


@dataclass(frozen=True)
class PoolInfo:
    """Where the storage pool is and how full (Context.pool_info)."""

    path: str
    loop_image: str  # the backing image of a loop pool, "" otherwise
    isolation: str  # the default isolation of new sandboxes: "vm" or "jail"
    total_bytes: int
    free_bytes: int
    mounted: bool
    used_bytes: int = 0  # statvfs's: an approximation on btrfs
    promised_bytes: int = 0  # the sandboxes' disks' apparent sizes, summed: what they could grow to
    sandbox_disks: int = 0


@dataclass(frozen=True)
class Event:
    """One event of the state directory's log. kind and detail may quote text a sandbox made."""

    seq: int
    ts_ms: int
    sandbox_id: Optional[str]
    kind: str
    detail: Optional[str]

    @property
    def time(self):
        return when(self.ts_ms)


@dataclass(frozen=True)
class SecretInfo:
    """A registered secret: its name and when its value was set (never the value)."""

    name: str
    created_ms: int

    @property
    def created(self):
        return when(self.created_ms)


def _options_init(fn: Any, opts: Any, version: int) -> None:
    """Fills an options struct with the defaults of its version, by the library's own init function."""
    r = fn(ctypes.byref(opts), version)
    if r < 0:  # only for a library older than this binding: there is no context to ask why
        raise error_class(r)(-r, f"{fn.__name__}: version {version} refused by the loaded libspace "
                             f"{text(lib.space_version())}", fn.__name__)


def _progress_fn(progress: Optional[ProgressFn], errors: List[BaseException]) -> Any:
    if progress is None:
        return _lib.PROGRESS_FN()

    def cb(stage: bytes, done: int, total: int, userdata: Any) -> None:
        if errors or interrupted():
            return
        try:
            progress(text(stage), int(done), int(total))
        except BaseException as e:  # kept, raised once the call returns
            errors.append(e)

    return _lib.PROGRESS_FN(cb)


class Context:
    """A libspace context over a state directory.

    ``state_dir``: None for $SPACE_STATE_DIR, else /var/lib/space. ``libexec_dir``: where the helpers
    (space-agent, space-vmm, ...) are; None for $SPACE_LIBEXEC_DIR, else the install location. Creating a
    context touches nothing on disk. The library's log lines go to the ``logging`` logger "libspace"
    (debug lines only when that logger is enabled for DEBUG when the context is made).

    Use it as a context manager, or call close(); closing releases every Sandbox and Process handle made
    from it (their sandboxes keep running).
    """

    def __init__(self, state_dir: Optional[PathArg] = None, *, libexec_dir: Optional[PathArg] = None) -> None:
        opts = _lib.CtxOptions()
        _options_init(lib.space_ctx_options_init, opts, _lib.CTX_OPTIONS_VERSION)
        self._keep = [cstr_opt(state_dir, "state_dir", allow_empty=False),
                      cstr_opt(libexec_dir, "libexec_dir", allow_empty=False)]
        opts.state_dir, opts.libexec_dir = self._keep
        opts.log = _LOG_FN
        opts.log_level = _lib.LOG_DEBUG if logger.isEnabledFor(logging.DEBUG) else _lib.LOG_INFO
        ptr = _lib.CTX_P()
        r = lib.space_ctx_new(ctypes.byref(opts), ctypes.byref(ptr))
        if r < 0:
            raise error_class(r)(-r, "create context: " + strerror(r), "space_ctx_new")
        self._h = _Handle(ptr)
        self._fin = weakref.finalize(self, _finalize_handle, self._h)

    # -- plumbing shared by every object of the context ----------------------------------------------
    def _call(self, function: str, *args: Any, not_found: Any = None) -> int:
        with self._h.enter():
            r = getattr(lib, function)(*args)
            if r < 0:
                self._raise(function, r, not_found)
            return r

    def _raise(self, function: str, r: int, not_found: Any = None) -> None:
        """Raises the error of a call that just failed on this thread (inside enter()); ``not_found``:
        the NotFound subclass an ENOENT of this call means."""
        msg = text(lib.space_last_error(self._h.ptr)) or strerror(r)
        raise error_class(r, not_found)(-r, msg, function)

    def _sibling(self) -> "Context":
        """A new context over the same state directory and helpers (for work in parallel)."""
        return Context(self._keep[0], libexec_dir=self._keep[1])

    @property
    def _ptr(self) -> Any:
        self._h.usable()
        return self._h.ptr

    # -- the context itself ---------------------------------------------------------------------------
    @property
    def state_dir(self) -> str:
        """The state directory this context uses."""
        with self._h.enter():
            return fsname(lib.space_ctx_state_dir(self._h.ptr))

    @property
    def closed(self) -> bool:
        return self._h.freed

    @property
    def templates(self):
        """The templates of this context (list, get, import_, remove): a libspace.Templates."""
        from .templates import Templates
        return Templates(self)

    def close(self) -> None:
        """Frees the context and every handle made from it. Sandboxes keep running. Idempotent."""
        self._h.close()

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._h.freed:
            return "<libspace.Context closed>"
        try:
            return f"<libspace.Context {self.state_dir!r}>"
        except RuntimeError:
            return "<libspace.Context>"

    # -- state directory, pool, host ------------------------------------------------------------------
    def init(self, *, pool_path: Optional[PathArg] = None, loop_pool_size: Optional[int] = None,
             isolation: Optional[str] = None, identity_map: Optional[bool] = None,
             progress: Optional[ProgressFn] = None) -> None:
        """Prepares the state directory (space init): the store and the pool. Idempotent.

        Give an existing btrfs directory as ``pool_path``, or ``loop_pool_size`` bytes for a loop pool in
        the state directory. ``isolation``: the default of new sandboxes, "vm" or "jail" (a weaker
        boundary). ``identity_map``: True allows, False refuses jails that cannot idmap their rootfs; None
        leaves the setting as it is.
        """
        if pool_path is not None and loop_pool_size is not None:
            raise ValueError("give pool_path or loop_pool_size, not both")
        opts = _lib.InitOptions()
        _options_init(lib.space_init_options_init, opts, _lib.INIT_OPTIONS_VERSION)
        keep = [cstr_opt(pool_path, "pool_path", allow_empty=False), cstr_opt(isolation, "isolation")]
        opts.pool_path, opts.isolation = keep
        if loop_pool_size is not None:
            opts.loop_pool_size = uint(loop_pool_size, "loop_pool_size", 1, U64_MAX)
        if identity_map is not None:
            if not isinstance(identity_map, bool):
                raise TypeError("identity_map must be True, False or None")
            opts.identity_map = _lib.IDENTITY_MAP_ALLOW if identity_map else _lib.IDENTITY_MAP_REFUSE
        errors: List[BaseException] = []
        opts.progress = _progress_fn(progress, errors)
        self._call("space_init", self._ptr, ctypes.byref(opts))
        if errors:
            raise errors[0]

    def identity_map_allowed(self) -> bool:
        """Whether the state directory lets jails run with the identity uid map (a weaker boundary)."""
        return self._call("space_identity_map_allowed", self._ptr) == 1

    def pool_info(self) -> PoolInfo:
        """Where the pool is and how full (re-mounts a loop pool that is not mounted)."""
        out = ctypes.POINTER(_lib.PoolInfo)()
        with self._h.enter():
            r = lib.space_pool_get_info(self._h.ptr, ctypes.byref(out))
            if r < 0:
                self._raise("space_pool_get_info", r)
            try:
                o = out.contents
                return PoolInfo(path=fsname(o.path), loop_image=fsname(_lib.field(o, "loop_image")),
                                isolation=fsname(_lib.field(o, "isolation")),
                                total_bytes=_lib.field(o, "total_bytes", 0),
                                free_bytes=_lib.field(o, "free_bytes", 0),
                                mounted=bool(_lib.field(o, "mounted", False)),
                                used_bytes=_lib.field(o, "used_bytes", 0),
                                promised_bytes=_lib.field(o, "promised_bytes", 0),
                                sandbox_disks=_lib.field(o, "sandbox_disks", 0))
            finally:
                lib.space_pool_info_free(out)

    def unmount_pool(self) -> None:
        """Unmounts a loop pool (Busy while sandboxes run); the next use mounts it again."""
        self._call("space_pool_unmount", self._ptr)

    def doctor(self, *, verbose: bool = False) -> Dict[str, Any]:
        """What this host can run (space doctor): {"checks": [...], "vm": {...}, "jail": {...}}."""
        out = ctypes.c_void_p()
        with self._h.enter():
            r = lib.space_doctor(self._h.ptr, _lib.DOCTOR_VERBOSE if verbose else 0, ctypes.byref(out))
            if r < 0:
                self._raise("space_doctor", r)
            try:
                doc = ctypes.string_at(out.value) if out.value else b"{}"
            finally:
                _lib.free(out)
        return json.loads(doc.decode("utf-8", "replace"))

    def reap(self) -> int:
        """Destroys every sandbox whose lifetime ended and marks dead ones failed; returns how many it destroyed."""
        return self._call("space_sandbox_reap", self._ptr)

    # -- registered secrets ---------------------------------------------------------------------------
    def set_secret(self, name: str, value: Any) -> None:
        """Stores a secret that network policies can name as "secret:NAME" (never returned by any call).

        ``value``: str or bytes, 1..8192 bytes without NUL, CR or LF. Keep your own copy short-lived.
        """
        n = cstr(name, "secret name", allow_empty=False)
        v = value.encode("utf-8") if isinstance(value, str) else value
        if not isinstance(v, (bytes, bytearray)):
            raise TypeError("a secret's value is str or bytes")
        buf = ctypes.create_string_buffer(bytes(v), len(v))
        try:
            self._call("space_secret_set", self._ptr, n, buf, len(v))
        finally:
            ctypes.memset(buf, 0, len(v))

    def secrets(self) -> List[SecretInfo]:
        """The registered secrets, by name (names and times only)."""
        out = ctypes.POINTER(ctypes.POINTER(_lib.SecretInfo))()
        with self._h.enter():
            r = lib.space_secret_list(self._h.ptr, ctypes.byref(out), None)
            if r < 0:
                self._raise("space_secret_list", r)
            try:
                res = []
                i = 0
                while out[i]:
                    o = out[i].contents
                    res.append(SecretInfo(name=fsname(o.name), created_ms=_lib.field(o, "created_ms", 0)))
                    i += 1
                return res
            finally:
                lib.space_secret_info_list_free(out)

    def remove_secret(self, name: str) -> None:
        """Removes a registered secret (NotFound if there is none)."""
        self._call("space_secret_remove", self._ptr, cstr(name, "secret name", allow_empty=False))

    # -- the event log --------------------------------------------------------------------------------
    def events(self, *, sandbox_id: Optional[str] = None, kind: Optional[str] = None, after_seq: int = 0,
               limit: int = 0) -> List[Event]:
        """Events of the log, oldest first: of one sandbox or all, of one kind or all, after a cursor."""
        q = _lib.EventQuery()
        _options_init(lib.space_event_query_init, q, _lib.EVENT_QUERY_VERSION)
        keep = [cstr_opt(sandbox_id, "sandbox_id", allow_empty=False), cstr_opt(kind, "kind", allow_empty=False)]
        q.sandbox_id, q.kind = keep
        q.after_seq = uint(after_seq, "after_seq", 0, (1 << 63) - 1)
        q.limit = uint(limit, "limit")
        res: List[Event] = []

        def cb(ev: Any, userdata: Any) -> int:
            e = ev.contents
            res.append(Event(seq=e.seq, ts_ms=e.ts_ms,
                             sandbox_id=fsname(e.sandbox_id) if e.sandbox_id else None,
                             kind=text(e.kind), detail=text(e.detail) if _lib.field(e, "detail") else None))
            return 0

        fn = _lib.EVENT_FN(cb)
        self._call("space_event_list", self._ptr, ctypes.byref(q), fn, None)
        return res


_default = threading.local()


def default_context() -> Context:
    """This thread's default Context ($SPACE_STATE_DIR, else /var/lib/space), made on first use.

    Every call that takes ``ctx=None`` uses it. One per thread, so threads using the defaults run in
    parallel; a forked child gets a new one.
    """
    ctx = getattr(_default, "ctx", None)
    if ctx is None or ctx._h.pid != os.getpid() or ctx.closed:
        ctx = Context()
        _default.ctx = ctx
    return ctx


def resolve(ctx: Optional[Context]) -> Context:
    if ctx is None:
        return default_context()
    if not isinstance(ctx, Context):
        raise TypeError(f"ctx must be a libspace.Context, not {type(ctx).__name__}")
    return ctx

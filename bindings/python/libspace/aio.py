# SPDX-License-Identifier: Apache-2.0
"""asyncio face: the same calls, awaited, each run in a worker thread of the event loop's executor.

The C library blocks (a command runs to its end inside space_sandbox_exec), and ctypes releases the GIL
during a call, so a thread per call in flight is all an event loop needs::

    from libspace import aio

    async with aio.Sandbox.create(template="base") as sb:
        r = await sb.run(["python3", "-c", "print(6*7)"], check=True)

Every sandbox made here without ``ctx`` gets a Context of its own (closed with it), so sandboxes run in
parallel; calls on one sandbox are serialized by its context (the C library's one-thread-at-a-time rule).
How many run at once is bounded by the loop's default executor (``loop.set_default_executor`` to change
it). Callbacks (on_stdout, on_stderr, progress) are called in the worker thread, not in the event loop:
use ``loop.call_soon_threadsafe`` to hand data to it. Cancelling an await does not stop the call already
running in its thread (a command runs on until it ends or its ``timeout``); a create whose await is
cancelled destroys the sandbox once it is made, so nothing is left behind.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from typing import Any, Callable, List, Optional, TypeVar

from . import sandbox as _sync
from .checkpoints import Checkpoint
from .commands import CommandResult
from .context import Context
from .files import FileInfo, Files as _SyncFiles
from .sandbox import SandboxInfo

__all__ = ["Sandbox", "Files", "fork"]

T = TypeVar("T")


async def _run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))


class Files:
    """sandbox.files, awaited."""

    def __init__(self, files: _SyncFiles) -> None:
        self._f = files

    async def write(self, path: Any, data: Any, *, mode: int = 0o644) -> None:
        await _run(self._f.write, path, data, mode=mode)

    async def read(self, path: Any, **kwargs: Any) -> Any:
        return await _run(self._f.read, path, **kwargs)

    async def list(self, path: Any = "/") -> List[FileInfo]:
        return await _run(self._f.list, path)

    async def stat(self, path: Any) -> FileInfo:
        return await _run(self._f.stat, path)

    async def exists(self, path: Any) -> bool:
        return await _run(self._f.exists, path)

    async def remove(self, path: Any, *, recursive: bool = False) -> None:
        await _run(self._f.remove, path, recursive=recursive)

    async def mkdir(self, path: Any, *, mode: int = 0o755, parents: bool = False) -> None:
        await _run(self._f.mkdir, path, mode=mode, parents=parents)

    async def rename(self, src: Any, dst: Any) -> None:
        await _run(self._f.rename, src, dst)

    async def upload(self, src: Any, path: Any, **kwargs: Any) -> None:
        await _run(self._f.upload, src, path, **kwargs)

    async def download(self, path: Any, dest: Any, **kwargs: Any) -> FileInfo:
        return await _run(self._f.download, path, dest, **kwargs)


class _Making:
    """What aio.Sandbox.create() returns: await it, or use it in ``async with`` (destroyed at the end)."""

    def __init__(self, make: Callable[[], "Sandbox"]) -> None:
        self._make = make
        self._sb: Optional[Sandbox] = None
        self._lock = threading.Lock()
        self._cancelled = False
        self._delivered = False

    def _work(self) -> Optional["Sandbox"]:
        sb = self._make()
        with self._lock:
            if not self._cancelled:
                self._delivered = True
                return sb
        sb._end_sync()  # nobody awaits it any more: end it here, in the worker thread
        return None

    async def _get(self) -> "Sandbox":
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(None, self._work)
        try:
            sb = await asyncio.shield(fut)
            assert sb is not None
            return sb
        except asyncio.CancelledError:
            with self._lock:
                self._cancelled = True
                delivered = self._delivered
            if delivered:  # made and handed over just before the cancel: end it in a thread of its own

                def end(f: "asyncio.Future[Optional[Sandbox]]") -> None:
                    made = f.result()
                    if made is not None:
                        threading.Thread(target=made._end_sync, daemon=False).start()

                if fut.done():
                    end(fut)
                else:
                    fut.add_done_callback(end)
            raise

    def __await__(self):
        return self._get().__await__()

    async def __aenter__(self) -> "Sandbox":
        self._sb = await self._get()
        return self._sb

    async def __aexit__(self, *exc: Any) -> None:
        if self._sb is not None:
            await self._sb.__aexit__(*exc)


class Sandbox:
    """libspace.Sandbox, awaited. ``sandbox`` is the synchronous handle underneath."""

    def __init__(self, sandbox: _sync.Sandbox, own_ctx: bool = False) -> None:
        self.sandbox = sandbox
        self._own_ctx = own_ctx

    @classmethod
    def create(cls, template: Optional[str] = None, *, ctx: Optional[Context] = None, **kwargs: Any) -> _Making:
        """Sandbox.create() in a worker thread; the arguments are the same."""

        def make() -> "Sandbox":
            own = ctx is None
            c = Context() if own else ctx
            try:
                sb = _sync.Sandbox.create(template, ctx=c, **kwargs)
            except BaseException:
                if own:
                    c.close()
                raise
            return cls(sb, own_ctx=own)

        return _Making(make)

    @classmethod
    async def open(cls, id: str, *, ctx: Optional[Context] = None, destroy_on_exit: bool = False) -> "Sandbox":
        def make() -> "Sandbox":
            own = ctx is None
            c = Context() if own else ctx
            try:
                sb = _sync.Sandbox.open(id, ctx=c, destroy_on_exit=destroy_on_exit)
            except BaseException:
                if own:
                    c.close()
                raise
            return cls(sb, own_ctx=own)

        return await _run(make)

    @staticmethod
    async def list(*, ctx: Optional[Context] = None) -> List[SandboxInfo]:
        def do() -> List[SandboxInfo]:
            if ctx is not None:
                return _sync.Sandbox.list(ctx=ctx)
            with Context() as c:
                return _sync.Sandbox.list(ctx=c)

        return await _run(do)

    @property
    def id(self) -> str:
        return self.sandbox.id

    @property
    def files(self) -> Files:
        return Files(self.sandbox.files)

    async def run(self, cmd: Any, **kwargs: Any) -> CommandResult:
        """Sandbox.run(), awaited (callbacks run in the worker thread)."""
        return await _run(self.sandbox.run, cmd, **kwargs)

    async def info(self) -> SandboxInfo:
        return await _run(self.sandbox.info)

    async def pause(self) -> None:
        await _run(self.sandbox.pause)

    async def resume(self) -> None:
        await _run(self.sandbox.resume)

    async def set_timeout(self, timeout_s: Optional[float]) -> None:
        await _run(self.sandbox.set_timeout, timeout_s)

    async def checkpoint(self, name: Optional[str] = None) -> Checkpoint:
        return await _run(self.sandbox.checkpoint, name)

    async def rollback(self, checkpoint: Any) -> None:
        await _run(self.sandbox.rollback, checkpoint)

    def _close_sync(self) -> None:
        self.sandbox.close()
        if self._own_ctx:
            self.sandbox.context.close()

    def _end_sync(self) -> None:
        try:
            self.sandbox.destroy()
        finally:
            self._close_sync()

    async def destroy(self) -> None:
        await _run(self._end_sync)

    async def close(self) -> None:
        """Releases the handle (and its own context); the sandbox keeps running."""
        await _run(self._close_sync)

    async def __aenter__(self) -> "Sandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.sandbox.destroy_on_exit and not self.sandbox.closed:
            await self.destroy()
        else:
            await self.close()

    def __repr__(self) -> str:
        return f"<libspace.aio.Sandbox {self.id}>"


async def fork(checkpoint: Checkpoint, count: int = 1, *, timeout_s: Optional[float] = None) -> List[Sandbox]:
    """checkpoint.fork(), awaited: ``count`` new sandboxes, each with a Context of its own, so they run in
    parallel. All or nothing."""

    def do() -> List[Sandbox]:
        group = checkpoint.fork(count, timeout_s=timeout_s)
        out: List[Sandbox] = []
        try:
            for sb in group:
                c = checkpoint.ctx._sibling()
                try:
                    out.append(Sandbox(_sync.Sandbox.open(sb.id, ctx=c, destroy_on_exit=True), own_ctx=True))
                except BaseException:
                    c.close()
                    raise
            group.close()
            return out
        except BaseException:
            for a in out:
                a._close_sync()
            group.destroy()
            raise

    return await _run(do)

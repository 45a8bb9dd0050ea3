# SPDX-License-Identifier: Apache-2.0
"""Checkpoints: read-only snapshots of a sandbox, to roll back to or fork from."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, List, Optional

from . import _lib
from ._lib import lib
from ._util import cstr, cstr_opt, fsname, seconds, uint, when
from .context import Context, _options_init, resolve
from .errors import CheckpointNotFound

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import SandboxGroup

__all__ = ["Checkpoint"]


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint: a read-only snapshot of a sandbox (jail: its disk; VM: also its memory and devices).

    It outlives its sandbox until removed. fork() starts new sandboxes from it; Sandbox.rollback() returns
    its own sandbox to it.
    """

    id: str
    sandbox_id: str
    template: str
    name: str  # "" when none was given
    kind: str  # "disk" (jail) or "full" (VM)
    path: str
    created_ms: int
    ctx: Context = field(repr=False, compare=False)

    @property
    def created(self):
        return when(self.created_ms)

    @property
    def automatic(self) -> bool:
        """Taken by a periodic snapshot policy ("auto-<digits>")."""
        n = self.name
        return n.startswith("auto-") and len(n) > 5 and n[5:].isdigit()

    @classmethod
    def _from(cls, o: Any, ctx: Context) -> "Checkpoint":
        f = _lib.field
        return cls(id=fsname(o.id), sandbox_id=fsname(f(o, "sandbox_id")), template=fsname(f(o, "template_name")),
                   name=fsname(f(o, "name")), kind=fsname(f(o, "kind")), path=fsname(f(o, "path")),
                   created_ms=f(o, "created_ms", 0), ctx=ctx)

    @classmethod
    def _one(cls, ctx: Context, function: str, *args: Any) -> "Checkpoint":
        out = ctypes.POINTER(_lib.CheckpointInfo)()
        with ctx._h.enter():
            r = getattr(lib, function)(ctx._h.ptr, *args, ctypes.byref(out))
            if r < 0:
                ctx._raise(function, r, CheckpointNotFound)
            try:
                return cls._from(out.contents, ctx)
            finally:
                lib.space_checkpoint_info_free(out)

    @classmethod
    def get(cls, id: str, *, ctx: Optional[Context] = None) -> "Checkpoint":
        """A checkpoint by id (CheckpointNotFound if there is none)."""
        ctx = resolve(ctx)
        return cls._one(ctx, "space_checkpoint_get", cstr(id, "checkpoint id", allow_empty=False))

    @classmethod
    def find(cls, id_or_name: str, *, sandbox_id: Optional[str] = None, ctx: Optional[Context] = None) -> "Checkpoint":
        """A checkpoint by id, or by name among a sandbox's (or all); InvalidArgument when ambiguous."""
        ctx = resolve(ctx)
        return cls._one(ctx, "space_checkpoint_find", cstr_opt(sandbox_id, "sandbox id", allow_empty=False),
                        cstr(id_or_name, "checkpoint", allow_empty=False))

    @classmethod
    def list(cls, *, sandbox_id: Optional[str] = None, ctx: Optional[Context] = None) -> List["Checkpoint"]:
        """Checkpoints, oldest first: of one sandbox, or of all."""
        ctx = resolve(ctx)
        out = ctypes.POINTER(ctypes.POINTER(_lib.CheckpointInfo))()
        sid = cstr_opt(sandbox_id, "sandbox id", allow_empty=False)
        with ctx._h.enter():
            r = lib.space_checkpoint_list(ctx._h.ptr, sid, ctypes.byref(out), None)
            if r < 0:
                ctx._raise("space_checkpoint_list", r)
            try:
                res, i = [], 0
                while out[i]:
                    res.append(cls._from(out[i].contents, ctx))
                    i += 1
                return res
            finally:
                lib.space_checkpoint_info_list_free(out)

    def fork(self, count: int = 1, *, timeout_s: Optional[float] = None,
             destroy_on_exit: bool = True) -> "SandboxGroup":
        """Starts ``count`` (1..64) independent sandboxes from this checkpoint, all or nothing.

        Each has the limits and environment of the checkpointed sandbox. ``timeout_s``: each one's lifetime
        in seconds; None: what is left of the checkpointed sandbox's (Timeout when that has ended). Returns
        a SandboxGroup: ``with cp.fork(count=2) as (a, b):`` destroys both at the end.
        """
        from .sandbox import Sandbox, SandboxGroup

        n = uint(count, "count", 1, _lib.FORK_COUNT_MAX)
        o = _lib.CheckpointForkOptions()
        _options_init(lib.space_checkpoint_fork_options_init, o, _lib.CHECKPOINT_FORK_OPTIONS_VERSION)
        o.count = n
        o.timeout_s = seconds(timeout_s, "timeout_s", _lib.TIMEOUT_MAX_S) if timeout_s is not None else 0
        arr = (_lib.SANDBOX_P * n)()
        self.ctx._call("space_checkpoint_fork", self.ctx._ptr, cstr(self.id, "checkpoint id"), ctypes.byref(o), arr,
                       not_found=CheckpointNotFound)
        return SandboxGroup(Sandbox._adopt(self.ctx, [arr[i] for i in range(n)], destroy_on_exit, destroy=True))

    def remove(self) -> None:
        """Deletes the checkpoint. Sandboxes forked or rolled back from it are not affected."""
        self.ctx._call("space_checkpoint_remove", self.ctx._ptr, cstr(self.id, "checkpoint id"),
                       not_found=CheckpointNotFound)

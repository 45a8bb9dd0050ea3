# SPDX-License-Identifier: Apache-2.0
"""Templates: the read-only root disks sandboxes are copy-on-write clones of."""

from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from . import _lib
from ._lib import lib
from ._util import PathArg, U64_MAX, cstr, cstr_opt, fsname, uint, when
from .context import Context, ProgressFn, _options_init, _progress_fn, resolve
from .errors import TemplateNotFound

__all__ = ["Template", "Templates", "WarmInfo", "templates"]


@dataclass(frozen=True)
class WarmInfo:
    """A template's booted snapshot (VM) and warm pool."""

    has_snapshot: bool
    snapshot_cpus: int
    snapshot_memory_mib: int
    snapshot_created_ms: int
    warm_pool_size: int  # the target (0: no warm pool)
    warm_pool_ready: int  # paused sandboxes ready now


def _json_or_none(raw: Optional[bytes]) -> Optional[Dict[str, Any]]:
    if not raw:
        return None
    try:
        v = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return None
    return v if isinstance(v, dict) else None


@dataclass(frozen=True)
class Template:
    """A template: a root disk image (rootfs.ext4) and optionally a kernel and initrd, in the pool."""

    name: str
    path: str
    rootfs_bytes: int
    has_kernel: bool
    has_initrd: bool
    created_ms: int
    sandboxes: int  # sandboxes (not destroyed) made from it
    checkpoints: int  # checkpoints that depend on it
    ctx: Context = field(repr=False, compare=False)
    image_digest: str = ""  # the image config's digest ("sha256:..."); "" when not made from an image
    image_config: Optional[Dict[str, Any]] = None  # what the image gives processes (env, working_dir,
    # user, entrypoint, cmd), None when not made from an image
    id: str = ""  # its identity: the same on every host it reached by `space template send/receive`

    @property
    def created(self):
        return when(self.created_ms)

    @classmethod
    def _from(cls, o: Any, ctx: Context) -> "Template":
        f = _lib.field
        return cls(name=fsname(o.name), path=fsname(f(o, "path")), rootfs_bytes=f(o, "rootfs_bytes", 0),
                   has_kernel=bool(f(o, "has_kernel", False)), has_initrd=bool(f(o, "has_initrd", False)),
                   created_ms=f(o, "created_ms", 0), sandboxes=f(o, "sandboxes", 0),
                   checkpoints=f(o, "checkpoints", 0), ctx=ctx,
                   image_digest=fsname(f(o, "image_digest")) if f(o, "image_digest") else "",
                   image_config=_json_or_none(f(o, "image_config")),
                   id=(f(o, "id") or b"").decode("ascii", "replace"))

    def remove(self, *, force: bool = False) -> None:
        """Removes this template (Busy while sandboxes or checkpoints use it, unless ``force``: then
        dependent sandboxes keep their own copy-on-write disks)."""
        Templates(self.ctx).remove(self.name, force=force)

    def refresh(self) -> "Template":
        """This template as it is now (its counts change as sandboxes come and go)."""
        return Templates(self.ctx).get(self.name)

    def warm_info(self) -> WarmInfo:
        """Its booted snapshot and warm pool state."""
        rec = _lib.record(_lib.TemplateWarmInfo)
        self.ctx._call("space_template_get_warm_info", self.ctx._ptr, cstr(self.name, "template name"),
                       ctypes.byref(rec), not_found=TemplateNotFound)
        f = _lib.field
        return WarmInfo(has_snapshot=bool(f(rec, "has_snapshot", False)), snapshot_cpus=f(rec, "snapshot_cpus", 0),
                        snapshot_memory_mib=f(rec, "snapshot_memory_mib", 0),
                        snapshot_created_ms=f(rec, "snapshot_created_ms", 0),
                        warm_pool_size=f(rec, "warm_pool_size", 0), warm_pool_ready=f(rec, "warm_pool_ready", 0))

    def set_warm_pool(self, size: int) -> None:
        """Keeps ``size`` (0..64) paused sandboxes of this template ready; 0 removes the warm pool.

        Filling it is fill_warm_pool()'s job (space serve does it in the background). A create with default
        options (no env, hostname, network policy, cpus or memory) takes one.
        """
        self.ctx._call("space_template_set_warm_pool", self.ctx._ptr, cstr(self.name, "template name"),
                       uint(size, "warm pool size", 0, _lib.WARM_POOL_MAX), not_found=TemplateNotFound)

    def set_start(self, argv: Optional[List[str]], wait_port: int = 0) -> None:
        """Gives the template a start command, run on its own in every sandbox made from it (None or []
        removes it). With ``wait_port`` a create returns only once that port listens inside (at most
        60 s; else the create fails and the sandbox is destroyed). docs/templates.md#a-start-command."""
        args = [cstr(a, "start command argument") for a in (argv or [])]
        arr = (ctypes.c_char_p * (len(args) + 1))(*args, None)
        self.ctx._call("space_template_set_start", self.ctx._ptr, cstr(self.name, "template name"),
                       arr if args else None, uint(wait_port, "wait_port", 0, 65535), not_found=TemplateNotFound)

    @property
    def start(self) -> Optional[Dict[str, Any]]:
        """The start command: ``{"argv": [...], "wait_port": N}``, or None."""
        out = ctypes.c_void_p()
        self.ctx._call("space_template_get_start", self.ctx._ptr, cstr(self.name, "template name"),
                       ctypes.byref(out), not_found=TemplateNotFound)
        if not out.value:
            return None
        try:
            text = ctypes.string_at(out.value)
        finally:
            _lib.free(out)
        return json.loads(text.decode("utf-8", "replace"))

    def fill_warm_pool(self) -> int:
        """Tops up this template's warm pool; returns how many sandboxes it created."""
        return self.ctx._call("space_warm_pool_fill", self.ctx._ptr, cstr(self.name, "template name"),
                              not_found=TemplateNotFound)


class Templates:
    """The templates of a context: ``ctx.templates``, or ``libspace.templates`` for this thread's default
    context."""

    def __init__(self, ctx: Optional[Context] = None) -> None:
        self._ctx = ctx

    @property
    def ctx(self) -> Context:
        return resolve(self._ctx)

    def list(self) -> List[Template]:
        """The templates, sorted by name."""
        ctx = self.ctx
        out = ctypes.POINTER(ctypes.POINTER(_lib.TemplateInfo))()
        with ctx._h.enter():
            r = lib.space_template_list(ctx._h.ptr, ctypes.byref(out), None)
            if r < 0:
                ctx._raise("space_template_list", r)
            try:
                res, i = [], 0
                while out[i]:
                    res.append(Template._from(out[i].contents, ctx))
                    i += 1
                return res
            finally:
                lib.space_template_info_list_free(out)

    def get(self, name: str) -> Template:
        """One template by name (TemplateNotFound if there is none)."""
        ctx = self.ctx
        out = ctypes.POINTER(_lib.TemplateInfo)()
        n = cstr(name, "template name", allow_empty=False)
        with ctx._h.enter():
            r = lib.space_template_get(ctx._h.ptr, n, ctypes.byref(out))
            if r < 0:
                ctx._raise("space_template_get", r, TemplateNotFound)
            try:
                return Template._from(out.contents, ctx)
            finally:
                lib.space_template_info_free(out)

    def import_(self, name: str, rootfs: Optional[PathArg] = None, *, image: Optional[PathArg] = None,
                kernel: Optional[PathArg] = None, initrd: Optional[PathArg] = None,
                modules_dir: Optional[PathArg] = None, size_bytes: Optional[int] = None,
                force: bool = False, progress: Optional[ProgressFn] = None) -> Template:
        """Imports a template (`space template import`) and returns it. On failure nothing of it remains.

        ``rootfs``: a directory tree, a tarball (plain, gz, xz, zst, bz2) or an ext4 image on the host.
        ``kernel``/``initrd``/``modules_dir``: for VM sandboxes. ``size_bytes``: the disk's size (None:
        the content plus headroom). ``progress(stage, done, total)`` is called as it goes (an exception it
        raises cannot stop the import: it is raised once the import has returned). AlreadyExists when the
        name is taken, InvalidArgument for a bad name or a rootfs that is neither directory, tarball nor
        ext4 image. ``image`` instead of ``rootfs``: a container image on the host (an OCI image
        layout, a tar of one, or a ``docker save`` archive; no registry pull), whose Env, WorkingDir and
        User become the defaults of its sandboxes' processes (``Template.image_config``). ``force``: import
        a root file system that has no /bin/sh all the same. (The trailing underscore: ``import`` is a
        Python keyword.)
        """
        ctx = self.ctx
        o = _lib.TemplateImportOptions()
        _options_init(lib.space_template_import_options_init, o, _lib.TEMPLATE_IMPORT_OPTIONS_VERSION)
        if modules_dir is not None and kernel is None:
            raise ValueError("modules_dir needs kernel")
        if (rootfs is None) == (image is None):
            raise ValueError("give rootfs or image (one of them)")
        if not isinstance(force, bool):
            raise TypeError("force must be True or False")
        keep = [cstr(name, "template name", allow_empty=False), cstr_opt(rootfs, "rootfs", allow_empty=False),
                cstr_opt(kernel, "kernel", allow_empty=False), cstr_opt(initrd, "initrd", allow_empty=False),
                cstr_opt(modules_dir, "modules_dir", allow_empty=False), cstr_opt(image, "image", allow_empty=False)]
        o.name, o.rootfs, o.kernel, o.initrd, o.modules_dir, o.image = keep
        o.force = force
        o.size_bytes = uint(size_bytes, "size_bytes", 1, U64_MAX) if size_bytes is not None else 0
        errors: List[BaseException] = []
        o.progress = _progress_fn(progress, errors)
        ctx._call("space_template_import", ctx._ptr, ctypes.byref(o))
        if errors:
            raise errors[0]
        return self.get(name)

    def remove(self, name: str, *, force: bool = False) -> None:
        """Removes a template (Busy while sandboxes or checkpoints use it, unless ``force``: then
        dependent sandboxes keep their own copy-on-write disks)."""
        ctx = self.ctx
        if not isinstance(force, bool):
            raise TypeError("force must be True or False")
        ctx._call("space_template_remove", ctx._ptr, cstr(name, "template name", allow_empty=False), force,
                  not_found=TemplateNotFound)

    def fill_warm_pools(self) -> int:
        """Tops up the warm pool of every template; returns how many sandboxes it created."""
        ctx = self.ctx
        return ctx._call("space_warm_pool_fill", ctx._ptr, None)

    def __iter__(self):
        return iter(self.list())


templates = Templates()
"""The templates of this thread's default context."""

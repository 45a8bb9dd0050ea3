# SPDX-License-Identifier: Apache-2.0
"""Files in a sandbox: sandbox.files (streamed through descriptors, any size)."""

from __future__ import annotations

import ctypes
import errno as _errno
import io
import os
import stat as _stat
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, List, Optional

from . import _lib
from ._lib import lib
from ._util import PathArg, U64_MAX, cstr, fsname, memfd, memfd_of, read_all, uint, when
from .commands import _fileno
from .context import _options_init, interrupted
from .errors import NotFound

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import Sandbox

__all__ = ["Files", "FileInfo"]


@dataclass(frozen=True)
class FileInfo:
    """A file in a sandbox: its name (in a listing; the path for stat()), type, permissions and size."""

    name: str
    mode: int  # st_mode: type and permission bits
    uid: int
    gid: int
    size: int
    mtime_ns: int

    @property
    def is_dir(self) -> bool:
        return _stat.S_ISDIR(self.mode)

    @property
    def is_file(self) -> bool:
        return _stat.S_ISREG(self.mode)

    @property
    def is_symlink(self) -> bool:
        return _stat.S_ISLNK(self.mode)

    @property
    def permissions(self) -> int:
        return _stat.S_IMODE(self.mode)

    @property
    def mtime(self):
        return when(self.mtime_ns // 1_000_000)


def _file_info(name: str, st: Any) -> FileInfo:
    f = _lib.field
    return FileInfo(name=name, mode=f(st, "mode", 0), uid=f(st, "uid", 0), gid=f(st, "gid", 0),
                    size=f(st, "file_size", 0), mtime_ns=f(st, "mtime_ns", 0))


class Files:
    """The file system of a sandbox (sandbox.files). Paths are absolute paths inside the sandbox."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    @staticmethod
    def _path(path: Any, what: str = "path") -> bytes:
        return cstr(path, what, allow_empty=False)

    def write(self, path: PathArg, data: Any, *, mode: int = 0o644) -> None:
        """Writes a file whole (parents made as needed): it appears whole or not at all.

        ``data``: bytes, str (UTF-8), or a binary file object (read to its end; one with fileno() is
        streamed from its descriptor).
        """
        p = self._path(path)
        m = uint(mode, "mode", 0, 0o7777)
        if isinstance(data, str):
            data = data.encode("utf-8")
        if isinstance(data, (bytes, bytearray, memoryview)):
            fd = memfd_of(data, "libspace-write")
            try:
                self._sb._call("space_sandbox_write_file", p, fd, m)
            finally:
                os.close(fd)
            return
        if hasattr(data, "fileno"):
            try:
                fd = data.fileno()
            except (io.UnsupportedOperation, OSError):
                fd = None
            if fd is not None:
                self._sb._call("space_sandbox_write_file", p, _fileno(fd, "data"), m)
                return
        if hasattr(data, "read"):
            fd = memfd("libspace-write")
            try:
                while True:
                    chunk = data.read(1 << 20)
                    if not chunk:
                        break
                    if isinstance(chunk, str):
                        raise TypeError("write() takes a binary file object, not a text one")
                    os.write(fd, chunk)
                os.lseek(fd, 0, os.SEEK_SET)
                self._sb._call("space_sandbox_write_file", p, fd, m)
            finally:
                os.close(fd)
            return
        raise TypeError(f"write() takes bytes, str or a binary file object, not {type(data).__name__}")

    def _read_into(self, p: bytes, fd: int, max_bytes: Optional[int]) -> FileInfo:
        o = _lib.ReadOptions()
        _options_init(lib.space_read_options_init, o, _lib.READ_OPTIONS_VERSION)
        o.max_bytes = uint(max_bytes, "max_bytes", 1, U64_MAX) if max_bytes is not None else 0
        st = _lib.record(_lib.FileStat)
        self._sb._call("space_sandbox_read_file_v2", p, fd, ctypes.byref(o), ctypes.byref(st))
        return _file_info(fsname(p), st)

    def read(self, path: PathArg, *, text: bool = False, encoding: str = "utf-8", errors: str = "strict",
             max_bytes: Optional[int] = None) -> Any:
        """A regular file's content, bytes (or str with ``text``).

        At most ``max_bytes`` (default 1 GiB; a larger file raises TooLarge).
        """
        p = self._path(path)
        fd = memfd("libspace-read")
        try:
            self._read_into(p, fd, max_bytes)
            data = read_all(fd)
        finally:
            os.close(fd)
        return data.decode(encoding, errors) if text else data

    def download(self, path: PathArg, dest: PathArg, *, max_bytes: Optional[int] = None) -> FileInfo:
        """Copies a file of the sandbox to ``dest`` on the host, all or nothing (a temporary file beside dest
        is renamed into place; on failure dest is left as it was). Sparse files stay sparse. The new file is
        private (mode 0600, whatever the sandbox's file said): chmod it to share it."""
        p = self._path(path)
        dest = os.fspath(dest)
        d = os.path.dirname(os.path.abspath(dest))
        fd, tmp = tempfile.mkstemp(prefix=".libspace-", dir=d)
        try:
            info = self._read_into(p, fd, max_bytes)
            os.fsync(fd)
            os.close(fd)
            fd = -1
            os.replace(tmp, dest)
            tmp = None
            return info
        finally:
            if fd >= 0:
                os.close(fd)
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass

    def upload(self, src: PathArg, path: PathArg, *, mode: Optional[int] = None) -> None:
        """Copies a host file into the sandbox (streamed), with ``mode`` or else the host file's permissions."""
        p = self._path(path)
        with open(src, "rb") as f:
            m = _stat.S_IMODE(os.fstat(f.fileno()).st_mode) if mode is None else uint(mode, "mode", 0, 0o7777)
            self._sb._call("space_sandbox_write_file", p, f.fileno(), m)

    def stat(self, path: PathArg) -> FileInfo:
        p = self._path(path)
        st = _lib.record(_lib.FileStat)
        self._sb._call("space_sandbox_stat", p, ctypes.byref(st))
        return _file_info(fsname(p), st)

    def exists(self, path: PathArg) -> bool:
        try:
            self.stat(path)
            return True
        except NotFound:
            return False

    def list(self, path: PathArg = "/") -> List[FileInfo]:
        """The entries of a directory (not "." or ".."), sorted by name."""
        p = self._path(path)
        res: List[FileInfo] = []
        failure: List[BaseException] = []

        def cb(name: bytes, st: Any, userdata: Any) -> int:
            if failure or interrupted():
                return -_errno.ECANCELED
            try:
                res.append(_file_info(fsname(name), st.contents))
                return 0
            except BaseException as e:
                failure.append(e)
                return -_errno.ECANCELED

        fn = _lib.DIRENT_FN(cb)
        try:
            self._sb._call("space_sandbox_list_dir", p, fn, None)
        except Exception:
            if failure:
                raise failure[0] from None
            raise
        return sorted(res, key=lambda f: f.name)

    def mkdir(self, path: PathArg, *, mode: int = 0o755, parents: bool = False) -> None:
        self._sb._call("space_sandbox_mkdir", self._path(path), uint(mode, "mode", 0, 0o7777), bool(parents))

    def remove(self, path: PathArg, *, recursive: bool = False) -> None:
        """Removes a file, or a directory (an empty one, or with ``recursive`` everything in it)."""
        self._sb._call("space_sandbox_remove_path", self._path(path), bool(recursive))

    def rename(self, src: PathArg, dst: PathArg) -> None:
        self._sb._call("space_sandbox_rename", self._path(src, "src"), self._path(dst, "dst"))



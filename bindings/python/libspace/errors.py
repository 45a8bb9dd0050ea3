# SPDX-License-Identifier: Apache-2.0
"""Exceptions: library failures mapped from their -errno code, and a failed command.

A call of libspace that fails returns a negative errno and leaves the reason in the calling thread's last
error of the context (space_last_error). The binding raises the SpaceError subclass mapped from the code,
carrying both: ``errno`` (positive, as in OSError), ``message`` (the library's reason, "what failed: why")
and ``function`` (the C function that failed). Where a Python built-in exception says the same thing the
class derives from it too, so ``except FileNotFoundError`` catches a missing sandbox file and ``except
ValueError`` a refused argument. An ENOENT from a call that names a sandbox, a template or a checkpoint
is SandboxNotFound, TemplateNotFound or CheckpointNotFound (all NotFound).
"""

from __future__ import annotations

import errno as _errno
import os
from typing import TYPE_CHECKING, Dict, Optional, Type

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import CommandResult

__all__ = [
    "Error", "SpaceError", "NotFound", "SandboxNotFound", "TemplateNotFound", "CheckpointNotFound",
    "AlreadyExists", "Busy", "InvalidArgument", "PermissionDenied", "NotRunning", "Timeout",
    "NotInitialized", "NotBtrfs", "Unsupported", "TooLarge", "PoolFull", "IsADirectory", "NotADirectory",
    "Stale", "CommandError", "error_class",
]


class Error(Exception):
    """Base of every exception this package raises on purpose."""


class SpaceError(Error, OSError):
    """A libspace call failed.

    Attributes: ``errno`` (positive errno value), ``code`` (the negative value the C call returned),
    ``message`` (the library's detail, or the code's description when it gave none), ``function`` (the C
    function, e.g. ``"space_sandbox_create"``).
    """

    def __init__(self, errno: int, message: str = "", function: Optional[str] = None) -> None:
        errno = abs(int(errno))
        super().__init__(errno, message or os.strerror(errno))
        self.message = message or os.strerror(errno)
        self.function = function

    @property
    def code(self) -> int:
        return -int(self.errno)

    @property
    def errno_name(self) -> str:
        return _errno.errorcode.get(int(self.errno), str(self.errno))

    def __str__(self) -> str:
        return f"{self.message} [{self.errno_name}]"

    def __reduce__(self):  # picklable with its own arguments (OSError's reduce would drop function)
        return (type(self), (self.errno, self.message, self.function))


class NotFound(SpaceError, FileNotFoundError):
    """ENOENT: no such thing (a file in the sandbox, a program to run, a host path given to the call)."""


class SandboxNotFound(NotFound):
    """ENOENT from a call naming a sandbox by id: there is no such sandbox."""


class TemplateNotFound(NotFound):
    """ENOENT from a call naming a template (a create from an unknown template)."""


class CheckpointNotFound(NotFound):
    """ENOENT from a call naming a checkpoint (or a rollback of a sandbox that has none)."""


class AlreadyExists(SpaceError, FileExistsError):
    """EEXIST: the name is taken."""


class Busy(SpaceError):
    """EBUSY: in use (a template with sandboxes, a paused sandbox asked to run, a pool with sandboxes)."""


class InvalidArgument(SpaceError, ValueError):
    """EINVAL: the library refused an argument (the message says which and why)."""


class PermissionDenied(SpaceError, PermissionError):
    """EPERM, EACCES: not allowed (most calls need root)."""


class NotRunning(SpaceError, ProcessLookupError):
    """ESRCH: the sandbox is no longer running (stopped, failed, destroyed, or its lifetime ended)."""


class Timeout(SpaceError, TimeoutError):
    """ETIME, ETIMEDOUT: a deadline passed (an agent that did not answer; a fork of an expired sandbox)."""


class NotInitialized(SpaceError):
    """ENOMEDIUM: the state directory was never initialized (Context.init() or `space init`)."""


class NotBtrfs(SpaceError):
    """EMEDIUMTYPE: the pool is not on btrfs."""


class Unsupported(SpaceError):
    """ENODEV, EOPNOTSUPP: this host (or this sandbox's agent) cannot do it; the message says why."""


class TooLarge(SpaceError):
    """EFBIG: a file is larger than the read's cap."""


class PoolFull(SpaceError):
    """ENOSPC: the pool (or the sandbox's disk) is full."""


class IsADirectory(SpaceError, IsADirectoryError):
    """EISDIR: a directory where a file was wanted."""


class NotADirectory(SpaceError, NotADirectoryError):
    """ENOTDIR: a file where a directory was wanted."""


class PortRefused(SpaceError, ConnectionRefusedError):
    """Nothing listens on that port inside the sandbox (Sandbox.connect)."""


class Stale(SpaceError):
    """ESTALE: the sandbox changed state under the call (another process destroyed or paused it)."""


_BY_ERRNO: Dict[int, Type[SpaceError]] = {
    _errno.ENOENT: NotFound,
    _errno.EEXIST: AlreadyExists,
    _errno.EBUSY: Busy,
    _errno.EINVAL: InvalidArgument,
    _errno.EPERM: PermissionDenied,
    _errno.EACCES: PermissionDenied,
    _errno.ESRCH: NotRunning,
    _errno.ETIME: Timeout,
    _errno.ETIMEDOUT: Timeout,
    _errno.ENOMEDIUM: NotInitialized,
    _errno.EMEDIUMTYPE: NotBtrfs,
    _errno.ENODEV: Unsupported,
    _errno.EOPNOTSUPP: Unsupported,
    _errno.EFBIG: TooLarge,
    _errno.ENOSPC: PoolFull,
    _errno.EISDIR: IsADirectory,
    _errno.ENOTDIR: NotADirectory,
    _errno.ESTALE: Stale,
    _errno.ECONNREFUSED: PortRefused,
}


def error_class(code: int, not_found: Optional[Type[NotFound]] = None) -> Type[SpaceError]:
    """The exception class for a libspace return code (negative or positive errno); ``not_found``: the
    NotFound subclass for an ENOENT, when the call says what was not found."""
    code = abs(int(code))
    if code == _errno.ENOENT and not_found is not None:
        return not_found
    return _BY_ERRNO.get(code, SpaceError)


class CommandError(Error):
    """A command run with ``check=True`` did not succeed: a non-zero exit, a signal, or its timeout.

    ``result`` is the whole CommandResult (output included); ``argv``, ``returncode``, ``stdout`` and
    ``stderr`` are its fields, for the habits of subprocess.CalledProcessError.
    """

    def __init__(self, result: "CommandResult") -> None:
        super().__init__(result)
        self.result = result

    @property
    def argv(self):
        return self.result.argv

    @property
    def returncode(self) -> int:
        return self.result.returncode

    @property
    def stdout(self):
        return self.result.stdout

    @property
    def stderr(self):
        return self.result.stderr

    def __str__(self) -> str:
        return f"command {list(self.result.argv)!r} {self.result.describe()}"

    def __reduce__(self):
        return (type(self), (self.result,))

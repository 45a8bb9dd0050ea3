# SPDX-License-Identifier: Apache-2.0
"""libspace: disposable sandboxes for AI agents, from Python.

A binding of the libspace C library (libspace.so.1) with ctypes. A sandbox is a disposable computer with
its own copy-on-write root disk, made from a template in milliseconds::

    import libspace

    with libspace.Sandbox.create(template="base") as sb:       # destroyed when the block ends
        r = sb.run(["python3", "-c", "print(6*7)"], check=True)
        print(r.stdout)                                        # b'42\\n'
        sb.files.write("/root/data.txt", "hello")
        cp = sb.checkpoint("clean")
        with cp.fork(count=2) as (a, b):                      # two sandboxes continuing from it
            ...

Errors of the library are SpaceError subclasses mapped from its -errno codes, with the library's own
message; a command run with check=True that fails raises CommandError. Thread rules, fork and asyncio:
docs/python.md (and the Context class).
"""

from .context import Context, Event, PoolInfo, SecretInfo, default_context, strerror, version
from .errors import (
    AlreadyExists,
    Busy,
    CheckpointNotFound,
    CommandError,
    Error,
    InvalidArgument,
    IsADirectory,
    NotADirectory,
    NotBtrfs,
    NotFound,
    NotInitialized,
    NotRunning,
    PermissionDenied,
    PoolFull,
    PortRefused,
    SandboxNotFound,
    SpaceError,
    Stale,
    TemplateNotFound,
    Timeout,
    TooLarge,
    Unsupported,
    error_class,
)
from .checkpoints import Checkpoint
from .commands import DEFAULT_MAX_OUTPUT, CommandResult, Process
from .files import FileInfo, Files
from .sandbox import Sandbox, SandboxGroup, SandboxInfo, SandboxUsage
from .templates import Template, Templates, WarmInfo, templates

__version__ = "0.1.0"
"""The version of this package; version() is the version of the C library it loaded."""

__all__ = [
    "AlreadyExists", "Busy", "Checkpoint", "CheckpointNotFound", "CommandError", "CommandResult", "Context",
    "DEFAULT_MAX_OUTPUT", "Error", "Event", "FileInfo", "Files", "InvalidArgument", "IsADirectory",
    "NotADirectory", "NotBtrfs", "NotFound", "NotInitialized", "NotRunning", "PermissionDenied", "PoolFull",
    "PoolInfo", "PortRefused", "Process", "Sandbox", "SandboxGroup", "SandboxInfo", "SandboxNotFound", "SandboxUsage", "SecretInfo",
    "SpaceError", "Stale", "Template", "TemplateNotFound", "Templates", "Timeout", "TooLarge", "Unsupported",
    "WarmInfo", "default_context", "error_class", "strerror", "templates", "version",
]

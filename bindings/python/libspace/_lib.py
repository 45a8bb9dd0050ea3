# SPDX-License-Identifier: Apache-2.0
"""The C library underneath: libspace.so.1 loaded with ctypes, its structs and prototypes.

Private to the package. Every struct here is the layout of include/space.h for the version named beside
it; the options structs are initialized by the library's own space_*_options_init() with that version (never
zero-filled), the records get their size before a call, and a field of an object or record is read only
when the size the library wrote covers it (docs/api.md, "The C library underneath").
"""

from __future__ import annotations

import ctypes
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_bool,
    c_char,
    c_char_p,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any, Optional

SONAME = "libspace.so.1"


def _load() -> ctypes.CDLL:
    # A build tree first when asked (tests, development), else the installed library by its soname, so the
    # dynamic linker's search (ld.so.cache, LD_LIBRARY_PATH) decides, as for any C program.
    build = os.environ.get("SPACE_BUILD_DIR")
    if build:
        path = os.path.join(build, SONAME)
        if not os.path.exists(path):
            raise ImportError(
                f"libspace: SPACE_BUILD_DIR={build!r} has no {SONAME} (build it with `meson compile -C {build}`, "
                "or unset SPACE_BUILD_DIR to use the installed library)"
            )
        return ctypes.CDLL(path)
    try:
        return ctypes.CDLL(SONAME)
    except OSError as e:
        raise ImportError(
            f"libspace: cannot load {SONAME} ({e}); install it (Debian: apt install libspace1; from source: "
            "meson install, then ldconfig), or set SPACE_BUILD_DIR to a build directory"
        ) from None


lib = _load()
_libc = ctypes.CDLL(None)
_libc.free.restype = None
_libc.free.argtypes = [c_void_p]
free = _libc.free

# ------------------------------------------------------------------------------------------------------
# Constants of space.h (the versions are those this binding's structs were written for).
CTX_OPTIONS_VERSION = 1
INIT_OPTIONS_VERSION = 2
TEMPLATE_IMPORT_OPTIONS_VERSION = 3
SANDBOX_OPTIONS_VERSION = 4
EXEC_OPTIONS_VERSION = 2
READ_OPTIONS_VERSION = 1
CHECKPOINT_FORK_OPTIONS_VERSION = 1
EVENT_QUERY_VERSION = 1

LOG_ERROR, LOG_WARNING, LOG_INFO, LOG_DEBUG = 3, 4, 6, 7
IDENTITY_MAP_ALLOW, IDENTITY_MAP_REFUSE = 1, -1
DOCTOR_VERBOSE = 1
EXEC_STDIN = 1
EXEC_USER = 2
STEP_CHECKPOINT_FIRST = 1
REMOVE_KEEP_EVENTS = 1
REMOVE_WITH_CHECKPOINTS = 2
CHECKPOINT_ID_MAX = 32
TIMEOUT_MAX_S = 366 * 24 * 3600
READ_MAX_DEFAULT = 1 << 30
SECRET_VALUE_MAX = 8192
FORK_COUNT_MAX = 64
WARM_POOL_MAX = 64

SANDBOX_STATUS = ("creating", "running", "paused", "stopped", "failed", "destroyed")

# ------------------------------------------------------------------------------------------------------
# Callbacks
LOG_FN = CFUNCTYPE(None, c_int, c_char_p, c_void_p)
PROGRESS_FN = CFUNCTYPE(None, c_char_p, c_uint64, c_uint64, c_void_p)
OUTPUT_FN = CFUNCTYPE(c_int, c_int, c_void_p, c_size_t, c_void_p)


# ------------------------------------------------------------------------------------------------------
# Structs
class CtxOptions(Structure):  # version 1
    _fields_ = [
        ("version", c_uint32),
        ("state_dir", c_char_p),
        ("log", LOG_FN),
        ("log_userdata", c_void_p),
        ("log_level", c_int),
        ("libexec_dir", c_char_p),
    ]


class InitOptions(Structure):  # version 2
    _fields_ = [
        ("version", c_uint32),
        ("pool_path", c_char_p),
        ("loop_pool_size", c_uint64),
        ("isolation", c_char_p),
        ("progress", PROGRESS_FN),
        ("progress_userdata", c_void_p),
        ("identity_map", c_int),
    ]


class PoolInfo(Structure):  # an object
    _fields_ = [
        ("size", c_uint32),
        ("path", c_char_p),
        ("loop_image", c_char_p),
        ("isolation", c_char_p),
        ("total_bytes", c_uint64),
        ("free_bytes", c_uint64),
        ("mounted", c_bool),
        # since pool accounting
        ("used_bytes", c_uint64),
        ("promised_bytes", c_uint64),
        ("sandbox_disks", c_uint32),
    ]


class TemplateImportOptions(Structure):  # version 3
    _fields_ = [
        ("version", c_uint32),
        ("name", c_char_p),
        ("rootfs", c_char_p),
        ("kernel", c_char_p),
        ("initrd", c_char_p),
        ("size_bytes", c_uint64),
        ("progress", PROGRESS_FN),
        ("progress_userdata", c_void_p),
        ("modules_dir", c_char_p),
        ("image", c_char_p),  # version 3
        ("force", c_bool),
    ]


class TemplateInfo(Structure):  # an object
    _fields_ = [
        ("size", c_uint32),
        ("name", c_char_p),
        ("path", c_char_p),
        ("rootfs_bytes", c_uint64),
        ("has_kernel", c_bool),
        ("has_initrd", c_bool),
        ("created_ms", c_int64),
        ("sandboxes", c_uint32),
        ("checkpoints", c_uint32),
        ("image_digest", c_char_p),  # since templates from images: read only when size covers them
        ("image_config", c_char_p),
        ("id", c_char_p),  # since template streams
    ]


class TemplateWarmInfo(Structure):  # a record
    _fields_ = [
        ("size", c_uint32),
        ("has_snapshot", c_bool),
        ("snapshot_cpus", c_uint32),
        ("snapshot_memory_mib", c_uint32),
        ("snapshot_created_ms", c_int64),
        ("warm_pool_size", c_uint32),
        ("warm_pool_ready", c_uint32),
    ]


class SandboxInfo(Structure):  # an object
    _fields_ = [
        ("size", c_uint32),
        ("id", c_char_p),
        ("template_name", c_char_p),
        ("isolation", c_char_p),
        ("status", c_int),
        ("reason", c_char_p),
        ("pid", c_int32),
        ("cpus", c_uint32),
        ("memory_mib", c_uint32),
        ("created_ms", c_int64),
        ("updated_ms", c_int64),
        ("expires_ms", c_int64),
        ("path", c_char_p),
    ]


class SandboxOptions(Structure):  # version 4
    _fields_ = [
        ("version", c_uint32),
        ("template_name", c_char_p),
        ("isolation", c_char_p),
        ("cpus", c_uint32),
        ("memory_mib", c_uint32),
        ("timeout_s", c_uint32),
        ("hostname", c_char_p),
        ("env", POINTER(c_char_p)),
        ("network_policy", c_char_p),
        ("snapshot_every_s", c_uint32),
        ("snapshot_keep", c_uint32),
        ("network_policy_trusted", c_bool),
        ("network_allow_resolve", POINTER(c_char_p)),
    ]


class ExecOptions(Structure):  # version 2
    _fields_ = [
        ("version", c_uint32),
        ("argv", POINTER(c_char_p)),
        ("env", POINTER(c_char_p)),
        ("cwd", c_char_p),
        ("uid", c_uint32),
        ("gid", c_uint32),
        ("pty", c_bool),
        ("rows", c_uint16),
        ("cols", c_uint16),
        ("timeout_ms", c_uint32),
        ("stdin_fd", c_int),
        ("output", OUTPUT_FN),
        ("userdata", c_void_p),
        ("flags", c_uint32),
    ]


class ExecResult(Structure):  # a record
    _fields_ = [
        ("size", c_uint32),
        ("exited", c_bool),
        ("exit_code", c_int),
        ("signal", c_int),
        ("timed_out", c_bool),
        ("oom_killed", c_bool),
    ]


class FileStat(Structure):  # a record
    _fields_ = [
        ("size", c_uint32),
        ("mode", c_uint32),
        ("uid", c_uint32),
        ("gid", c_uint32),
        ("file_size", c_uint64),
        ("mtime_ns", c_int64),
    ]


class SandboxUsage(Structure):  # a record
    _fields_ = [
        ("size", c_uint32),
        ("cpus", c_uint32),
        ("cpu_ns", c_uint64),
        ("memory_bytes", c_uint64),
        ("memory_cache_bytes", c_uint64),
        ("memory_limit_bytes", c_uint64),
        ("disk_used_bytes", c_uint64),
        ("disk_total_bytes", c_uint64),
        ("time_ms", c_int64),
    ]


class ReadOptions(Structure):  # version 1
    _fields_ = [
        ("version", c_uint32),
        ("max_bytes", c_uint64),
        ("progress", PROGRESS_FN),
        ("progress_userdata", c_void_p),
    ]


class CheckpointInfo(Structure):  # an object
    _fields_ = [
        ("size", c_uint32),
        ("id", c_char_p),
        ("sandbox_id", c_char_p),
        ("template_name", c_char_p),
        ("name", c_char_p),
        ("kind", c_char_p),
        ("path", c_char_p),
        ("created_ms", c_int64),
    ]


class CheckpointForkOptions(Structure):  # version 1
    _fields_ = [
        ("version", c_uint32),
        ("count", c_uint32),
        ("timeout_s", c_uint32),
    ]


class SecretInfo(Structure):  # an object
    _fields_ = [
        ("size", c_uint32),
        ("name", c_char_p),
        ("created_ms", c_int64),
    ]


class Event(Structure):  # an object (passed to a callback)
    _fields_ = [
        ("size", c_uint32),
        ("seq", c_int64),
        ("ts_ms", c_int64),
        ("sandbox_id", c_char_p),
        ("kind", c_char_p),
        ("detail", c_char_p),
    ]


class EventQuery(Structure):  # version 1
    _fields_ = [
        ("version", c_uint32),
        ("sandbox_id", c_char_p),
        ("kind", c_char_p),
        ("after_seq", c_int64),
        ("limit", c_uint32),
    ]


DIRENT_FN = CFUNCTYPE(c_int, c_char_p, POINTER(FileStat), c_void_p)
EVENT_FN = CFUNCTYPE(c_int, POINTER(Event), c_void_p)

# Every struct this binding declares, by its C name (tests compare them with the compiler's layout).
STRUCTS = {
    "space_ctx_options": CtxOptions,
    "space_init_options": InitOptions,
    "space_pool_info": PoolInfo,
    "space_template_import_options": TemplateImportOptions,
    "space_template_info": TemplateInfo,
    "space_template_warm_info": TemplateWarmInfo,
    "space_sandbox_info": SandboxInfo,
    "space_sandbox_options": SandboxOptions,
    "space_exec_options": ExecOptions,
    "space_exec_result": ExecResult,
    "space_file_stat": FileStat,
    "space_sandbox_usage": SandboxUsage,
    "space_read_options": ReadOptions,
    "space_checkpoint_info": CheckpointInfo,
    "space_checkpoint_fork_options": CheckpointForkOptions,
    "space_secret_info": SecretInfo,
    "space_event": Event,
    "space_event_query": EventQuery,
}


def field(obj: Structure, name: str, default: Any = None) -> Any:
    """obj.name when the size the library wrote covers it (an older library may have written less)."""
    f = getattr(type(obj), name)
    if f.offset + f.size > obj.size:
        return default
    return getattr(obj, name)


def record(cls: type) -> Any:
    """A record the library fills: its size set to this binding's struct, like its SPACE_*_INIT macro."""
    r = cls()
    r.size = ctypes.sizeof(cls)
    return r


# ------------------------------------------------------------------------------------------------------
# Prototypes
class _Opaque(Structure):
    pass


CTX_P = POINTER(_Opaque)
SANDBOX_P = POINTER(_Opaque)
PROCESS_P = POINTER(_Opaque)


def _proto(name: str, restype: Optional[type], *argtypes: Any) -> None:
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


P = POINTER
_proto("space_version", c_char_p)
_proto("space_strerror", c_char_p, c_int)
_proto("space_ctx_options_init", c_int, P(CtxOptions), c_uint32)
_proto("space_ctx_new", c_int, P(CtxOptions), P(CTX_P))
_proto("space_ctx_free", None, CTX_P)
_proto("space_last_error", c_char_p, CTX_P)
_proto("space_ctx_state_dir", c_char_p, CTX_P)
_proto("space_init_options_init", c_int, P(InitOptions), c_uint32)
_proto("space_init", c_int, CTX_P, P(InitOptions))
_proto("space_identity_map_allowed", c_int, CTX_P)
_proto("space_pool_get_info", c_int, CTX_P, P(P(PoolInfo)))
_proto("space_pool_info_free", None, P(PoolInfo))
_proto("space_pool_unmount", c_int, CTX_P)
_proto("space_doctor", c_int, CTX_P, c_uint, P(c_void_p))
_proto("space_template_import_options_init", c_int, P(TemplateImportOptions), c_uint32)
_proto("space_template_import", c_int, CTX_P, P(TemplateImportOptions))
_proto("space_template_list", c_int, CTX_P, P(P(P(TemplateInfo))), P(c_size_t))
_proto("space_template_info_list_free", None, P(P(TemplateInfo)))
_proto("space_template_get", c_int, CTX_P, c_char_p, P(P(TemplateInfo)))
_proto("space_template_info_free", None, P(TemplateInfo))
_proto("space_template_remove", c_int, CTX_P, c_char_p, c_bool)
_proto("space_template_get_warm_info", c_int, CTX_P, c_char_p, P(TemplateWarmInfo))
_proto("space_template_set_warm_pool", c_int, CTX_P, c_char_p, c_uint32)
_proto("space_template_set_start", c_int, CTX_P, c_char_p, P(c_char_p), c_uint16)
_proto("space_template_get_start", c_int, CTX_P, c_char_p, P(c_void_p))
_proto("space_warm_pool_fill", c_int, CTX_P, c_char_p)
_proto("space_sandbox_status_name", c_char_p, c_int)
_proto("space_sandbox_list", c_int, CTX_P, P(P(P(SandboxInfo))), P(c_size_t))
_proto("space_sandbox_info_list_free", None, P(P(SandboxInfo)))
_proto("space_sandbox_options_init", c_int, P(SandboxOptions), c_uint32)
_proto("space_sandbox_create", c_int, CTX_P, P(SandboxOptions), P(SANDBOX_P))
_proto("space_sandbox_open", c_int, CTX_P, c_char_p, P(SANDBOX_P))
_proto("space_sandbox_free", None, SANDBOX_P)
_proto("space_sandbox_id", c_char_p, SANDBOX_P)
_proto("space_sandbox_get_info", c_int, SANDBOX_P, P(P(SandboxInfo)))
_proto("space_sandbox_info_free", None, P(SandboxInfo))
_proto("space_sandbox_destroy", c_int, SANDBOX_P)
_proto("space_sandbox_remove_v2", c_int, CTX_P, c_char_p, c_uint)
_proto("space_sandbox_set_timeout", c_int, SANDBOX_P, c_uint32)
_proto("space_sandbox_tether", c_int, SANDBOX_P)
_proto("space_sandbox_port_connect", c_int, SANDBOX_P, c_uint16, P(c_int))
_proto("space_sandbox_reap", c_int, CTX_P)
_proto("space_sandbox_get_status", c_int, CTX_P, c_char_p, P(c_int))
_proto("space_exec_options_init", c_int, P(ExecOptions), c_uint32)
_proto("space_sandbox_exec", c_int, SANDBOX_P, P(ExecOptions), P(ExecResult))
_proto("space_sandbox_exec_step", c_int, SANDBOX_P, P(ExecOptions), c_uint, P(ExecResult), P(c_char))
_proto("space_process_start", c_int, SANDBOX_P, P(ExecOptions), P(PROCESS_P))
_proto("space_process_fd", c_int, PROCESS_P)
_proto("space_process_pending", c_bool, PROCESS_P)
_proto("space_process_pid", c_int, PROCESS_P)
_proto("space_process_write_stdin", c_int, PROCESS_P, c_void_p, c_size_t)
_proto("space_process_signal", c_int, PROCESS_P, c_int)
_proto("space_process_resize", c_int, PROCESS_P, c_uint16, c_uint16)
_proto("space_process_pump", c_int, PROCESS_P, P(ExecResult))
_proto("space_process_free", None, PROCESS_P)
_proto("space_sandbox_write_file", c_int, SANDBOX_P, c_char_p, c_int, c_uint32)
_proto("space_sandbox_stat", c_int, SANDBOX_P, c_char_p, P(FileStat))
_proto("space_sandbox_get_usage", c_int, SANDBOX_P, P(SandboxUsage))
_proto("space_read_options_init", c_int, P(ReadOptions), c_uint32)
_proto("space_sandbox_read_file_v2", c_int, SANDBOX_P, c_char_p, c_int, P(ReadOptions), P(FileStat))
_proto("space_sandbox_list_dir", c_int, SANDBOX_P, c_char_p, DIRENT_FN, c_void_p)
_proto("space_sandbox_mkdir", c_int, SANDBOX_P, c_char_p, c_uint32, c_bool)
_proto("space_sandbox_remove_path", c_int, SANDBOX_P, c_char_p, c_bool)
_proto("space_sandbox_rename", c_int, SANDBOX_P, c_char_p, c_char_p)
_proto("space_sandbox_read_log", c_int, CTX_P, c_char_p, c_int)
_proto("space_sandbox_log_path", c_char_p, SANDBOX_P)
_proto("space_sandbox_pause", c_int, SANDBOX_P)
_proto("space_sandbox_resume", c_int, SANDBOX_P)
_proto("space_checkpoint_create", c_int, SANDBOX_P, c_char_p, P(c_char))
_proto("space_checkpoint_list", c_int, CTX_P, c_char_p, P(P(P(CheckpointInfo))), P(c_size_t))
_proto("space_checkpoint_info_list_free", None, P(P(CheckpointInfo)))
_proto("space_checkpoint_get", c_int, CTX_P, c_char_p, P(P(CheckpointInfo)))
_proto("space_checkpoint_find", c_int, CTX_P, c_char_p, c_char_p, P(P(CheckpointInfo)))
_proto("space_checkpoint_info_free", None, P(CheckpointInfo))
_proto("space_checkpoint_remove", c_int, CTX_P, c_char_p)
_proto("space_sandbox_rollback", c_int, SANDBOX_P, c_char_p)
_proto("space_checkpoint_fork_options_init", c_int, P(CheckpointForkOptions), c_uint32)
_proto("space_checkpoint_fork", c_int, CTX_P, c_char_p, P(CheckpointForkOptions), P(SANDBOX_P))
_proto("space_secret_set", c_int, CTX_P, c_char_p, c_void_p, c_size_t)
_proto("space_secret_list", c_int, CTX_P, P(P(P(SecretInfo))), P(c_size_t))
_proto("space_secret_info_list_free", None, P(P(SecretInfo)))
_proto("space_secret_remove", c_int, CTX_P, c_char_p)
_proto("space_event_query_init", c_int, P(EventQuery), c_uint32)
_proto("space_event_list", c_int, CTX_P, P(EventQuery), EVENT_FN, c_void_p)
_proto("space_event_count", c_int, CTX_P, P(EventQuery), P(c_uint64))

# SPDX-License-Identifier: Apache-2.0
"""Checked conversions between Python values and what the C calls take (private).

ctypes converts silently where C would not complain either: an int wraps into a uint32_t, a str holding a
NUL byte is cut at it. Every value passed to the library goes through one of these first, so a bad one is a
ValueError or TypeError naming the argument, before anything is called.
"""

from __future__ import annotations

import ctypes
import datetime as _dt
import math
import os
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

U16_MAX = (1 << 16) - 1
U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1


def cstr(value: Any, what: str, *, allow_empty: bool = True) -> bytes:
    """A str (encoded as the file system encoding does, so undecodable names round-trip), bytes or path."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        b = os.fsencode(value)
    elif isinstance(value, (bytes, bytearray)):
        b = bytes(value)
    else:
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if b"\0" in b:
        raise ValueError(f"{what} contains a NUL byte")
    if not allow_empty and not b:
        raise ValueError(f"{what} is empty")
    return b


def cstr_opt(value: Any, what: str, *, allow_empty: bool = True) -> Optional[bytes]:
    return None if value is None else cstr(value, what, allow_empty=allow_empty)


def cstr_array(items: Optional[Sequence[bytes]]) -> Any:
    """A NULL-terminated char *[] (the array keeps the bytes objects alive), or None for NULL."""
    if items is None:
        return None
    arr = (ctypes.c_char_p * (len(items) + 1))()
    for i, b in enumerate(items):
        arr[i] = b
    arr[len(items)] = None
    return arr


def argv_of(cmd: Any) -> list:
    """A command: a sequence of arguments, or one str run by /bin/sh -c."""
    if isinstance(cmd, (str, bytes)):
        if not cmd:
            raise ValueError("the command is empty")
        return [b"/bin/sh", b"-c", cstr(cmd, "the command")]
    if isinstance(cmd, os.PathLike):
        return [cstr(cmd, "the command", allow_empty=False)]
    try:
        items = list(cmd)
    except TypeError:
        raise TypeError(f"a command is a str or a sequence of arguments, not {type(cmd).__name__}") from None
    if not items:
        raise ValueError("the command has no arguments")
    out = [cstr(items[0], "the program (argv[0])", allow_empty=False)]
    out += [cstr(a, f"argument {i}") for i, a in enumerate(items[1:], 1)]
    return out


def env_of(env: Optional[Mapping[str, str]]) -> Optional[list]:
    """KEY=VALUE entries of a mapping; keys must be non-empty and hold no '='."""
    if env is None:
        return None
    if not isinstance(env, Mapping):
        raise TypeError(f"env must be a mapping of names to values, not {type(env).__name__}")
    out = []
    for k, v in env.items():
        kb = cstr(k, "an environment variable's name", allow_empty=False)
        if b"=" in kb:
            raise ValueError(f"environment variable name {k!r} contains '='")
        out.append(kb + b"=" + cstr(v, f"environment variable {k!r}"))
    return out


def strings_of(items: Optional[Iterable[Any]], what: str) -> Optional[list]:
    if items is None:
        return None
    if isinstance(items, (str, bytes)):
        raise TypeError(f"{what} must be a list of str, not a single str")
    return [cstr(x, what, allow_empty=False) for x in items]


def uint(value: Any, what: str, lo: int = 0, hi: int = U32_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if value < lo or value > hi:
        raise ValueError(f"{what} must be in {lo}..{hi}, not {value}")
    return value


def seconds(value: Any, what: str, hi: int) -> int:
    """Whole seconds (an int, float or timedelta; a fraction rounds up), 1..hi."""
    if isinstance(value, _dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be seconds (int, float or timedelta), not {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{what} must be finite")
    s = math.ceil(value)
    if s < 1 or s > hi:
        raise ValueError(f"{what} must be in 1..{hi} seconds, not {value}")
    return int(s)


def millis(value: Any, what: str) -> int:
    """Milliseconds of a duration in seconds (int, float or timedelta; rounded up), 1..UINT32_MAX."""
    if isinstance(value, _dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be seconds (int, float or timedelta), not {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{what} must be finite")
    if value <= 0:
        raise ValueError(f"{what} must be positive, not {value}")
    ms = math.ceil(value * 1000)
    if ms > U32_MAX:
        raise ValueError(f"{what} must be at most {U32_MAX // 1000} seconds")
    return int(ms)


def text(b: Optional[bytes]) -> str:
    """A message of the library (it may quote bytes a sandbox made): invalid UTF-8 shown, never raised."""
    return b.decode("utf-8", "backslashreplace") if b else ""


def fsname(b: Optional[bytes]) -> str:
    """A name or path (round-trips through cstr, as os.fsdecode does)."""
    return os.fsdecode(b) if b else ""


def when(ms: int) -> Optional[_dt.datetime]:
    """A Unix time in milliseconds as an aware UTC datetime; None for 0 (none)."""
    if not ms:
        return None
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc)


def memfd(name: str) -> int:
    return os.memfd_create(name, os.MFD_CLOEXEC)


def memfd_of(data: Any, name: str) -> int:
    """A close-on-exec memory file holding data, its offset at 0 (a descriptor the library reads)."""
    fd = memfd(name)
    try:
        view = memoryview(data).cast("B")
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return b"".join(chunks)
        chunks.append(b)

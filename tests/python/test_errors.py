# SPDX-License-Identifier: Apache-2.0
"""Errors: -errno codes mapped to exceptions with the library's message; bad arguments refused before any
call (ctypes would wrap an int or cut a string at a NUL byte without a word)."""

import datetime
import errno
import pickle

import pytest

import libspace
from conftest import TEMPLATE

MAPPING = {
    errno.ENOENT: (libspace.NotFound, FileNotFoundError),
    errno.EEXIST: (libspace.AlreadyExists, FileExistsError),
    errno.EBUSY: (libspace.Busy, libspace.SpaceError),
    errno.EINVAL: (libspace.InvalidArgument, ValueError),
    errno.EPERM: (libspace.PermissionDenied, PermissionError),
    errno.EACCES: (libspace.PermissionDenied, PermissionError),
    errno.ESRCH: (libspace.NotRunning, ProcessLookupError),
    errno.ETIME: (libspace.Timeout, TimeoutError),
    errno.ETIMEDOUT: (libspace.Timeout, TimeoutError),
    errno.ENOMEDIUM: (libspace.NotInitialized, libspace.SpaceError),
    errno.EMEDIUMTYPE: (libspace.NotBtrfs, libspace.SpaceError),
    errno.ENODEV: (libspace.Unsupported, libspace.SpaceError),
    errno.EOPNOTSUPP: (libspace.Unsupported, libspace.SpaceError),
    errno.EFBIG: (libspace.TooLarge, libspace.SpaceError),
    errno.ENOSPC: (libspace.PoolFull, libspace.SpaceError),
    errno.EISDIR: (libspace.IsADirectory, IsADirectoryError),
    errno.ENOTDIR: (libspace.NotADirectory, NotADirectoryError),
    errno.ESTALE: (libspace.Stale, libspace.SpaceError),
    errno.EIO: (libspace.SpaceError, OSError),
}


@pytest.mark.parametrize("code", sorted(MAPPING))
def test_mapping(code):
    cls, builtin = MAPPING[code]
    assert libspace.error_class(-code) is cls and libspace.error_class(code) is cls
    e = cls(code, "what failed: why", "space_x")
    assert isinstance(e, libspace.SpaceError) and isinstance(e, libspace.Error) and isinstance(e, OSError)
    assert isinstance(e, builtin)
    assert e.errno == code and e.code == -code and e.function == "space_x"
    assert str(e) == f"what failed: why [{errno.errorcode[code]}]"
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls and back.errno == code and back.message == e.message and back.function == "space_x"


def test_not_found_says_what(ctx, sb):
    for cls in (libspace.SandboxNotFound, libspace.TemplateNotFound, libspace.CheckpointNotFound):
        assert issubclass(cls, libspace.NotFound) and libspace.error_class(-errno.ENOENT, cls) is cls
    assert libspace.error_class(-errno.EBUSY, libspace.SandboxNotFound) is libspace.Busy
    cases = [
        (libspace.TemplateNotFound, lambda: libspace.Sandbox.create("no-such", isolation="jail", ctx=ctx)),
        (libspace.TemplateNotFound, lambda: ctx.templates.get("no-such")),
        (libspace.TemplateNotFound, lambda: ctx.templates.remove("no-such")),
        (libspace.SandboxNotFound, lambda: libspace.Sandbox.open("sb-aaaaaaaaaaaaaaaa", ctx=ctx)),
        (libspace.SandboxNotFound, lambda: libspace.Sandbox.remove("sb-aaaaaaaaaaaaaaaa", ctx=ctx)),
        (libspace.SandboxNotFound, lambda: libspace.Sandbox.get_status("sb-aaaaaaaaaaaaaaaa", ctx=ctx)),
        (libspace.CheckpointNotFound, lambda: libspace.Checkpoint.get("cp-aaaaaaaaaaaaaaaa", ctx=ctx)),
        (libspace.CheckpointNotFound, lambda: libspace.Checkpoint.find("nameless", ctx=ctx)),
        (libspace.CheckpointNotFound, lambda: sb.rollback("cp-aaaaaaaaaaaaaaaa")),
        (libspace.NotFound, lambda: sb.files.read("/no/such/file")),
        (libspace.NotFound, lambda: sb.run(["no-such-program"])),
        (libspace.NotFound, lambda: ctx.remove_secret("no-such")),
    ]
    for cls, call in cases:
        with pytest.raises(cls) as ei:
            call()
        assert type(ei.value) is cls and ei.value.errno == errno.ENOENT and ei.value.message


def test_strerror_and_version():
    assert libspace.version() == "0.1.0"
    assert libspace.strerror(-errno.ENOMEDIUM)
    assert libspace.strerror(errno.ENOENT) == libspace.strerror(-errno.ENOENT)


def test_library_messages_reach_the_exception(ctx):
    with pytest.raises(libspace.TemplateNotFound) as ei:
        libspace.Sandbox.create("no-such-template", isolation="jail", ctx=ctx)
    assert ei.value.function == "space_sandbox_create"
    assert "no-such-template" in ei.value.message
    with pytest.raises(libspace.NotFound) as ei:
        libspace.Sandbox.open("sb-aaaaaaaaaaaaaaaa", ctx=ctx)
    assert ei.value.function == "space_sandbox_open" and ei.value.message
    with pytest.raises(libspace.InvalidArgument) as ei:
        libspace.Sandbox.create(TEMPLATE, isolation="bogus", ctx=ctx)
    assert "bogus" in str(ei.value) or "isolation" in str(ei.value)
    # a second failure on the same thread carries its own message, not the first one's
    with pytest.raises(libspace.NotFound) as ei2:
        ctx.templates.get("nope-nope")
    assert "nope-nope" in ei2.value.message or ei2.value.message


def test_uninitialized_state_dir(tmp_path):
    with libspace.Context(tmp_path / "never") as c:
        with pytest.raises(libspace.NotInitialized) as ei:
            c.templates.list()
        assert ei.value.errno == errno.ENOMEDIUM and "init" in ei.value.message
        with pytest.raises(libspace.NotInitialized):
            libspace.Sandbox.list(ctx=c)
        assert not (tmp_path / "never" / "space.db").exists()


@pytest.mark.parametrize("kwargs,exc", [
    ({"template": "ti\0ny"}, ValueError),
    ({"template": 3}, TypeError),
    ({"isolation": ""}, ValueError),
    ({"cpus": 2 ** 32 + 1}, ValueError),
    ({"cpus": -1}, ValueError),
    ({"cpus": True}, TypeError),
    ({"cpus": 1.5}, TypeError),
    ({"memory_mib": 0}, ValueError),
    ({"timeout_s": 366 * 24 * 3600 + 1}, ValueError),
    ({"timeout_s": float("nan")}, ValueError),
    ({"timeout_s": -1}, ValueError),
    ({"timeout_s": "1h"}, TypeError),
    ({"env": {"A=B": "x"}}, ValueError),
    ({"env": {"": "x"}}, ValueError),
    ({"env": {"A": "x\0y"}}, ValueError),
    ({"env": ["A=B"]}, TypeError),
    ({"hostname": "a\0b"}, ValueError),
    ({"network_allow_resolve": "10.0.0.0/8"}, TypeError),
    ({"snapshot_keep": 101}, ValueError),
    ({"snapshot_every": 0}, ValueError),
    ({"network_trusted": 1}, TypeError),
])
def test_create_refuses_bad_arguments_before_calling(ctx, kwargs, exc):
    kw = {"template": TEMPLATE, "isolation": "jail", "ctx": ctx}
    kw.update(kwargs)
    with pytest.raises(exc):
        libspace.Sandbox.create(kw.pop("template"), **kw)


def test_library_refuses_what_it_judges(ctx):
    # values of the right type that the library itself refuses, with its message
    with pytest.raises(libspace.InvalidArgument) as ei:
        libspace.Sandbox.create(TEMPLATE, isolation="jail", network="{not json", ctx=ctx)
    assert ei.value.message
    with pytest.raises(libspace.InvalidArgument):
        libspace.Sandbox.create(TEMPLATE, isolation="jail", network_allow_resolve=["not-a-cidr"], ctx=ctx)


def test_run_refuses_bad_arguments(sb):
    for cmd, exc in [([], ValueError), ("", ValueError), (["ec\0ho"], ValueError), (["echo", "a\0"], ValueError),
                     (42, TypeError), ([None], TypeError), ([""], ValueError)]:
        with pytest.raises(exc):
            sb.run(cmd)
    for kwargs, exc in [({"timeout": 0}, ValueError), ({"timeout": 2 ** 40}, ValueError),
                        ({"timeout": datetime.timedelta(seconds=-1)}, ValueError), ({"uid": -1}, ValueError),
                        ({"uid": 2 ** 32}, ValueError), ({"rows": 5}, ValueError),
                        ({"pty": True, "rows": 70000}, ValueError), ({"input": 5}, TypeError),
                        ({"input": b"x", "stdin": 0}, ValueError), ({"stdin": -3}, ValueError),
                        ({"stdin": True}, TypeError), ({"cwd": "/r\0"}, ValueError),
                        ({"encoding": "no-such-codec", "text": True}, LookupError),
                        ({"on_stdout": "print"}, TypeError), ({"max_output": -1}, ValueError),
                        ({"checkpoint_first": True}, ValueError), ({"check": "yes"}, TypeError)]:
        with pytest.raises(exc):
            sb.run(["true"], **kwargs)
    # and the sandbox is still fine
    assert sb.run(["true"]).ok


def test_files_refuse_bad_paths(sb):
    with pytest.raises(ValueError):
        sb.files.write("/root/a\0b", b"x")
    with pytest.raises(ValueError):
        sb.files.read("")
    with pytest.raises(ValueError):
        sb.files.write("/root/x", b"x", mode=0o10000)
    with pytest.raises(TypeError):
        sb.files.write("/root/x", 12)
    with pytest.raises(ValueError):
        sb.files.read("/etc/passwd", max_bytes=0)


def test_handles_cannot_be_made_directly():
    with pytest.raises(TypeError):
        libspace.Sandbox()
    with pytest.raises(TypeError):
        libspace.Process()
    with pytest.raises(TypeError):
        libspace.Context(3)

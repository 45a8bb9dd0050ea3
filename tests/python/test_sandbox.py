# SPDX-License-Identifier: Apache-2.0
"""Sandbox lifecycle: create, open, list, info, status, log, pause/resume, timeouts, tether, remove, reap,
and what a context manager does with each kind of handle."""

import datetime
import os
import subprocess
import sys
import textwrap
import time

import pytest

import libspace
from conftest import TEMPLATE, record_id


def test_create_is_destroyed_by_its_with_block(ctx):
    with libspace.Sandbox.create(TEMPLATE, isolation="jail", ctx=ctx) as sb:
        assert sb.id.startswith("sb-") and len(sb.id) == 19
        assert sb.context is ctx and not sb.closed
        info = sb.info()
        assert info.id == sb.id and info.template == TEMPLATE and info.isolation == "jail"
        assert info.status == "running" == sb.status and info.reason == "" and info.pid > 0
        assert info.cpus == 1 and info.memory_mib == 512 and info.expires is None and info.expires_ms == 0
        assert isinstance(info.created, datetime.datetime) and info.created.tzinfo is not None
        assert info.updated >= info.created and os.path.isdir(info.path)
        assert [i.id for i in libspace.Sandbox.list(ctx=ctx)] == [sb.id]
        assert libspace.Sandbox.get_status(sb.id, ctx=ctx) == "running"
        assert repr(sb) == f"<libspace.Sandbox {sb.id} (open)>"
        sid = sb.id
    assert sb.closed and repr(sb).endswith("(destroyed)>")
    assert libspace.Sandbox.list(ctx=ctx) == []
    assert libspace.Sandbox.get_status(sid, ctx=ctx) == "destroyed"
    with pytest.raises(libspace.NotRunning):  # its row stays (for the event log): ESRCH, not ENOENT
        libspace.Sandbox.open(sid, ctx=ctx)
    with pytest.raises(ValueError):  # a closed handle is refused, never used
        sb.info()


def test_create_options(ctx):
    with libspace.Sandbox.create(TEMPLATE, isolation="jail", cpus=2, memory_mib=256, timeout_s=600,
                                 hostname="box", env={"GREETING": "hi there", "X": ""}, ctx=ctx) as sb:
        info = sb.info()
        assert (info.cpus, info.memory_mib) == (2, 256)
        left = (info.expires - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        assert 590 < left <= 600
        assert sb.run(["hostname"]).stdout == b"box\n"
        assert sb.run('echo "$GREETING|$X|"').stdout == b"hi there||\n"


def test_open_leaves_it_running_unless_asked(ctx):
    sb = libspace.Sandbox.create(TEMPLATE, isolation="jail", ctx=ctx)
    try:
        with libspace.Sandbox.open(sb.id, ctx=ctx) as again:
            assert again.id == sb.id and again.run("echo same").stdout == b"same\n"
        assert again.closed and sb.info().status == "running"
        with libspace.Sandbox.open(sb.id, ctx=ctx, destroy_on_exit=True) as again:
            pass
        assert libspace.Sandbox.get_status(sb.id, ctx=ctx) == "destroyed"
        with pytest.raises(libspace.NotRunning):
            sb.run("true")
    finally:
        sb.close()


def test_create_without_with_keeps_running_until_destroyed(ctx):
    sb = libspace.Sandbox.create(TEMPLATE, isolation="jail", destroy_on_exit=False, ctx=ctx)
    sid = sb.id
    with sb:
        pass  # destroy_on_exit=False: the block only closes the handle
    assert sb.closed
    assert libspace.Sandbox.get_status(sid, ctx=ctx) == "running"
    libspace.Sandbox.remove(sid, ctx=ctx)
    assert libspace.Sandbox.get_status(sid, ctx=ctx) == "destroyed"
    with pytest.raises(libspace.NotFound):
        libspace.Sandbox.remove(sid, ctx=ctx)


def test_destroy_and_close_are_idempotent(ctx):
    sb = libspace.Sandbox.create(TEMPLATE, isolation="jail", ctx=ctx)
    sb.destroy()
    sb.destroy()
    sb.close()
    other = libspace.Sandbox.create(TEMPLATE, isolation="jail", ctx=ctx)
    other.close()
    other.close()
    with pytest.raises(ValueError):
        other.destroy()  # the handle is gone: remove by id instead
    libspace.Sandbox.remove(other.id, keep_events=True, with_checkpoints=True, ctx=ctx)
    kinds = [e.kind for e in ctx.events(sandbox_id=other.id)]
    assert "destroyed" in kinds


def test_log(sb, ctx):
    assert os.path.isabs(sb.log_path)
    text = sb.log()
    assert isinstance(text, str)
    assert libspace.Sandbox.read_log(sb.id, ctx=ctx) == text
    with pytest.raises(libspace.NotFound):
        libspace.Sandbox.read_log("sb-aaaaaaaaaaaaaaaa", ctx=ctx)


def test_pause_resume(sb):
    sb.pause()
    assert sb.status == "paused"
    sb.pause()  # no-op
    with pytest.raises(libspace.Busy) as ei:
        sb.run("true")
    assert sb.id in ei.value.message
    with pytest.raises(libspace.Busy):
        sb.set_timeout(60)
    sb.resume()
    sb.resume()
    assert sb.status == "running" and sb.run("echo back").stdout == b"back\n"


def test_set_timeout(sb):
    sb.set_timeout(120)
    left = (sb.info().expires - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    assert 110 < left <= 120
    sb.set_timeout(datetime.timedelta(hours=2))
    assert sb.info().expires_ms > 0
    sb.set_timeout(None)
    assert sb.info().expires is None
    with pytest.raises(ValueError):
        sb.set_timeout(367 * 86400)


def test_lifetime_ends_and_reap(ctx):
    sb = libspace.Sandbox.create(TEMPLATE, isolation="jail", timeout_s=1, ctx=ctx)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and libspace.Sandbox.list(ctx=ctx):
            time.sleep(0.2)
        assert libspace.Sandbox.list(ctx=ctx) == []  # past its lifetime: no longer listed
        assert ctx.reap() >= 0
        assert libspace.Sandbox.get_status(sb.id, ctx=ctx) in ("destroyed", "failed", "stopped")
        with pytest.raises((libspace.NotRunning, libspace.Stale)):
            sb.run("true")
    finally:
        sb.close()
        try:
            libspace.Sandbox.remove(sb.id, ctx=ctx)
        except libspace.NotFound:
            pass


def test_tether_ends_it_with_the_process(ctx, tmp_path):
    # A child Python creates a tethered sandbox, prints its id and is killed: the sandbox goes with it.
    code = textwrap.dedent(f"""
        import os, sys, libspace
        sb = libspace.Sandbox.create({TEMPLATE!r}, isolation="jail", tether=True, destroy_on_exit=False)
        print(sb.id, flush=True)
        sys.stdin.read()
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        sid = p.stdout.readline().decode().strip()
        assert sid.startswith("sb-"), sid
        record_id(sid)
        assert libspace.Sandbox.get_status(sid, ctx=ctx) == "running"
    finally:
        p.kill()
        p.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        ctx.reap()
        if libspace.Sandbox.get_status(sid, ctx=ctx) == "destroyed":
            break
        time.sleep(0.2)
    assert libspace.Sandbox.get_status(sid, ctx=ctx) == "destroyed"


def test_tether_on_a_handle(ctx):
    sb = libspace.Sandbox.create(TEMPLATE, isolation="jail", destroy_on_exit=False, ctx=ctx)
    sid = sb.id
    sb.tether()
    sb.tether()  # no-op
    sb.close()  # the handle held the tether: the sandbox shuts down, and a reap destroys it (space.h),
    # though its holder, this process, still runs
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and libspace.Sandbox.get_status(sid, ctx=ctx) != "destroyed":
        ctx.reap()
        time.sleep(0.2)
    assert libspace.Sandbox.get_status(sid, ctx=ctx) == "destroyed"


def test_usage_shows_what_the_sandbox_uses(ctx):
    with libspace.Sandbox.create(TEMPLATE, isolation="jail", ctx=ctx) as sb:
        before = sb.usage()
        assert isinstance(before, libspace.SandboxUsage)
        assert before.cpus == 1 and before.memory_limit_bytes == 512 << 20 and before.memory_bytes > 0
        assert 0 < before.disk_used_bytes <= before.disk_total_bytes and before.time_ms > 0
        sb.run(["sh", "-c", "dd if=/dev/zero of=/dev/shm/u bs=1M count=16 2>/dev/null"])
        after = sb.usage()
        assert after.memory_bytes >= before.memory_bytes + (8 << 20) and after.time_ms >= before.time_ms

# SPDX-License-Identifier: Apache-2.0
"""Checkpoints: take, list, get, find, rollback (by object, id and name), fork, remove."""

import pytest

import libspace
from conftest import TEMPLATE


def test_checkpoint_rollback(sb, ctx):
    sb.files.write("/root/v", b"1")
    cp = sb.checkpoint("v1")
    assert cp.id.startswith("cp-") and cp.sandbox_id == sb.id and cp.name == "v1" and cp.kind == "disk"
    assert cp.template == sb.info().template and cp.created is not None and not cp.automatic
    anon = sb.checkpoint()
    assert anon.name == ""
    assert [c.id for c in sb.checkpoints()] == [cp.id, anon.id]
    assert libspace.Checkpoint.get(cp.id, ctx=ctx) == cp
    assert libspace.Checkpoint.find("v1", sandbox_id=sb.id, ctx=ctx) == cp
    assert libspace.Checkpoint.find(cp.id, ctx=ctx) == cp
    assert cp in libspace.Checkpoint.list(ctx=ctx)
    for way in (cp, cp.id, "v1"):
        sb.files.write("/root/v", b"changed")
        sb.rollback(way)
        assert sb.files.read("/root/v") == b"1"
        assert sb.status == "running" and sb.run("echo alive").ok
    sb.checkpoint("v1")
    with pytest.raises(libspace.InvalidArgument) as ei:  # two named v1: which one?
        libspace.Checkpoint.find("v1", sandbox_id=sb.id, ctx=ctx)
    assert "cp-" in ei.value.message
    for c in sb.checkpoints():
        c.remove()
    assert sb.checkpoints() == []
    with pytest.raises(libspace.NotFound):
        libspace.Checkpoint.get(cp.id, ctx=ctx)
    with pytest.raises(libspace.NotFound):
        cp.remove()
    with pytest.raises(libspace.NotFound):
        sb.rollback(cp)


def test_checkpoint_of_a_paused_sandbox(sb):
    sb.pause()
    cp = sb.checkpoint("paused")
    assert sb.status == "paused"
    sb.resume()
    cp.remove()


def test_rollback_to_another_sandboxs_checkpoint_is_refused(ctx, sb):
    with libspace.Sandbox.create(sb.info().template, isolation="jail", ctx=ctx) as other:
        cp = other.checkpoint("theirs")
        try:
            with pytest.raises(libspace.InvalidArgument):
                sb.rollback(cp.id)
        finally:
            cp.remove()


def test_fork(sb, ctx):
    sb.files.write("/root/base", b"shared")
    cp = sb.checkpoint("branch-point")
    try:
        with cp.fork(count=2, timeout_s=300) as group:
            a, b = group
            assert isinstance(group, libspace.SandboxGroup) and len({a.id, b.id, sb.id}) == 3
            for s in group:
                assert s.files.read("/root/base") == b"shared" and s.info().expires is not None
            a.files.write("/root/base", b"a's")
            assert b.files.read("/root/base") == b"shared" and sb.files.read("/root/base") == b"shared"
            ids = [a.id, b.id]
        assert all(s.closed for s in group)
        assert all(libspace.Sandbox.get_status(i, ctx=ctx) == "destroyed" for i in ids)
        one = cp.fork()
        assert len(one) == 1
        one.destroy()
        one.destroy()  # again: nothing left to do
        kept = cp.fork(destroy_on_exit=False)
        with kept:
            pass
        assert libspace.Sandbox.get_status(kept[0].id, ctx=ctx) == "running"
        libspace.Sandbox.remove(kept[0].id, ctx=ctx)
        with pytest.raises(ValueError):
            cp.fork(count=0)
        with pytest.raises(ValueError):
            cp.fork(count=65)
    finally:
        cp.remove()


def test_fork_outlives_its_sandbox_and_inherits_lifetime(ctx):
    template = TEMPLATE
    with libspace.Sandbox.create(template, isolation="jail", timeout_s=600, ctx=ctx) as sb:
        parent_expires = sb.info().expires_ms
        cp = sb.checkpoint()
    try:
        assert libspace.Checkpoint.get(cp.id, ctx=ctx) == cp  # it outlives its sandbox
        with cp.fork() as (child,):
            # no timeout given: what was left of the parent's lifetime
            assert 0 < child.info().expires_ms <= parent_expires + 1000
            assert child.run("echo forked").stdout == b"forked\n"
    finally:
        cp.remove()

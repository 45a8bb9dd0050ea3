# SPDX-License-Identifier: Apache-2.0
"""Context: state directory, init, pool, doctor, secrets, events, logging, close, and the thread and fork
rules of the C library."""

import logging
import os
import subprocess
import threading

import pytest

import libspace
from conftest import TEMPLATE


def test_state_dir_and_defaults(ctx):
    assert ctx.state_dir == os.environ["SPACE_STATE_DIR"] and not ctx.closed
    assert repr(ctx) == f"<libspace.Context {ctx.state_dir!r}>"
    d = libspace.default_context()
    assert d is libspace.default_context() and d.state_dir == ctx.state_dir
    other = []
    t = threading.Thread(target=lambda: other.append(libspace.default_context()))
    t.start()
    t.join()
    assert other[0] is not d  # one per thread
    with libspace.Context(ctx.state_dir, libexec_dir="/nonexistent") as c:
        assert c.state_dir == ctx.state_dir
    assert c.closed and repr(c) == "<libspace.Context closed>"
    with pytest.raises(RuntimeError):
        c.templates.list()
    with pytest.raises(TypeError):
        libspace.Sandbox.list(ctx="not a context")


def test_init_pool_doctor(ctx, tmp_path):
    ctx.init()  # idempotent on an initialized state directory
    ctx.init(isolation="jail", identity_map=False)
    assert ctx.identity_map_allowed() is False
    p = ctx.pool_info()
    assert p.isolation == "jail" and p.mounted and p.total_bytes > p.free_bytes > 0
    assert p.loop_image.endswith("pool.img") and os.path.isdir(p.path)
    doc = ctx.doctor()
    assert {"checks", "vm", "jail"} <= set(doc) and isinstance(doc["jail"]["usable"], bool)
    assert all({"name", "status"} <= set(c) for c in doc["checks"])
    assert ctx.doctor(verbose=True)["checks"]
    with pytest.raises(ValueError):
        ctx.init(pool_path="/x", loop_pool_size=1 << 30)
    with pytest.raises(TypeError):
        ctx.init(identity_map="yes")
    with libspace.Context(tmp_path / "s") as fresh:
        fstype = subprocess.run(["stat", "-f", "-c", "%T", str(tmp_path)], capture_output=True, text=True).stdout
        if fstype.strip() != "btrfs":
            with pytest.raises(libspace.NotBtrfs) as ei:
                fresh.init(pool_path=tmp_path)
            assert "btrfs" in ei.value.message
        stages = []
        fresh.init(loop_pool_size=256 << 20, isolation="jail", progress=lambda s, d, t: stages.append(s))
        try:
            assert stages and fresh.pool_info().mounted
            fresh.init(isolation="jail")  # settings only: still the same loop pool
            assert fresh.pool_info().loop_image == str(tmp_path / "s" / "pool.img")
            fresh.unmount_pool()
            assert fresh.pool_info().mounted  # mounted again on use
        finally:
            fresh.unmount_pool()


def test_unmount_pool_busy_while_sandboxes_run(ctx, sb):
    with pytest.raises(libspace.Busy):
        ctx.unmount_pool()


def test_secrets(ctx):
    ctx.set_secret("py-token", "s3cr3t")
    ctx.set_secret("py-bytes", b"\x01\x02")
    names = [s.name for s in ctx.secrets()]
    assert "py-token" in names and "py-bytes" in names
    assert all(s.created is not None for s in ctx.secrets())
    for bad in ("a\nb", "", "x" * 8193):
        with pytest.raises(libspace.InvalidArgument):
            ctx.set_secret("py-bad", bad)
    with pytest.raises(libspace.InvalidArgument):
        ctx.set_secret("-bad-name", "v")
    with pytest.raises(TypeError):
        ctx.set_secret("py-x", 5)
    # a policy may name a registered secret
    policy = {"allow": ["example.invalid"], "secrets": {"T": "secret:py-token"},
              "inject": [{"host": "example.invalid", "header": "Authorization", "value": "Bearer ${T}"}]}
    try:
        with libspace.Sandbox.create(TEMPLATE, isolation="jail", network=policy, ctx=ctx) as s:
            assert s.run("echo policy").ok
    except libspace.InvalidArgument as e:  # the policy's schema is the library's (docs/network.md)
        pytest.fail(f"policy refused: {e}")
    ctx.remove_secret("py-token")
    ctx.remove_secret("py-bytes")
    with pytest.raises(libspace.NotFound):
        ctx.remove_secret("py-token")
    assert "py-token" not in [s.name for s in ctx.secrets()]


def test_events(ctx, sb):
    evs = ctx.events(sandbox_id=sb.id)
    kinds = [e.kind for e in evs]
    assert "creating" in kinds and "running" in kinds
    assert all(e.sandbox_id == sb.id and e.time is not None for e in evs)
    assert [e.seq for e in evs] == sorted(e.seq for e in evs)
    assert ctx.events(sandbox_id=sb.id, kind="running")[0].kind == "running"
    assert len(ctx.events(sandbox_id=sb.id, limit=1)) == 1
    assert ctx.events(sandbox_id=sb.id, after_seq=evs[-1].seq) == []
    with pytest.raises(ValueError):
        ctx.events(limit=-1)


def test_log_lines_go_to_logging(caplog):
    with caplog.at_level(logging.DEBUG, logger="libspace"):
        with libspace.Context() as c:  # made while DEBUG is enabled: debug lines too
            with libspace.Sandbox.create(TEMPLATE, isolation="jail", ctx=c) as s:
                s.run("true")
    assert any(r.name == "libspace" for r in caplog.records)


def test_close_releases_every_handle(ctx):
    c = libspace.Context(ctx.state_dir)
    sb = libspace.Sandbox.create(TEMPLATE, isolation="jail", ctx=c)
    p = sb.start(["sleep", "30"])
    c.close()
    c.close()
    assert sb.closed
    with pytest.raises(RuntimeError):
        sb.run("true")
    with pytest.raises(RuntimeError):
        p.pump()
    assert libspace.Sandbox.get_status(sb.id, ctx=ctx) == "running"  # the sandbox outlives the context
    libspace.Sandbox.remove(sb.id, ctx=ctx)


def test_threads_share_a_context_one_call_at_a_time(ctx):
    # Four threads run commands on two sandboxes of one context: the context's lock serializes the calls
    # (the C rule: one thread at a time), and every result is right.
    with libspace.Sandbox.create(TEMPLATE, isolation="jail", ctx=ctx) as a, \
            libspace.Sandbox.create(TEMPLATE, isolation="jail", ctx=ctx) as b:
        errors, done = [], []

        def work(sb, n):
            try:
                for i in range(10):
                    r = sb.run(["echo", f"{n}-{i}"])
                    assert r.stdout == f"{n}-{i}\n".encode(), r
                    sb.files.write(f"/tmp/t{n}", str(i))
                    assert sb.files.read(f"/tmp/t{n}") == str(i).encode()
                done.append(n)
            except BaseException as e:
                errors.append(e)

        ts = [threading.Thread(target=work, args=(s, n)) for n, s in enumerate([a, b, a, b])]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        assert errors == [] and sorted(done) == [0, 1, 2, 3]


def test_contexts_in_parallel_threads(ctx):
    # Each thread its own context: commands run at the same time (4 x 1 s in about 1 s, not 4).
    import time
    results, errors = [], []

    def work():
        try:
            with libspace.Context() as c, libspace.Sandbox.create(TEMPLATE, isolation="jail", ctx=c) as s:
                results.append(s.run("sleep 1; echo done").stdout)
        except BaseException as e:
            errors.append(e)

    t0 = time.monotonic()
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert errors == [] and results == [b"done\n"] * 4
    assert time.monotonic() - t0 < 3.5


def test_a_forked_child_cannot_use_its_parents_context(ctx, sb):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: must refuse, and must not free the parent's handles on its way out
        code = 1
        try:
            try:
                sb.run("true")
            except RuntimeError as e:
                if "forked" in str(e):
                    code = 0
            with libspace.Context() as fresh:  # a new context works
                if not [t for t in fresh.templates.list() if t.name == TEMPLATE]:
                    code = 2
            libspace.default_context().templates.list()
        except BaseException:
            code = 3
        os.write(w, bytes([code]))
        os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert got == b"\0"
    assert sb.run("echo parent still fine").ok

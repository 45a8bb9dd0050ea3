# SPDX-License-Identifier: Apache-2.0
"""No sandbox, descriptor, thread or child process left after many create/destroy cycles in one process
($SPACE_PY_CYCLES, default 200; the python-cycles benchmark runs 1,000)."""

import gc
import os
import resource
import threading
import time

import libspace
from conftest import TEMPLATE

CYCLES = int(os.environ.get("SPACE_PY_CYCLES", "200"))


def fds():
    return sorted(int(x) for x in os.listdir("/proc/self/fd"))


def children():
    me = str(os.getpid())
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[1] == me:
                        out.append(pid)
            except OSError:
                pass
    return out


def state():
    gc.collect()
    return fds(), threading.active_count(), children()


def test_cycles(ctx):
    # one cycle first, so lazily opened things (the store, the library's own descriptors) count as "before"
    with libspace.Sandbox.create(TEMPLATE, isolation="jail", ctx=ctx) as sb:
        sb.run("true")
    before = state()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    for i in range(CYCLES):
        with libspace.Sandbox.create(TEMPLATE, isolation="jail", ctx=ctx) as sb:
            r = sb.run(["echo", str(i)])
            assert r.stdout == f"{i}\n".encode()
            if i % 10 == 0:  # the other handles too: files, a process, a second handle dropped unclosed
                sb.files.write("/root/f", b"x" * 1000)
                assert sb.files.read("/root/f") == b"x" * 1000
                with sb.start(["cat"], stdin=True) as p:
                    p.write(b"y")
                    p.close_stdin()
                    assert p.wait(10).stdout == b"y"
                libspace.Sandbox.open(sb.id, ctx=ctx)  # released by the garbage collector
    took = time.monotonic() - t0
    after = state()
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"\n{CYCLES} create/run/destroy cycles in {took:.1f} s ({took / CYCLES * 1000:.0f} ms each); "
          f"max RSS {rss0 // 1024} -> {rss1 // 1024} MiB")
    assert libspace.Sandbox.list(ctx=ctx) == []
    assert after[0] == before[0], f"descriptors: {before[0]} before, {after[0]} after"
    assert after[1] == before[1], f"threads: {before[1]} before, {after[1]} after"
    assert after[2] == before[2], f"child processes: {before[2]} before, {after[2]} after"
    assert rss1 - rss0 < 64 * 1024, f"max RSS grew by {(rss1 - rss0) // 1024} MiB"
    assert not os.listdir(os.path.join(ctx.pool_info().path, "sandboxes"))


def test_contexts_come_and_go():
    # contexts made and dropped (closed, or collected) leave no descriptor either
    with libspace.Context() as c:
        c.templates.list()
    before = state()
    for i in range(200):
        c = libspace.Context()
        c.templates.list()
        if i % 2:
            c.close()
        del c
    assert state() == before

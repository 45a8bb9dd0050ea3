# SPDX-License-Identifier: Apache-2.0
"""libspace.aio: the same calls awaited in worker threads; sandboxes in parallel; nothing left by a
cancelled create."""

import asyncio
import time

import pytest

import libspace
from libspace import aio
from conftest import TEMPLATE


def run(coro):
    return asyncio.run(coro)


def test_async_sandbox(ctx):
    async def main():
        async with aio.Sandbox.create(TEMPLATE, isolation="jail") as sb:
            assert sb.id.startswith("sb-") and repr(sb).startswith("<libspace.aio.Sandbox")
            r = await sb.run(["sh", "-c", "echo hi; exit 2"])
            assert r.exit_code == 2 and r.stdout == b"hi\n"
            with pytest.raises(libspace.CommandError):
                await sb.run("false", check=True)
            assert (await sb.info()).status == "running"
            f = sb.files
            await f.write("/root/a", b"A")
            assert await f.read("/root/a") == b"A" and await f.exists("/root/a")
            await f.mkdir("/root/d", parents=True)
            await f.rename("/root/a", "/root/d/b")
            assert [e.name for e in await f.list("/root/d")] == ["b"]
            assert (await f.stat("/root/d/b")).size == 1
            await f.remove("/root/d", recursive=True)
            await sb.pause()
            await sb.resume()
            await sb.set_timeout(300)
            cp = await sb.checkpoint("aio")
            await f.write("/root/x", b"after")
            await sb.rollback(cp)
            assert not await f.exists("/root/x")
            forks = await aio.fork(cp, 2, timeout_s=120)
            try:
                assert len({x.id for x in forks}) == 2
                assert [(await x.run("echo f")).stdout for x in forks] == [b"f\n", b"f\n"]
            finally:
                for x in forks:
                    await x.destroy()
            cp.remove()
            listed = await aio.Sandbox.list()
            assert [i.id for i in listed] == [sb.id]
            again = await aio.Sandbox.open(sb.id)
            assert (await again.run("echo again")).stdout == b"again\n"
            await again.close()
        assert await aio.Sandbox.list(ctx=ctx) == []

    run(main())


def test_await_create_then_destroy(tmp_path):
    async def main():
        sb = await aio.Sandbox.create(TEMPLATE, isolation="jail")
        await sb.files.upload(__file__, "/root/me.py")
        await sb.files.download("/root/me.py", tmp_path / "me.py")
        assert (tmp_path / "me.py").read_bytes() == open(__file__, "rb").read()
        await sb.destroy()
        assert sb.sandbox.closed
        with pytest.raises(libspace.TemplateNotFound):
            await aio.Sandbox.create("no-such", isolation="jail")

    run(main())


def test_sandboxes_run_in_parallel():
    async def one():
        async with aio.Sandbox.create(TEMPLATE, isolation="jail") as sb:
            return (await sb.run("sleep 1; echo done")).stdout

    async def main():
        t0 = time.monotonic()
        out = await asyncio.gather(*(one() for _ in range(3)))
        return out, time.monotonic() - t0

    out, took = run(main())
    assert out == [b"done\n"] * 3 and took < 3.0


def test_a_cancelled_create_leaves_nothing(ctx):
    async def main():
        task = asyncio.ensure_future(aio.Sandbox.create(TEMPLATE, isolation="jail"))
        await asyncio.sleep(0)  # started in its thread
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the thread finishes the create, then the sandbox is destroyed
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            if not libspace.Sandbox.list(ctx=ctx):
                break

    run(main())
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and libspace.Sandbox.list(ctx=ctx):
        time.sleep(0.1)
    assert libspace.Sandbox.list(ctx=ctx) == []

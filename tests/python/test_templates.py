# SPDX-License-Identifier: Apache-2.0
"""Templates: list, get, import_ (with progress), remove (busy, forced), refresh, warm pools."""

import tarfile

import pytest

import libspace
from conftest import ROOTFS, TEMPLATE


def test_list_and_get(ctx):
    names = [t.name for t in ctx.templates.list()]
    assert TEMPLATE in names and names == sorted(names)
    assert [t.name for t in ctx.templates] == names
    t = ctx.templates.get(TEMPLATE)
    assert t.name == TEMPLATE and t.rootfs_bytes > 0 and not t.has_kernel and not t.has_initrd
    assert t.created is not None and t.sandboxes == 0 and t.path.endswith("/" + TEMPLATE)
    with pytest.raises(libspace.NotFound):
        ctx.templates.get("no-such-template")
    # the module-level namespace uses this thread's default context (the same state directory)
    assert TEMPLATE in [x.name for x in libspace.templates.list()]


def test_import_use_remove(ctx, tmp_path):
    stages = []
    t = ctx.templates.import_("py-imported", ROOTFS, size_bytes=256 << 20,
                              progress=lambda stage, done, total: stages.append(stage))
    try:
        assert t.name == "py-imported" and t.rootfs_bytes == 256 << 20 and stages
        with pytest.raises(libspace.AlreadyExists):
            ctx.templates.import_("py-imported", ROOTFS)
        with libspace.Sandbox.create("py-imported", isolation="jail", ctx=ctx) as sb:
            assert sb.run("echo from-imported").stdout == b"from-imported\n"
            assert t.refresh().sandboxes == 1
            with pytest.raises(libspace.Busy):
                t.remove()
        assert t.refresh().sandboxes == 0
    finally:
        ctx.templates.remove("py-imported")
    with pytest.raises(libspace.NotFound):
        ctx.templates.get("py-imported")
    with pytest.raises(libspace.NotFound):
        ctx.templates.remove("py-imported")


def test_import_from_a_tarball_and_force_remove(ctx, tmp_path):
    tar = tmp_path / "root.tar.gz"
    with tarfile.open(tar, "w:gz") as tf:
        tf.add(ROOTFS, arcname=".")
    t = ctx.templates.import_("py-tarball", tar)
    sb = libspace.Sandbox.create("py-tarball", isolation="jail", ctx=ctx)
    try:
        t.remove(force=True)  # the sandbox keeps its own copy-on-write disk
        assert sb.run("echo still").stdout == b"still\n"
    finally:
        sb.destroy()


def test_import_failures_leave_nothing(ctx, tmp_path):
    before = [x.name for x in ctx.templates.list()]
    with pytest.raises(libspace.InvalidArgument):
        ctx.templates.import_("-bad-name", ROOTFS)
    with pytest.raises((libspace.NotFound, libspace.InvalidArgument)):
        ctx.templates.import_("py-missing", tmp_path / "none")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"neither tree, tarball nor ext4")
    with pytest.raises(libspace.SpaceError):
        ctx.templates.import_("py-junk", junk)
    with pytest.raises(ValueError):
        ctx.templates.import_("py-x", ROOTFS, modules_dir="/lib/modules")
    with pytest.raises(ValueError):
        ctx.templates.import_("py-x", ROOTFS, size_bytes=0)

    class Stop(Exception):
        pass

    def stop(stage, done, total):
        raise Stop(stage)

    with pytest.raises(Stop):  # a progress callback's exception is raised once the import returns
        t = ctx.templates.import_("py-progress", ROOTFS, progress=stop)
    if "py-progress" in [x.name for x in ctx.templates.list()]:
        ctx.templates.remove("py-progress")
    assert [x.name for x in ctx.templates.list()] == before


def test_warm_pool(ctx):
    t = ctx.templates.import_("py-warm", ROOTFS)
    try:
        w = t.warm_info()
        assert (w.has_snapshot, w.warm_pool_size, w.warm_pool_ready) == (False, 0, 0)
        t.set_warm_pool(2)
        assert t.warm_info().warm_pool_size == 2
        assert t.fill_warm_pool() == 2
        assert t.warm_info().warm_pool_ready == 2
        assert libspace.Sandbox.list(ctx=ctx) == []  # pooled sandboxes are not listed
        assert ctx.templates.fill_warm_pools() == 0  # full already
        with libspace.Sandbox.create("py-warm", isolation="jail", ctx=ctx) as sb:  # handed out from the pool
            assert sb.run("echo warm").stdout == b"warm\n"
            assert t.warm_info().warm_pool_ready == 1
        with pytest.raises(ValueError):
            t.set_warm_pool(65)
    finally:
        t.set_warm_pool(0)
        assert t.warm_info().warm_pool_ready == 0
        t.remove()


def test_start_command(ctx):
    t = ctx.templates.import_("py-start", ROOTFS)
    try:
        assert t.start is None
        t.set_start(["sh", "-c", "mkdir -p /srv && echo up >/srv/s && exec httpd -f -p 127.0.0.1:8123 -h /srv"],
                    wait_port=8123)
        assert t.start == {"argv": ["sh", "-c", t.start["argv"][2]], "wait_port": 8123}
        with libspace.Sandbox.create("py-start", isolation="jail", ctx=ctx) as sb:
            # listening when the create returned, in a server no caller holds
            assert sb.run("wget -qO- http://127.0.0.1:8123/s").stdout == b"up\n"
        with pytest.raises(ValueError):
            t.set_start(["true"], wait_port=70000)
        t.set_start(None)
        assert t.start is None
        with pytest.raises(libspace.NotFound):
            ctx.templates.get("no-such-template").set_start(["true"])
    finally:
        t.remove()


def test_import_an_image(ctx, tmp_path):
    # An OCI image layout made by hand (tests/integration/image/mkimage.py): its config's Env, WorkingDir and
    # User become the defaults of every process; an explicit uid still wins.
    import os
    import shutil
    import subprocess
    import sys
    mk = os.path.join(os.environ["SPACE_SOURCE_DIR"], "tests", "integration", "image", "mkimage.py")
    out = tmp_path / "oci"
    subprocess.run([sys.executable, mk, "three-layer", str(out), "--busybox", shutil.which("busybox")],
                   check=True, stdout=subprocess.DEVNULL)
    with pytest.raises(ValueError):
        ctx.templates.import_("py-image", ROOTFS, image=out)
    t = ctx.templates.import_("py-image", image=out)
    try:
        assert t.image_digest.startswith("sha256:") and len(t.image_digest) == 71
        assert t.image_config and t.image_config["working_dir"] == "/work"
        assert "GREETING=hello from env" in t.image_config["env"]
        with libspace.Sandbox.create("py-image", isolation="jail", ctx=ctx) as sb:
            r = sb.run("echo $GREETING; pwd; id -un")
            assert r.stdout == b"hello from env\n/work\napp\n", r.stdout
            assert sb.run(["id", "-u"], uid=0).stdout == b"0\n"
    finally:
        ctx.templates.remove("py-image")
    assert ctx.templates.get(TEMPLATE).image_config is None and ctx.templates.get(TEMPLATE).image_digest == ""

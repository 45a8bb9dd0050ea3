# SPDX-License-Identifier: Apache-2.0
"""sandbox.files: write, read, upload, download, stat, exists, list, mkdir, remove, rename."""

import io
import os
import stat

import pytest

import libspace


def test_write_and_read(sb):
    f = sb.files
    f.write("/root/a/b/c.txt", "héllo\n")  # parents are made
    assert f.read("/root/a/b/c.txt") == "héllo\n".encode()
    assert f.read("/root/a/b/c.txt", text=True) == "héllo\n"
    f.write("/root/bin.dat", bytes(range(256)), mode=0o600)
    assert f.read("/root/bin.dat") == bytes(range(256))
    assert f.stat("/root/bin.dat").permissions == 0o600
    f.write("/root/view", memoryview(b"abcdef")[2:])
    assert f.read("/root/view") == b"cdef"
    f.write("/root/empty", b"")
    assert f.read("/root/empty") == b""
    f.write("/root/fileobj", io.BytesIO(b"from a stream" * 1000))
    assert f.read("/root/fileobj") == b"from a stream" * 1000
    with pytest.raises(TypeError):
        f.write("/root/textobj", io.StringIO("text"))
    big = os.urandom(5 << 20)
    f.write("/root/big", big)
    assert f.read("/root/big") == big
    # what a command sees
    assert sb.run(["cat", "/root/a/b/c.txt"]).stdout == "héllo\n".encode()
    f.write("/root/a/b/c.txt", b"replaced")
    assert f.read("/root/a/b/c.txt") == b"replaced"


def test_read_errors(sb):
    f = sb.files
    with pytest.raises(libspace.NotFound) as ei:
        f.read("/root/none")
    assert isinstance(ei.value, FileNotFoundError) and ei.value.function == "space_sandbox_read_file_v2"
    with pytest.raises((libspace.IsADirectory, libspace.InvalidArgument)):
        f.read("/root")
    f.write("/root/ten", b"0123456789")
    with pytest.raises(libspace.TooLarge) as ei:
        f.read("/root/ten", max_bytes=5)
    assert "5" in ei.value.message
    assert f.read("/root/ten", max_bytes=10) == b"0123456789"
    f.write("/root/latin", b"\xe9t\xe9")
    with pytest.raises(UnicodeDecodeError):
        f.read("/root/latin", text=True)
    assert f.read("/root/latin", text=True, encoding="latin-1") == "été"


def test_upload_download(sb, tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"upload me")
    os.chmod(src, 0o751)
    sb.files.upload(src, "/root/up/src.bin")
    st = sb.files.stat("/root/up/src.bin")
    assert st.permissions == 0o751 and st.size == 9
    sb.files.upload(str(src), "/root/up/other", mode=0o640)
    assert sb.files.stat("/root/up/other").permissions == 0o640
    dest = tmp_path / "down.bin"
    info = sb.files.download("/root/up/src.bin", dest)
    assert dest.read_bytes() == b"upload me" and info.size == 9
    # all or nothing: a failed download leaves dest as it was, and no temporary file
    dest.write_bytes(b"keep")
    with pytest.raises(libspace.NotFound):
        sb.files.download("/root/none", dest)
    with pytest.raises(libspace.TooLarge):
        sb.files.download("/root/up/src.bin", dest, max_bytes=3)
    assert dest.read_bytes() == b"keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["down.bin", "src.bin"]
    # sparse stays sparse
    sb.run("dd if=/dev/zero of=/root/sparse bs=1 count=1 seek=33554431 2>/dev/null", check=True)
    sparse = tmp_path / "sparse"
    sb.files.download("/root/sparse", sparse)
    assert sparse.stat().st_size == 32 << 20 and sparse.stat().st_blocks * 512 < 1 << 20


def test_stat_list_exists(sb):
    f = sb.files
    f.mkdir("/root/d")
    f.write("/root/d/x", b"12345")
    f.write("/root/d/a", b"")
    sb.run("ln -s x /root/d/link", check=True)
    st = f.stat("/root/d/x")
    assert st.is_file and not st.is_dir and st.size == 5 and st.uid == 0 and st.name == "/root/d/x"
    assert st.mtime is not None and st.mtime_ns > 0
    assert f.stat("/root/d").is_dir
    names = [e.name for e in f.list("/root/d")]
    assert names == ["a", "link", "x"]
    assert [e for e in f.list("/root/d") if e.name == "link"][0].is_symlink
    assert f.exists("/root/d/x") and not f.exists("/root/d/none")
    assert any(e.name == "root" and e.is_dir for e in f.list())
    with pytest.raises(libspace.NotFound):
        f.list("/root/none")
    with pytest.raises((libspace.NotADirectory, libspace.InvalidArgument)):
        f.list("/root/d/x")


def test_mkdir_remove_rename(sb):
    f = sb.files
    f.mkdir("/root/p/q/r", parents=True, mode=0o700)
    assert f.stat("/root/p/q/r").permissions == 0o700
    with pytest.raises(libspace.AlreadyExists):
        f.mkdir("/root/p")
    with pytest.raises(libspace.NotFound):
        f.mkdir("/root/none/x")
    f.write("/root/p/q/r/file", b"1")
    f.rename("/root/p/q/r/file", "/root/p/moved")
    assert f.read("/root/p/moved") == b"1" and not f.exists("/root/p/q/r/file")
    with pytest.raises(libspace.NotFound):
        f.rename("/root/none", "/root/x")
    f.remove("/root/p/moved")
    with pytest.raises(libspace.SpaceError):
        f.remove("/root/p")  # not empty
    f.remove("/root/p", recursive=True)
    assert not f.exists("/root/p")
    with pytest.raises(libspace.NotFound):
        f.remove("/root/p")

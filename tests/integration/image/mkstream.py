#!/usr/bin/env python3
"""Hostile template streams for `space template receive` (template_stream.sh).

usage: mkstream.py KIND OUT [VICTIM]

Each is a template stream (the header `space template send` writes, then a btrfs send stream of
version 1 whose commands carry correct checksums) that a receiver must refuse, with nothing made:
  dotdot      a file named ../escape              abs        a file named /etc/escape
  symlink     a symlink to VICTIM, then a write through it
  symdir      a symlink to VICTIM's directory, then a file created under it
  device      a character device node             socket     a socket
  clone       a clone from a subvolume that is neither the stream's nor its parent
  owner       a chown to uid 70000                big        4 MiB of writes (receive with --max-bytes 1M)
  badcrc      a command whose checksum is wrong   cut        a stream without its end command
  trailing    bytes after the end command         twosubvol  a second subvol command
  header      a header that is not JSON           digest     a well-formed tree whose digest is not the header's
  incremental a header saying whole, a stream starting with snapshot
"""
import json
import struct
import sys
import uuid

_T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    _T.append(c)


def crc32c(data, crc=0):
    for b in data:
        crc = _T[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


# commands and attributes of version 1
SUBVOL, SNAPSHOT, MKFILE, MKDIR, MKNOD, MKFIFO, MKSOCK, SYMLINK, RENAME, LINK, UNLINK, RMDIR = range(1, 13)
SET_XATTR, REMOVE_XATTR, WRITE, CLONE, TRUNCATE, CHMOD, CHOWN, UTIMES, END = range(13, 22)
A_UUID, A_CTRANSID, A_INO, A_SIZE, A_MODE, A_UID, A_GID, A_RDEV = range(1, 9)
A_PATH, A_PATH_TO, A_PATH_LINK, A_FILE_OFFSET, A_DATA = 15, 16, 17, 18, 19
A_CLONE_UUID, A_CLONE_CTRANSID, A_CLONE_PATH, A_CLONE_OFFSET, A_CLONE_LEN = 20, 21, 22, 23, 24


def tlv(t, v):
    if isinstance(v, str):
        v = v.encode()
    elif isinstance(v, int):
        v = struct.pack("<Q", v)
    return struct.pack("<HH", t, len(v)) + v


def cmd(c, *attrs, bad_crc=False):
    payload = b"".join(tlv(t, v) for t, v in attrs)
    head = struct.pack("<IHI", len(payload), c, 0)
    crc = crc32c(head + payload)
    if bad_crc:
        crc ^= 1
    return struct.pack("<IHI", len(payload), c, crc) + payload


SELF = uuid.uuid4().bytes


def subvol():
    return cmd(SUBVOL, (A_PATH, "evil"), (A_UUID, SELF), (A_CTRANSID, 7))


def stream(*cmds):
    return b"btrfs-stream\0" + struct.pack("<I", 1) + b"".join(cmds)


def header(name, digest="sha256:" + "0" * 64):
    h = json.dumps({"format": 1, "name": name, "id": str(uuid.uuid4()), "digest": digest,
                    "entries": 1, "files": 1, "bytes": 1, "kernel": False, "initrd": False,
                    "image_digest": ""}).encode()
    return b"space-template-stream 1 %d\n" % len(h) + h


def main():
    kind, out = sys.argv[1], sys.argv[2]
    victim = sys.argv[3] if len(sys.argv) > 3 else "/etc/hostname"
    end = cmd(END)
    body = {
        "dotdot": [subvol(), cmd(MKFILE, (A_PATH, "../escape")), end],
        "abs": [subvol(), cmd(MKFILE, (A_PATH, "/etc/escape")), end],
        "symlink": [subvol(), cmd(SYMLINK, (A_PATH, "l"), (A_PATH_LINK, victim)),
                    cmd(WRITE, (A_PATH, "l"), (A_FILE_OFFSET, 0), (A_DATA, b"owned\n")), end],
        "symdir": [subvol(), cmd(SYMLINK, (A_PATH, "d"), (A_PATH_LINK, victim.rsplit("/", 1)[0])),
                   cmd(MKFILE, (A_PATH, "d/planted")), end],
        "device": [subvol(), cmd(MKNOD, (A_PATH, "mem"), (A_MODE, 0o20666), (A_RDEV, (1 << 8) | 1)), end],
        "socket": [subvol(), cmd(MKSOCK, (A_PATH, "sock")), end],
        "clone": [subvol(), cmd(MKFILE, (A_PATH, "f")),
                  cmd(CLONE, (A_PATH, "f"), (A_FILE_OFFSET, 0), (A_CLONE_LEN, 4096), (A_CLONE_UUID, uuid.uuid4().bytes),
                      (A_CLONE_CTRANSID, 1), (A_CLONE_PATH, "etc/shadow"), (A_CLONE_OFFSET, 0)), end],
        "owner": [subvol(), cmd(MKFILE, (A_PATH, "f")), cmd(CHOWN, (A_PATH, "f"), (A_UID, 70000), (A_GID, 0)), end],
        "big": [subvol(), cmd(MKFILE, (A_PATH, "f"))] +
               [cmd(WRITE, (A_PATH, "f"), (A_FILE_OFFSET, i * 49152), (A_DATA, b"x" * 49152)) for i in range(86)] + [end],
        "badcrc": [subvol(), cmd(MKFILE, (A_PATH, "f"), bad_crc=True), end],
        "cut": [subvol(), cmd(MKFILE, (A_PATH, "f"))],
        "trailing": [subvol(), cmd(MKFILE, (A_PATH, "f")), end, b"more"],
        "twosubvol": [subvol(), subvol(), end],
        "digest": [subvol(), cmd(MKFILE, (A_PATH, "rootfs.ext4")),
                   cmd(WRITE, (A_PATH, "rootfs.ext4"), (A_FILE_OFFSET, 0), (A_DATA, b"not what was sent")), end],
        "incremental": [cmd(SNAPSHOT, (A_PATH, "evil"), (A_UUID, SELF), (A_CTRANSID, 7),
                            (A_CLONE_UUID, uuid.uuid4().bytes), (A_CLONE_CTRANSID, 3)), end],
    }
    if kind == "header":
        data = b"space-template-stream 1 9\nnot json!" + stream(subvol(), end)
    else:
        data = header("evil-" + kind) + stream(*body[kind])
    with open(out, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()

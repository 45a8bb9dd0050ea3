#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Host side of the `vsock` test guest: boots it under `space-vmm boot --vsock 3:SOCK`.

  vsock_peer.py VMM GUEST.elf [BYTES]

Serves host port 2000 on SOCK_2000 (reads the guest's "PING-FROM-GUEST\\n", answers
"PONG-FROM-HOST\\n" and closes), connects to SOCK with "CONNECT 1234\\n", expects "OK <port>\\n", then
streams BYTES (default 1 MiB) of a pattern while reading the echo back, and checks every byte.
Passes when the guest prints GUEST-OK vsock and space-vmm exits 0. Exit 77 without /dev/kvm.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peer_common import fail, report_failure, skip, stop, wait_guest  # noqa: E402

PORT, HOST_PORT = 1234, 2000


def pattern(n):
    block = bytes((i * 7 + i // 251) & 0xFF for i in range(65536))
    return (block * (n // len(block) + 1))[:n]


def serve_guest(listener, result):
    """The guest's connection to host port 2000."""
    listener.settimeout(60)
    try:
        conn, _ = listener.accept()
        conn.settimeout(30)
        data = b""
        while not data.endswith(b"\n") and len(data) < 64:
            chunk = conn.recv(64)
            if not chunk:
                break
            data += chunk
        result["ping"] = data
        conn.sendall(b"PONG-FROM-HOST\n")
        conn.close()
    except OSError as e:
        result["error"] = str(e)


def echo_through(sock_path, nbytes, deadline):
    while not os.path.exists(sock_path):
        if time.time() > deadline:
            fail("space-vmm never created %s" % sock_path)
        time.sleep(0.05)
    # A connection made before the guest's driver is up ends when the driver resets the device, and
    # one to a port nobody listens on yet is refused: both close without "OK", so try again.
    attempts = 0
    while True:
        attempts += 1
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(60)
        line = b""
        try:
            s.connect(sock_path)
            s.sendall(b"CONNECT %d\n" % PORT)
            while not line.endswith(b"\n"):
                c = s.recv(1)
                if not c:
                    break
                line += c
        except OSError:
            # The device closed the connection under us (reset by the driver): the same as no answer.
            line = b""
        if line.startswith(b"OK "):
            break
        s.close()
        if line or time.time() > deadline:
            fail("CONNECT %d answered %r after %d attempts" % (PORT, line, attempts))
        time.sleep(0.2)
    data = pattern(nbytes)
    t0 = time.time()
    sender = threading.Thread(target=s.sendall, args=(data,))
    sender.start()
    got = bytearray()
    while len(got) < nbytes:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    sender.join()
    secs = time.time() - t0
    s.close()
    if bytes(got) != data:
        fail("echo differs: %d of %d bytes back, first difference at %d" % (
            len(got), nbytes, next((i for i in range(min(len(got), nbytes)) if got[i] != data[i]), len(got))))
    print("peer: %d bytes echoed through CONNECT %d in %.2f s" % (nbytes, PORT, secs))


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__)
        return 2
    vmm, elf = sys.argv[1], sys.argv[2]
    nbytes = int(sys.argv[3]) if len(sys.argv) == 4 else 1 << 20
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        skip("no /dev/kvm")
    # Unix sockets need a local file system (not the 9p/virtiofs a TMPDIR may be on): /tmp.
    tmp = tempfile.mkdtemp(prefix="space-vsock-", dir="/tmp")
    vm = None
    log = os.path.join(tmp, "console")
    try:
        sock = os.path.join(tmp, "v.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind("%s_%d" % (sock, HOST_PORT))
        listener.listen(1)
        result = {}
        server = threading.Thread(target=serve_guest, args=(listener, result))
        server.start()
        t0 = time.time()
        vm = subprocess.Popen([vmm, "boot", "--kernel", elf, "--memory", "64", "--timeout", "120",
                               "--vsock", "3:" + sock, "--console-log", log, "--cmdline",
                               "vsock.port=%d vsock.hostport=%d vsock.bytes=%d" % (PORT, HOST_PORT, nbytes)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        echo_through(sock, nbytes, t0 + 60)
        server.join(60)
        wait_guest(vm, log, "vsock")
        if result.get("ping") != b"PING-FROM-GUEST\n":
            fail("host port %d got %r (%s)" % (HOST_PORT, result.get("ping"), result.get("error", "")))
        print("PASS: vsock in %.2f s" % (time.time() - t0))
        return 0
    except SystemExit:
        report_failure(vm, log)
        raise
    finally:
        stop(vm)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

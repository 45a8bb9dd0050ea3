#!/usr/bin/env python3
"""Runs space-unpack's tree modes as the library does, for tests/unit/unpack/{copy,receive}.sh.

usage: userns_run.py [--userns] [--stdin] CMD...

CMD with fd 4 a socket whose status lines this prints (fds 3 and 5 passed on as they are), stdout
/dev/null, stdin /dev/null unless --stdin (then this one's, passed on). --userns: in a new user namespace
mapping 0..65535 to $UNPACK_TEST_BASE.., as uid 0 and gid 0 there (the maps written by this process, as
root). Exits with CMD's status (128 + signal); 90 or 91 when the namespace cannot be made or mapped.
"""
import ctypes
import fcntl
import os
import socket
import sys

args = sys.argv[1:]
userns = stdin = False
while args and args[0] in ("--userns", "--stdin"):
    userns |= args[0] == "--userns"
    stdin |= args[0] == "--stdin"
    args = args[1:]
base = int(os.environ.get("UNPACK_TEST_BASE", "300000"))
a, b = socket.socketpair()
ours = fcntl.fcntl(a.fileno(), fcntl.F_DUPFD_CLOEXEC, 10)
theirs = fcntl.fcntl(b.fileno(), fcntl.F_DUPFD_CLOEXEC, 10)
a.close(); b.close()
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(ours)
    if userns and ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:  # CLONE_NEWUSER
        os._exit(90)
    os.write(ready_w, b"u")
    if os.read(go_r, 1) != b"g":
        os._exit(91)
    if userns:
        os.setgroups([])
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
    os.dup2(theirs, 4)
    null = os.open("/dev/null", os.O_RDWR)
    if not stdin:
        os.dup2(null, 0)
    os.dup2(null, 1)
    os.execv(args[0], args)
os.close(theirs)
os.read(ready_r, 1)
ok = b"g"
if userns:
    try:
        for f in ("uid_map", "gid_map"):
            with open("/proc/%d/%s" % (pid, f), "w") as m:
                m.write("0 %d 65536\n" % base)
    except OSError as e:
        print("cannot map the user namespace: %s" % e, file=sys.stderr)
        ok = b"n"
os.write(go_w, ok)
with os.fdopen(ours, "rb") as f:
    for line in f:
        sys.stdout.write(line.decode(errors="replace"))
_, st = os.waitpid(pid, 0)
rc = os.waitstatus_to_exitcode(st)
sys.exit(rc if rc >= 0 else 128 - rc)

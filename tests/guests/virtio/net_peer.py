#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Host side of the `net` test guest: boots it under `space-vmm boot --net ...` and answers its ping.

  net_peer.py VMM GUEST.elf MODE      MODE is one of (or: net_peer.py VMM BZIMAGE linux MODULES_DIR)
    name   a network namespace made here holds a TAP (`ip tuntap add`); space-vmm opens it by name
    fd     the same, but this script opens the TAP itself and hands it over as `--net fd:N`
    jail   space-vmm runs jailed (--jail-root/--jail-uid/--jail-gid/--jail-bind/--netns) and creates
           the TAP in its own network namespace; this script checks the jail from /proc (seccomp
           mode 2, no_new_privs, no capabilities, the uid, its own mnt/net/pid/ipc/uts namespaces, a
           root holding only the bound guest image) and then answers from inside that namespace
    linux  Debian's kernel (BZIMAGE, with virtio_net and its dependencies from MODULES_DIR in a busybox
           initramfs) instead of the test guest: its eth0 must show --mac and ping the TAP's 10.0.2.1

The guest broadcasts an EtherType 0x88b5 frame (repeating it until answered); the reply goes to its
MAC with the payload reversed. Passes when the guest prints GUEST-OK net and space-vmm exits 0.
Exit 77 without /dev/kvm or root. Everything made here (netns, TAP, files, processes) is removed.
"""
import ctypes
import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from peer_common import fail, report_failure, skip, stop, wait_guest  # noqa: E402

ETH_TYPE = 0x88B5
MAC = "02:00:5e:10:20:30"
HOST_MAC = bytes.fromhex("020000aabbcc")
TAP = "sptap0"
JAIL_ID = 61234
CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000


def setns_net(path):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            fail("setns %s: %s" % (path, os.strerror(ctypes.get_errno())))
    finally:
        os.close(fd)


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def answer_ping(timeout):
    """Waits for the guest's broadcast on the TAP and sends the reversed payload to its MAC."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_TYPE))
    s.bind((TAP, ETH_TYPE))
    s.settimeout(timeout)
    try:
        while True:
            frame, addr = s.recvfrom(2048)
            if addr[2] == socket.PACKET_OUTGOING or len(frame) < 14 + 64:
                continue
            src, payload = frame[6:12], frame[14:14 + 64]
            if payload.startswith(b"SPACE-NET-PING ") and src == bytes.fromhex(MAC.replace(":", "")):
                break
    except socket.timeout:
        fail("no ping from the guest within %d s" % timeout)
    s.send(src + HOST_MAC + struct.pack("!H", ETH_TYPE) + payload[::-1])
    s.close()
    print("peer: got the guest's ping, sent the reversed payload")


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def status_fields(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def check_jail(waiter, elf, deadline):
    """The jailed space-vmm (the waiter's child) as seen from the host."""
    child = None
    while time.time() < deadline:
        kids = children(waiter)
        if kids:
            child = kids[0]
            try:
                if status_fields(child).get("Seccomp") == "2":
                    break
            except OSError:
                pass
        time.sleep(0.1)
    else:
        fail("the jailed space-vmm never reached seccomp mode 2")
    st = status_fields(child)
    want = {"Seccomp": "2", "NoNewPrivs": "1", "CapEff": "0000000000000000",
            "CapPrm": "0000000000000000", "CapBnd": "0000000000000000",
            "Uid": "\t".join([str(JAIL_ID)] * 4), "Gid": "\t".join([str(JAIL_ID)] * 4)}
    for k, v in want.items():
        if st.get(k, "").replace(" ", "\t") != v:
            fail("jailed space-vmm: %s is %r, want %r" % (k, st.get(k), v))
    if st.get("NSpid", "").split()[-1] != "1":
        fail("jailed space-vmm is not PID 1 of its PID namespace (NSpid %s)" % st.get("NSpid"))
    for ns in ("mnt", "net", "pid", "ipc", "uts"):
        mine, its = os.readlink("/proc/self/ns/" + ns), os.readlink("/proc/%d/ns/%s" % (child, ns))
        if mine == its:
            fail("jailed space-vmm shares the host's %s namespace (%s)" % (ns, its))
    root = "/proc/%d/root" % child
    files = []
    for d, _, names in os.walk(root):
        files += [os.path.join(d, n)[len(root):] for n in names]
    if files != [elf]:
        fail("the jail's root holds %r, want only %r" % (files, [elf]))
    print("peer: jail ok (pid %d: seccomp 2, no_new_privs, no caps, uid %d, own mnt/net/pid/ipc/uts, root = %s)"
          % (child, JAIL_ID, elf))
    return child


LINUX_MODULES = ["virtio_ring", "virtio", "virtio_mmio", "failover", "net_failover", "virtio_net"]
LINUX_INIT = """#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
exec 0</dev/console 1>/dev/console 2>&1
for m in %(mods)s; do insmod /mod/$m.ko || echo "insmod $m failed"; done
i=0
while [ $i -lt 100 ] && [ ! -e /sys/class/net/eth0 ]; do sleep 0.1; i=$((i + 1)); done
mac=$(cat /sys/class/net/eth0/address)
echo "net: eth0 has MAC $mac"
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
if [ "$mac" = "%(mac)s" ] && ping -c 3 -W 10 10.0.2.1; then echo "GUEST-OK net"; else echo "GUEST-FAIL net"; fi
poweroff -f
"""


def linux_initramfs(mods_dir, out, tmp):
    """A busybox initramfs that loads virtio_net, checks the MAC and pings the host's 10.0.2.1."""
    root = os.path.join(tmp, "initramfs")
    os.makedirs(os.path.join(root, "bin"))
    os.makedirs(os.path.join(root, "mod"))
    for d in ("proc", "sys", "dev"):
        os.makedirs(os.path.join(root, d))
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not os.path.exists(busybox):
        skip("a static busybox is needed")
    shutil.copy(busybox, os.path.join(root, "bin", "busybox"))
    for m in LINUX_MODULES:
        found = [os.path.join(d, f) for d, _, fs in os.walk(mods_dir) for f in fs if f in (m + ".ko", m + ".ko.xz")]
        if not found:
            skip("module %s not in %s" % (m, mods_dir))
        dst = os.path.join(root, "mod", m + ".ko")
        if found[0].endswith(".xz"):
            with open(dst, "wb") as f:
                subprocess.run(["xz", "-dc", found[0]], stdout=f, check=True)
        else:
            shutil.copy(found[0], dst)
    with open(os.path.join(root, "init"), "w") as f:
        f.write(LINUX_INIT % {"mods": " ".join(LINUX_MODULES), "mac": MAC})
    os.chmod(os.path.join(root, "init"), 0o755)
    names = subprocess.run(["find", "."], cwd=root, check=True, capture_output=True).stdout
    with open(out, "wb") as f:
        subprocess.run(["cpio", "-o", "-H", "newc"], cwd=root, input=names, stdout=f, stderr=subprocess.DEVNULL,
                       check=True)


def main():
    modes = ("name", "fd", "jail")
    if not (len(sys.argv) == 4 and sys.argv[3] in modes) and not (len(sys.argv) == 5 and sys.argv[3] == "linux"):
        print(__doc__)
        return 2
    vmm, elf, mode = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        skip("no /dev/kvm")
    if os.geteuid() != 0:
        skip("network namespaces and TAPs need root")
    tmp = tempfile.mkdtemp(prefix="space-net-")
    ns = "spnet%d" % os.getpid()
    made_ns = False
    host_ns = os.open("/proc/self/ns/net", os.O_RDONLY)
    vm = None
    tap_fd = -1
    log = os.path.join(tmp, "console")
    try:
        args = [vmm, "boot", "--kernel", elf, "--memory", "64", "--timeout", "60", "--mac", MAC,
                "--console-log", log]
        pass_fds = ()
        if mode == "linux":
            initrd = os.path.join(tmp, "initrd.cpio")
            linux_initramfs(sys.argv[4], initrd, tmp)
            args = [vmm, "boot", "--kernel", elf, "--initrd", initrd, "--memory", "256", "--timeout", "240",
                    "--mac", MAC, "--console-log", log, "--cmdline", "console=ttyS0 panic=-1"]
        if mode == "jail":
            args += ["--jail-root", os.path.join(tmp, "root"), "--jail-uid", str(JAIL_ID),
                     "--jail-gid", str(JAIL_ID), "--jail-bind", elf, "--netns", "--net", TAP]
        else:
            run("ip", "netns", "add", ns)
            made_ns = True
            setns_net("/run/netns/" + ns)
            with open("/proc/sys/net/ipv6/conf/default/disable_ipv6", "w") as f:
                f.write("1")  # no IPv6 chatter on the TAP
            if mode in ("name", "linux"):
                run("ip", "tuntap", "add", "dev", TAP, "mode", "tap")
                args += ["--net", TAP]
            else:
                tap_fd = os.open("/dev/net/tun", os.O_RDWR)
                fcntl.ioctl(tap_fd, TUNSETIFF, struct.pack("16sH", TAP.encode(), IFF_TAP | IFF_NO_PI))
                args += ["--net", "fd:%d" % tap_fd]
                pass_fds = (tap_fd,)
            run("ip", "link", "set", TAP, "up")
            if mode == "linux":
                run("ip", "addr", "add", "10.0.2.1/24", "dev", TAP)
        t0 = time.time()
        vm = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=pass_fds)
        if tap_fd >= 0:
            os.close(tap_fd)
            tap_fd = -1
        if mode == "jail":
            child = check_jail(vm.pid, elf, t0 + 30)
            setns_net("/proc/%d/ns/net" % child)
        if mode == "linux":
            wait_guest(vm, log, "net", 280)  # Debian's kernel: ping from eth0 (virtio_net) to the TAP
        else:
            answer_ping(45)
            wait_guest(vm, log, "net")
        print("PASS: net (%s) in %.2f s" % (mode, time.time() - t0))
        return 0
    except SystemExit:
        report_failure(vm, log)
        raise
    finally:
        stop(vm)
        if tap_fd >= 0:
            os.close(tap_fd)
        setns_net("/proc/self/fd/%d" % host_ns)
        if made_ns:
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

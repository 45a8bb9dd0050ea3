#!/usr/bin/env python3
"""Stands in for a VMM's virtio-net in tests: opens TAP `tap0` in one network namespace (the "VMM's") and
TAP `eth0` in another (the "guest's") and copies every frame between the two, as space-vmm does between
its TAP and the guest. Frames a TAP that is down refuses are dropped.

usage: tap_relay.py VMM_NETNS_PATH GUEST_NETNS_PATH   -> prints "ready" once both TAPs exist
"""
import ctypes
import fcntl
import os
import select
import struct
import sys

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000
libc = ctypes.CDLL(None, use_errno=True)


def tap_in(netns, name):
    fd = os.open(netns, os.O_RDONLY)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns " + netns)
    os.close(fd)
    t = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(t, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return t


vmm = tap_in(sys.argv[1], "tap0")
guest = tap_in(sys.argv[2], "eth0")
print("ready", flush=True)
while True:
    ready, _, _ = select.select([vmm, guest], [], [])
    for fd in ready:
        frame = os.read(fd, 65536)
        try:
            os.write(guest if fd == vmm else vmm, frame)
        except OSError:
            pass

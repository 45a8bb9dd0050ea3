# SPDX-License-Identifier: Apache-2.0
"""Shared by the host peers of the virtio test guests (net_peer.py, vsock_peer.py)."""
import os
import subprocess
import sys


def skip(why):
    print("SKIP:", why)
    sys.exit(77)


def fail(why):
    print("FAIL:", why)
    sys.exit(1)


def wait_guest(vm, log, name, timeout=60):
    """Waits for space-vmm; passes on its status 0 and GUEST-OK NAME on the console (printed)."""
    try:
        _, err = vm.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        fail("space-vmm did not end")
    console = open(log, errors="replace").read()
    sys.stdout.write(console)
    sys.stdout.write(err.decode(errors="replace"))
    if vm.returncode != 0:
        fail("space-vmm exited %d" % vm.returncode)
    if "GUEST-OK %s\n" % name not in console:
        fail("no GUEST-OK %s on the console" % name)


def report_failure(vm, log):
    """After a failure: stops space-vmm and shows its status, stderr and the console so far."""
    if not vm:
        return
    if vm.poll() is None:
        vm.kill()
    _, err = vm.communicate()
    print("space-vmm status %s, stderr: %s" % (vm.returncode, (err or b"").decode(errors="replace").strip()))
    if os.path.exists(log):
        print("console:\n" + open(log, errors="replace").read())


def stop(vm):
    if vm and vm.poll() is None:
        vm.kill()
        vm.wait()

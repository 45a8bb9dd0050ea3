# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the binding's tests. run.sh prepares the state directory ($SPACE_STATE_DIR: a loop btrfs
pool, jail isolation) with the busybox template $SPACE_PY_TEMPLATE imported from $SPACE_PY_ROOTFS, and
$SPACE_PY_IDS, where every sandbox id a handle was made for is recorded (run.sh checks the host for each)."""

import os
import sys

import pytest

import libspace
from libspace import sandbox as _sandbox

TEMPLATE = os.environ.get("SPACE_PY_TEMPLATE", "tiny")
ROOTFS = os.environ.get("SPACE_PY_ROOTFS", "")
IDS = os.environ.get("SPACE_PY_IDS", "")

for var in ("SPACE_STATE_DIR", "SPACE_PY_ROOTFS", "SPACE_PY_IDS", "SPACE_BUILD_DIR"):
    if not os.environ.get(var):
        sys.exit(f"conftest: {var} is not set: run the tests through tests/python/run.sh (meson test --suite python)")

_wrap = _sandbox.Sandbox._wrap.__func__


def _recording_wrap(cls, ctx, ptr, destroy_on_exit):
    sb = _wrap(cls, ctx, ptr, destroy_on_exit)
    record_id(sb.id)
    return sb


def record_id(sandbox_id: str) -> None:
    with open(IDS, "a") as f:
        f.write(sandbox_id + "\n")


_sandbox.Sandbox._wrap = classmethod(_recording_wrap)


@pytest.fixture(scope="session")
def ctx():
    c = libspace.Context()
    yield c
    c.close()


@pytest.fixture
def sb(ctx):
    """A fresh jail sandbox of the test template, destroyed after the test."""
    with libspace.Sandbox.create(TEMPLATE, isolation="jail", ctx=ctx) as s:
        yield s


@pytest.fixture(autouse=True)
def nothing_left(ctx):
    """Every test leaves no sandbox behind (and none was there before it)."""
    before = libspace.Sandbox.list(ctx=ctx)
    assert before == [], f"sandboxes left by an earlier test: {before}"
    yield
    left = libspace.Sandbox.list(ctx=ctx)
    for info in left:
        libspace.Sandbox.remove(info.id, ctx=ctx)
    assert left == [], f"the test left sandboxes: {left}"

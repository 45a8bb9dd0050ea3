# SPDX-License-Identifier: Apache-2.0
"""examples/agent_steps.py, run as shipped."""

import os
import re
import subprocess
import sys

import libspace
from conftest import TEMPLATE, record_id


def test_agent_steps(ctx):
    example = os.environ.get("SPACE_PY_EXAMPLE") or os.path.join(os.environ["SPACE_SOURCE_DIR"], "examples",
                                                                  "agent_steps.py")
    p = subprocess.run([sys.executable, example, "--template", TEMPLATE, "--isolation", "jail", "--state",
                        ctx.state_dir], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    for sid in set(re.findall(r"\bsb-[a-z0-9]{16}\b", p.stdout)):
        record_id(sid)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "FAIL: 2 + 3 gave -1" in out and "attempt 'add' wins" in out and "PASS: 2 + 3 = 5" in out
    # a fresh sandbox per step (3 steps), one to branch from and two attempts: six different sandboxes
    assert len(set(re.findall(r"\bsb-[a-z0-9]{16}\b", out))) == 6
    assert libspace.Sandbox.list(ctx=ctx) == [] and libspace.Checkpoint.list(ctx=ctx) == []

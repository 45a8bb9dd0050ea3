#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An agent loop on libspace: a fresh sandbox for every step, two attempts branched from a checkpoint.

The "agent" is scripted here (its steps and its two candidate fixes are fixed) so the example runs
anywhere, on any template with a POSIX shell; a real one would ask a model what to do next. The shape is
what counts:

  1. Every step runs in a sandbox of its own, made from the template in milliseconds. The agent carries
     its workspace between steps: written into the step's sandbox before, read back out after. Nothing
     else of a step survives it, so a step cannot leave traps for the next.
  2. At a decision point the agent prepares one sandbox, checkpoints it and forks two attempts from the
     checkpoint: each continues from the same state in its own sandbox. The attempt whose test passes
     wins; its result goes back into the workspace; every sandbox of the branch is destroyed.

usage: agent_steps.py [--template NAME] [--isolation vm|jail] [--state DIR]
Exit status 0 when an attempt fixed the bug and a last fresh step confirmed it.
"""

import argparse
import sys
from typing import Dict, List, Optional

import libspace

WORK = "/work"

# The project the agent works on: a calculator whose test fails.
WORKSPACE: Dict[str, bytes] = {
    "calc.sh": b'#!/bin/sh\n# prints the sum of its two arguments\necho $(( $1 - $2 ))\n',
    "test.sh": b'#!/bin/sh\nout=$(sh /work/calc.sh 2 3)\n'
               b'if [ "$out" = 5 ]; then echo "PASS: 2 + 3 = $out"; else echo "FAIL: 2 + 3 gave $out"; exit 1; fi\n',
}

# What the agent would ask a model for: two candidate fixes, tried side by side.
ATTEMPTS = {
    "multiply": "sed -i 's/\\$1 - \\$2/$1 * $2/' /work/calc.sh",
    "add": "sed -i 's/\\$1 - \\$2/$1 + $2/' /work/calc.sh",
}


def load(sb: libspace.Sandbox, workspace: Dict[str, bytes]) -> None:
    for name, data in workspace.items():
        sb.files.write(f"{WORK}/{name}", data, mode=0o755 if name.endswith(".sh") else 0o644)


def save(sb: libspace.Sandbox) -> Dict[str, bytes]:
    return {f.name: sb.files.read(f"{WORK}/{f.name}") for f in sb.files.list(WORK) if f.is_file}


def step(opts: argparse.Namespace, ctx: libspace.Context, title: str, cmd: str,
         workspace: Dict[str, bytes], check: bool = False) -> libspace.CommandResult:
    """One step in a fresh sandbox: the workspace in, the command, the workspace back out."""
    with libspace.Sandbox.create(opts.template, isolation=opts.isolation, timeout_s=600, ctx=ctx) as sb:
        load(sb, workspace)
        r = sb.run(cmd, text=True, timeout=60, check=check)
        workspace.update(save(sb))
        print(f"step {title!r} in {sb.id}: {r.describe()}")
        for line in r.stdout.splitlines():
            print(f"    | {line}")
        return r


def branch(opts: argparse.Namespace, ctx: libspace.Context, workspace: Dict[str, bytes]) -> Optional[str]:
    """Checkpoints a prepared sandbox and tries every attempt in a fork of it; returns the winner's name."""
    with libspace.Sandbox.create(opts.template, isolation=opts.isolation, timeout_s=600, ctx=ctx) as base:
        load(base, workspace)
        cp = base.checkpoint("before-fix")
        print(f"checkpoint {cp.id} of {base.id}: {len(ATTEMPTS)} attempts branch from it")
        try:
            names: List[str] = list(ATTEMPTS)
            winner = None
            with cp.fork(count=len(names)) as forks:
                for name, sb in zip(names, forks):
                    sb.run(ATTEMPTS[name], check=True)
                    r = sb.run(["sh", f"{WORK}/test.sh"], text=True, timeout=60)
                    print(f"attempt {name!r} in {sb.id}: {r.describe()}: {r.stdout.strip()}")
                    if r.ok and winner is None:
                        winner = name
                        workspace.update(save(sb))
            return winner
        finally:
            cp.remove()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--template", default="base")
    ap.add_argument("--isolation", choices=["vm", "jail"], default=None)
    ap.add_argument("--state", default=None, help="state directory (default: $SPACE_STATE_DIR, /var/lib/space)")
    opts = ap.parse_args()
    workspace = dict(WORKSPACE)
    with libspace.Context(opts.state) as ctx:
        try:
            step(opts, ctx, "look around", f"ls {WORK}; cat {WORK}/calc.sh", workspace)
            if step(opts, ctx, "run the test", f"sh {WORK}/test.sh", workspace).ok:
                print("nothing to fix")
                return 0
            winner = branch(opts, ctx, workspace)
            if winner is None:
                print("no attempt passed the test")
                return 1
            print(f"attempt {winner!r} wins; the fixed calc.sh goes on in the workspace")
            step(opts, ctx, "confirm", f"sh {WORK}/test.sh", workspace, check=True)
        except libspace.CommandError as e:
            print(f"agent_steps: {e}\n{e.stdout}", file=sys.stderr)
            return 1
        except libspace.SpaceError as e:
            print(f"agent_steps: {e}", file=sys.stderr)
            return 1
    print("done: every sandbox of every step is gone")
    return 0


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: Apache-2.0
"""Sandbox.run(): results, CommandError, stdin (never the caller's own), text, env, cwd, users, timeouts,
terminals, streaming callbacks, the output cap, and rollback on failure."""

import os
import signal
import threading
import time

import pytest

import libspace


def test_result_of_a_command(sb):
    r = sb.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert r.argv == ("sh", "-c", "echo out; echo err >&2; exit 3")
    assert (r.exited, r.exit_code, r.signal, r.returncode) == (True, 3, None, 3)
    assert (r.stdout, r.stderr, r.timed_out, r.oom_killed, r.truncated, r.ok) == (b"out\n", b"err\n", False, False, False, False)
    assert r.describe() == "exited with 3" and r.rolled_back_to is None
    ok = sb.run("echo fine")
    assert ok.ok and ok.argv == ("/bin/sh", "-c", "echo fine") and ok.check_returncode() is ok


def test_check_raises_command_error(sb):
    with pytest.raises(libspace.CommandError) as ei:
        sb.run(["sh", "-c", "echo partial; exit 7"], check=True)
    e = ei.value
    assert isinstance(e, libspace.Error) and not isinstance(e, libspace.SpaceError)
    assert e.returncode == 7 and e.stdout == b"partial\n" and e.argv[0] == "sh" and e.result.exit_code == 7
    assert str(e) == "command ['sh', '-c', 'echo partial; exit 7'] exited with 7"
    assert sb.run("true", check=True).ok


def test_signal_and_missing_program(sb):
    r = sb.run(["sh", "-c", "kill -9 $$"])
    assert not r.exited and r.signal == signal.SIGKILL and r.returncode == -9 and r.exit_code is None
    assert r.describe() == "was killed by SIGKILL"
    with pytest.raises(libspace.CommandError):
        r.check_returncode()
    with pytest.raises(libspace.NotFound) as ei:  # like subprocess: FileNotFoundError
        sb.run(["no-such-program"])
    assert isinstance(ei.value, FileNotFoundError) and "no-such-program" in ei.value.message
    assert sb.run("no-such-program").exit_code == 127  # through the shell: its status


def test_stdin(sb, tmp_path):
    assert sb.run(["cat"], input=b"bytes in").stdout == b"bytes in"
    assert sb.run(["cat"], input="text in", text=True).stdout == "text in"
    big = os.urandom(3 << 20)
    assert sb.run(["cat"], input=big).stdout == big
    f = tmp_path / "in"
    f.write_bytes(b"from a file\n")
    with open(f, "rb") as fh:
        assert sb.run(["cat"], stdin=fh).stdout == b"from a file\n"
    with open(f, "rb") as fh:
        assert sb.run(["cat"], stdin=fh.fileno()).stdout == b"from a file\n"


def test_no_stdin_is_never_the_callers(sb):
    # Whatever this process's fd 0 holds, a command without input reads EOF at once.
    r_fd, w_fd = os.pipe()
    os.write(w_fd, b"host stdin must not leak\n")
    saved = os.dup(0)
    try:
        os.dup2(r_fd, 0)
        r = sb.run(["cat"], timeout=10)
    finally:
        os.dup2(saved, 0)
        for fd in (saved, r_fd, w_fd):
            os.close(fd)
    assert r.ok and r.stdout == b"" and not r.timed_out


def test_text_env_cwd_user(sb):
    r = sb.run(["sh", "-c", "printf '\\xff\\xfeok'"], text=True)
    assert r.stdout == "\ufffd\ufffdok"  # invalid UTF-8 from the sandbox is replaced, never raised
    r = sb.run(["sh", "-c", "printf '\\xffok'"], text=True, errors="backslashreplace")
    assert r.stdout == "\\xffok"
    assert sb.run('echo "$A-$B"', env={"A": "1", "B": "two words"}).stdout == b"1-two words\n"
    assert sb.run(["pwd"], cwd="/tmp").stdout == b"/tmp\n"
    assert sb.run(["id", "-u"], uid=1000, gid=1000).stdout == b"1000\n"
    assert sb.run(["id", "-g"], uid=1000, gid=1000).stdout == b"1000\n"


def test_timeout_is_a_result(sb):
    r = sb.run(["sh", "-c", "echo started; sleep 30"], timeout=0.5)
    assert r.timed_out and not r.ok and r.stdout == b"started\n" and r.describe() == "timed out"
    with pytest.raises(libspace.CommandError) as ei:
        sb.run(["sleep", "30"], timeout=0.3, check=True)
    assert "timed out" in str(ei.value)


def test_pty(sb):
    r = sb.run(["sh", "-c", "test -t 1 && echo tty; stty size; echo e >&2"], pty=True, rows=30, cols=100)
    assert r.ok
    out = r.stdout.replace(b"\r\n", b"\n")
    assert b"tty\n" in out and b"30 100\n" in out and b"e\n" in out and r.stderr == b""


def test_streaming_callbacks(sb):
    seen = {"out": [], "err": []}
    r = sb.run(["sh", "-c", "for i in 1 2 3; do echo o$i; echo e$i >&2; done"],
               on_stdout=seen["out"].append, on_stderr=seen["err"].append, capture=False)
    assert r.ok and r.stdout == b"" and r.stderr == b""
    assert b"".join(seen["out"]) == b"o1\no2\no3\n" and b"".join(seen["err"]) == b"e1\ne2\ne3\n"
    texts = []
    sb.run(["sh", "-c", "printf 'h\\303'; sleep 0.1; printf '\\251!'"], text=True, on_stdout=texts.append)
    assert "".join(texts) == "h\u00e9!"  # a character split between chunks is decoded whole


def test_an_exception_in_a_callback_kills_the_command(sb):
    class Stop(Exception):
        pass

    def boom(chunk):
        raise Stop(chunk)

    with pytest.raises(Stop):
        sb.run(["sh", "-c", "echo first; sleep 30; echo never"], on_stdout=boom)
    assert sb.run("echo still fine").stdout == b"still fine\n"


def test_a_callback_cannot_reenter_its_context(sb):
    errors = []

    def reenter(chunk):
        try:
            sb.info()
        except RuntimeError as e:
            errors.append(str(e))

    assert sb.run("echo x", on_stdout=reenter).ok
    assert errors and "callback" in errors[0]


def test_output_cap(sb):
    r = sb.run(["sh", "-c", "head -c 100000 /dev/zero; head -c 10 /dev/zero >&2"], max_output=1000)
    assert r.ok and len(r.stdout) == 1000 and len(r.stderr) == 10 and r.truncated
    r = sb.run(["sh", "-c", "head -c 3000000 /dev/zero"], max_output=None)
    assert len(r.stdout) == 3000000 and not r.truncated


def test_rollback_on_failure(sb):
    sb.files.write("/root/state", b"good\n")
    cp = sb.checkpoint("known-good")
    r = sb.run("echo bad > /root/state; exit 1", rollback_on_failure=True)
    assert r.exit_code == 1 and r.rolled_back_to == cp.id
    assert sb.files.read("/root/state") == b"good\n"
    r = sb.run("echo better > /root/state", rollback_on_failure=True)
    assert r.ok and r.rolled_back_to is None and sb.files.read("/root/state") == b"better\n"
    # checkpoint_first: a fresh checkpoint "before-step", kept only when the step fails
    n = len(sb.checkpoints())
    r = sb.run("echo worse > /root/state; false", rollback_on_failure=True, checkpoint_first=True)
    assert r.rolled_back_to and r.rolled_back_to != cp.id
    assert sb.files.read("/root/state") == b"better\n"
    assert len(sb.checkpoints()) == n + 1
    assert sb.run("true", rollback_on_failure=True, checkpoint_first=True).rolled_back_to is None
    assert len(sb.checkpoints()) == n + 1
    with pytest.raises(libspace.CommandError):
        sb.run("false", rollback_on_failure=True, check=True)
    for c in sb.checkpoints():
        c.remove()


def test_rollback_on_failure_without_checkpoint(sb):
    with pytest.raises(libspace.NotFound) as ei:
        sb.run("false", rollback_on_failure=True)
    assert "checkpoint" in ei.value.message


def test_ctrl_c_stops_a_command(sb):
    # Python's default SIGINT handler would raise inside a ctypes callback, where the exception is lost;
    # the binding records the signal instead, kills the command and raises KeyboardInterrupt from run().
    prev = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            sb.run("while true; do echo x; sleep 0.1; done", timeout=30)
        assert time.monotonic() - t0 < 10
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
        assert sb.run("echo alive").ok
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):  # a silent command: seen when it ends
            sb.run(["sleep", "1"])
    finally:
        signal.signal(signal.SIGINT, prev)

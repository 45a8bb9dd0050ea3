# SPDX-License-Identifier: Apache-2.0
"""Sandbox.start(): a Process with its stdin, signals, terminal size, poll/wait/pump and close."""

import select
import signal
import time

import pytest

import libspace


def test_write_stdin_and_wait(sb):
    with sb.start(["sh", "-c", "read a; echo got:$a; read b; echo got:$b >&2; exit 4"], stdin=True) as p:
        assert p.pid > 0 and p.returncode is None and p.result is None and p.argv[0] == "sh"
        p.write("one\n")
        p.write(b"two\n")
        p.close_stdin()
        r = p.wait(10)
        assert r.exit_code == 4 and r.stdout == b"got:one\n" and r.stderr == b"got:two\n"
        assert p.returncode == 4 and p.result is r and p.stdout == b"got:one\n" and p.stderr == b"got:two\n"
        assert p.wait() is r and p.poll() is r and p.pump() is r
        with pytest.raises(libspace.CommandError):
            p.wait(check=True)
        assert "exited with 4" in repr(p)


def test_no_stdin_unless_asked(sb):
    with sb.start(["cat"]) as p:
        assert p.wait(10).ok and p.stdout == b""
        with pytest.raises(ValueError):
            p.write(b"x")
    with pytest.raises(TypeError):
        sb.start(["cat"], stdin=0)


def test_close_stdin_gives_eof(sb):
    with sb.start(["cat"], stdin=True, text=True) as p:
        p.write("abc")
        p.close_stdin()
        p.close_stdin()  # idempotent
        assert p.wait(10).stdout == "abc"


def test_signals(sb):
    for send, sig in [(lambda p: p.terminate(), signal.SIGTERM), (lambda p: p.kill(), signal.SIGKILL),
                      (lambda p: p.send_signal(signal.SIGINT), signal.SIGINT)]:
        with sb.start(["sleep", "30"]) as p:
            time.sleep(0.1)
            send(p)
            r = p.wait(10)
            assert not r.exited and r.signal == sig and r.returncode == -sig
            p.kill()  # after the end: nothing to signal, no error
    with sb.start(["sleep", "30"]) as p:
        with pytest.raises(ValueError):
            p.send_signal(0)
        with pytest.raises(ValueError):
            p.send_signal(65)
        p.kill()
        p.wait(10)


def test_wait_timeout_and_poll(sb):
    with sb.start(["sh", "-c", "echo early; sleep 1; echo late"]) as p:
        with pytest.raises(TimeoutError):
            p.wait(0.2)
        assert p.poll() is None  # still running
        r = p.wait(10)
        assert r.ok and r.stdout == b"early\nlate\n"


def test_pump_with_a_selector(sb):
    chunks = []
    with sb.start(["sh", "-c", "for i in 1 2 3; do echo $i; sleep 0.1; done"], on_stdout=chunks.append,
                  capture=False) as p:
        fd = p.fileno()
        assert fd >= 0
        while p.result is None:
            select.select([fd], [], [], 5)
            p.pump()
    assert b"".join(chunks) == b"1\n2\n3\n" and p.result.ok and p.stdout == b""


def test_resize(sb):
    with sb.start(["sh", "-c", "read x; stty size"], pty=True, rows=10, cols=20, stdin=True) as p:
        time.sleep(0.2)
        p.resize(40, 120)
        p.write("\n")
        r = p.wait(10)
        assert b"40 120" in r.stdout
    with pytest.raises(ValueError):
        p.resize(0, 10)


def test_close_kills_a_running_process(sb):
    p = sb.start(["sh", "-c", "sleep 30"])
    pid = p.pid
    p.close()
    p.close()
    assert sb.run(f"kill -0 {pid} 2>/dev/null; echo $?").stdout == b"1\n"
    with pytest.raises(ValueError):
        p.pump()


def test_a_callback_exception_is_raised_by_wait(sb):
    def boom(chunk):
        raise KeyError("stop")

    with sb.start(["sh", "-c", "echo a; sleep 30"], on_stdout=boom) as p:
        with pytest.raises(KeyError):
            p.wait(10)

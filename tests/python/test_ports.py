# SPDX-License-Identifier: Apache-2.0
"""Sandbox.connect(port): a server started inside reached through the agent; a port nobody listens on;
a server on the host's loopback is never what a sandbox port reaches."""

import socket
import threading

import pytest

import libspace


def _get(sock, path="/hello.txt"):
    sock.settimeout(20)
    sock.sendall(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def test_connect_reaches_a_server_inside(sb):
    sb.run(["sh", "-c", "mkdir -p /srv && echo 'hello from the sandbox' >/srv/hello.txt && "
                        "httpd -p 127.0.0.1:8000 -h /srv"], check=True)
    with sb.connect(8000) as s:
        reply = _get(s)
    assert reply.startswith(b"HTTP/1.") and b" 200 " in reply.split(b"\r\n", 1)[0], reply[:200]
    assert reply.endswith(b"hello from the sandbox\n")
    # Each call is a connection of its own; one of them outlives the sandbox handle that made it.
    a, b = sb.connect(8000), sb.connect(8000)
    try:
        assert _get(b).endswith(b"hello from the sandbox\n")
        assert _get(a).endswith(b"hello from the sandbox\n")
    finally:
        a.close()
        b.close()


def test_connect_to_a_port_nobody_listens_on(sb):
    with pytest.raises(libspace.PortRefused) as e:
        sb.connect(8001)
    assert isinstance(e.value, ConnectionRefusedError) and "8001" in str(e.value)
    for bad in (0, 65536, -1, True, "80"):
        with pytest.raises(ValueError):
            sb.connect(bad)


def test_connect_never_reaches_the_hosts_loopback(sb):
    host = socket.socket()
    host.bind(("127.0.0.1", 0))
    host.listen(1)
    port = host.getsockname()[1]
    reached = []
    host.settimeout(2)

    def accept():
        try:
            reached.append(host.accept())
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    try:
        with pytest.raises(libspace.PortRefused):
            sb.connect(port)
    finally:
        t.join()
        host.close()
    assert reached == [], "a sandbox port reached a listener on the host's loopback"

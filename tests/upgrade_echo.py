#!/usr/bin/env python3
"""upgrade_echo.py HOST:PORT [HOST-HEADER [ACCESS-TOKEN [HEADER...]]]: sends an Upgrade request (with the
extra header lines given), then a line after the answer's head; prints "<status line> | <line echoed>"."""
import socket
import sys

h, p = sys.argv[1].rsplit(":", 1)
host = sys.argv[2] if len(sys.argv) > 2 else "x"
tok = "X-Access-Token: %s\r\n" % sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else ""
extra = "".join("%s\r\n" % x for x in sys.argv[4:])
s = socket.create_connection((h, int(p)), timeout=20)
s.sendall(("GET /ws HTTP/1.1\r\nHost: %s\r\n%s%sUpgrade: echo\r\nConnection: Upgrade\r\n\r\n" % (host, tok, extra)).encode())
buf = b""
while b"\r\n\r\n" not in buf:
    d = s.recv(4096)
    if not d:
        break
    buf += d
head, _, rest = buf.partition(b"\r\n\r\n")
s.sendall(b"ping over the upgrade\n")
while b"\n" not in rest:
    d = s.recv(4096)
    if not d:
        break
    rest += d
print(head.split(b"\r\n")[0].decode(), "|", rest.decode().strip())

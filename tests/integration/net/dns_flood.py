#!/usr/bin/env python3
# Runs inside a sandbox: DNS queries to the gateway as fast as a socket takes them.
#   dns_flood.py flood N      N queries for distinct names q<i>.flood.test (each one refused and different,
#                             so no deduplication hides them); prints "sent N in S s"
#   dns_flood.py esc          one query whose first label is ESC ] 0 ; PWNED BEL (a terminal title change);
#                             prints the reply's rcode
#   dns_flood.py ask NAME     one query for NAME; prints the reply's rcode ("timeout" if none)
import socket
import struct
import sys
import time

GW = ("10.201.0.1", 53)


def query(qid, labels):
    head = struct.pack(">HHHHHH", qid & 0xFFFF, 0x0100, 1, 0, 0, 0)
    name = b"".join(bytes([len(l)]) + l for l in labels) + b"\0"
    return head + name + struct.pack(">HH", 1, 1)


def ask(labels):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(query(4242, labels), GW)
    try:
        reply = s.recv(1500)
    except socket.timeout:
        print("timeout")
        return 1
    print("rcode", reply[3] & 0x0F)
    return 0


def flood(n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
    s.connect(GW)
    t0 = time.monotonic()
    for i in range(n):
        s.send(query(i, [b"q%d" % i, b"flood", b"test"]))
        if i % 256 == 255:
            # Drop the answers: nobody reads them, and a full buffer only makes the kernel drop them.
            try:
                while True:
                    s.recv(1500, socket.MSG_DONTWAIT)
            except (BlockingIOError, ConnectionRefusedError):
                pass
    print("sent %d in %.2f s" % (n, time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "flood":
        sys.exit(flood(int(sys.argv[2])))
    if sys.argv[1] == "esc":
        sys.exit(ask([b"\x1b]0;PWNED\x07", b"evil", b"test"]))
    sys.exit(ask([l.encode() for l in sys.argv[2].split(".")]))

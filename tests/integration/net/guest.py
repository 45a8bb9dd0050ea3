#!/usr/bin/env python3
"""Runs inside a sandbox: one network attempt per call, the outcome on stdout.
Exit 0 when the attempt succeeded (an HTTP 200 for get), 1 when it was refused or failed."""
import codecs
import re
import socket
import ssl
import struct
import sys
import time
import urllib.error
import urllib.request

T0 = time.monotonic()


def done(ok, msg):
    print(("OK: " if ok else "REFUSED: ") + str(msg) + " (%d ms)" % ((time.monotonic() - T0) * 1000))
    sys.exit(0 if ok else 1)


def get(url, *headers):
    global T0
    T0 = time.monotonic()  # the attempt, not the imports
    req = urllib.request.Request(url)
    for h in headers:
        k, v = h.split("=", 1)
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            done(r.status == 200, "%d %s" % (r.status, r.read().decode(errors="replace").strip()))
    except urllib.error.HTTPError as e:  # the gateway's refusal says why in its body
        done(False, "%s: %s: %s" % (type(e).__name__, e, e.read().decode(errors="replace").strip()))
    except Exception as e:  # noqa: BLE001 - any failure is the outcome we report
        done(False, "%s: %s" % (type(e).__name__, e))


def tcp(host, port):
    try:
        s = socket.create_connection((host, int(port)), timeout=5)
        s.sendall(b"GET / HTTP/1.1\r\nHost: " + host.encode() + b"\r\n\r\n")
        data = s.recv(100)
        done(bool(data), "got %r" % data[:40])
    except Exception as e:  # noqa: BLE001
        done(False, "%s: %s" % (type(e).__name__, e))


def udp(ip, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    try:
        s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03foo\x04test\x00\x00\x01\x00\x01", (ip, int(port)))
        data = s.recv(1500)
        done(True, "answer of %d bytes" % len(data))
    except Exception as e:  # noqa: BLE001
        done(False, "%s: %s" % (type(e).__name__, e))


def dns(name):
    try:
        done(True, socket.gethostbyname(name))
    except Exception as e:  # noqa: BLE001
        done(False, "%s: %s" % (type(e).__name__, e))


def sni(name, server_name, cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.check_hostname = False
    try:
        with socket.create_connection((name, 443), timeout=5) as s:
            with ctx.wrap_socket(s, server_hostname=server_name) as t:
                t.sendall(b"GET / HTTP/1.1\r\nHost: " + server_name.encode() + b"\r\nConnection: close\r\n\r\n")
                data = t.recv(100)
                done(data.startswith(b"HTTP/1.1 200"), "got %r" % data[:40])
    except Exception as e:  # noqa: BLE001
        done(False, "%s: %s" % (type(e).__name__, e))


def raw(name, port, cafile, payload):
    """Sends payload (backslash escapes decoded: \\r\\n) as is, plain (cafile "-") or over TLS (cafile
    "default": the sandbox's trust store, which holds the gateway's CA), reads until the connection ends
    and prints the status of every response in order. Exit 0 once something was sent and read."""
    data = codecs.decode(payload, "unicode_escape").encode("latin-1")
    got = b""
    try:
        s = socket.create_connection((name, int(port)), timeout=10)
        if cafile != "-":
            ctx = ssl.create_default_context(cafile=None if cafile == "default" else cafile)
            s = ctx.wrap_socket(s, server_hostname=name)
        s.sendall(data)
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except Exception as e:  # noqa: BLE001
        if not got:
            done(False, "%s: %s" % (type(e).__name__, e))
    statuses = re.findall(rb"HTTP/1\.[01] (\d{3}) ", got)
    print(repr(got[:600]))
    done(True, "statuses: " + ",".join(x.decode() for x in statuses))


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def spoof(src, dst):
    """A UDP datagram with a forged source address, sent through a raw socket."""
    payload = b"spoofed"
    udp_h = struct.pack("!HHHH", 4444, 53, 8 + len(payload), 0) + payload
    ip_h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp_h), 1, 0, 64, 17, 0,
                       socket.inet_aton(src), socket.inet_aton(dst))
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        s.sendto(ip_h + udp_h, (dst, 0))
    except OSError as e:  # EPERM, or EPROTONOSUPPORT where the jail denies raw sockets outright
        done(False, "raw socket: %s" % e)
    time.sleep(0.5)
    done(True, "sent")  # sending is not success for the attacker: the test checks the gateway's record


def icmp(ip):
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    except OSError as e:  # EPERM, or EPROTONOSUPPORT where the jail denies raw sockets outright
        done(False, "raw socket: %s" % e)
    s.settimeout(2)
    pkt = struct.pack("!BBHHH", 8, 0, 0, 1, 1) + b"ping"
    pkt = pkt[:2] + struct.pack("!H", checksum(pkt)) + pkt[4:]
    s.sendto(pkt, (ip, 0))
    try:
        while True:
            data, addr = s.recvfrom(1500)
            if data[20] == 0:
                done(True, "echo reply from %s" % addr[0])
    except socket.timeout:
        done(False, "no echo reply")


cmds = {"raw": raw, "get": get, "tcp": tcp, "udp": udp, "dns": dns, "sni": sni, "spoof": spoof, "icmp": icmp}
cmds[sys.argv[1]](*sys.argv[2:])

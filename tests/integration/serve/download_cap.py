#!/usr/bin/env python3
"""Downloads out of a sandbox through `space serve` are capped (issue 14, item 3): started by
download_cap.sh with --max-download 1M. A file over the cap is refused up front with 413 and a JSON
error on the native API (/v1/.../files) and on the E2B plane (GET /files); one under it arrives whole;
a client that stops reading does not make the server hold the file in memory.

Environment: SERVE_URL, SERVE_KEY, SERVE_PID, SERVE_STATE, SPACE_CLI.
"""
import hashlib
import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse

URL = urllib.parse.urlparse(os.environ["SERVE_URL"])
KEY = os.environ["SERVE_KEY"]
SPACE = os.environ["SPACE_CLI"]
STATE = os.environ["SERVE_STATE"]
failures = 0
checks = 0


def check(cond, what):
    global failures, checks
    checks += 1
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures += 1


def call(method, path, body=None, headers=None):
    c = http.client.HTTPConnection(URL.hostname, URL.port, timeout=120)
    h = dict(headers or {})
    if isinstance(body, dict):
        body = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data, r.getheader("Content-Type", "")


def q(base, **args):
    return base + "?" + urllib.parse.urlencode(args)


def in_sandbox(sid, script):
    subprocess.run([SPACE, "exec", sid, "--state", STATE, "--", "sh", "-c", script], check=True)


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


V1 = {"X-API-Key": KEY}
st, data, _ = call("POST", "/v1/sandboxes", {"template": "tiny", "isolation": "jail"}, V1)
if st != 201:
    sys.exit(f"create: {st} {data!r}")
sid = json.loads(data)["id"]

if sys.argv[1:] == ["default"]:
    # The server runs with the default cap (256 MiB): over it refused, and a client that stops reading
    # a large download does not make the server hold the file in memory.
    in_sandbox(sid, "truncate -s 314572800 /root/300m && truncate -s 209715200 /root/200m && "
                    "printf head | dd of=/root/200m conv=notrunc 2>/dev/null")
    st, data, _ = call("GET", q(f"/v1/sandboxes/{sid}/files", path="/root/300m"), None, V1)
    check(st == 413 and b"download limit of 256.0 MiB" in data, f"default cap: 300 MiB refused ({st} {data[:200]!r})")
    pid = int(os.environ["SERVE_PID"])
    before = rss_kib(pid)
    s = socket.create_connection((URL.hostname, URL.port), timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(f"GET {q(f'/v1/sandboxes/{sid}/files', path='/root/200m')} HTTP/1.1\r\nHost: x\r\n"
              f"X-API-Key: {KEY}\r\n\r\n".encode())
    first = s.recv(64)
    time.sleep(2)
    during = rss_kib(pid)
    s.close()
    check(first.startswith(b"HTTP/1.1 200") and during - before < 16 * 1024,
          f"a stalled 200 MiB download: server RSS {before} -> {during} KiB")
    print(f"download-cap (default): {checks} checks, {failures} failed")
    sys.exit(1 if failures or checks != 2 else 0)
in_sandbox(sid, "truncate -s 1099511627776 /root/huge && head -c 2097152 /dev/urandom >/root/two && "
                "head -c 1048576 /dev/urandom >/root/one && head -c 1048577 /dev/zero >/root/over")
one = subprocess.run([SPACE, "exec", sid, "--state", STATE, "--", "cat", "/root/one"], check=True,
                     capture_output=True).stdout

# --- native API ---
t0 = time.monotonic()
st, data, ct = call("GET", q(f"/v1/sandboxes/{sid}/files", path="/root/huge"), None, V1)
ms = (time.monotonic() - t0) * 1000
err = json.loads(data).get("error", {}) if ct.startswith("application/json") else {}
check(st == 413 and err.get("code") == "too_large" and "download limit of 1.0 MiB" in err.get("message", ""),
      f"/v1: a 1 TiB sparse file: 413 too_large naming the limit ({st} {data[:200]!r})")
check(ms < 5000, f"/v1: refused in {ms:.0f} ms")
st, data, _ = call("GET", q(f"/v1/sandboxes/{sid}/files", path="/root/two"), None, V1)
check(st == 413, f"/v1: a 2 MiB file: 413 ({st})")
st, data, _ = call("GET", q(f"/v1/sandboxes/{sid}/files", path="/root/over"), None, V1)
check(st == 413, f"/v1: one byte over the limit: 413 ({st})")
st, data, _ = call("GET", q(f"/v1/sandboxes/{sid}/files", path="/root/one"), None, V1)
check(st == 200 and hashlib.sha256(data).digest() == hashlib.sha256(one).digest(),
      f"/v1: a file of exactly the limit arrives whole ({st}, {len(data)} bytes)")

# --- E2B plane ---
st, data, _ = call("POST", "/sandboxes", {"templateID": "base"}, {"X-API-KEY": KEY})
check(st == 201, f"E2B create ({st})")
sb = json.loads(data) if st == 201 else {}
eid = sb.get("sandboxID", "none")
ENVD = {"X-Access-Token": sb.get("envdAccessToken", ""), "E2b-Sandbox-Id": eid, "E2b-Sandbox-Port": "49983"}
in_sandbox(eid, "truncate -s 1099511627776 /root/huge && head -c 1000 /dev/urandom >/root/small")
st, data, ct = call("GET", "/files?path=%2Froot%2Fhuge", None, ENVD)
body = json.loads(data) if ct.startswith("application/json") else {}
check(st == 413 and body.get("code") == 413 and "download limit of 1.0 MiB" in body.get("message", ""),
      f"E2B /files: a 1 TiB sparse file: 413 with code 413 ({st} {data[:200]!r})")
st, data, _ = call("GET", "/files?path=huge", None, ENVD)
check(st == 413, f"E2B /files: relative path, same refusal ({st})")
st, data, _ = call("GET", "/files?path=%2Froot%2Fsmall", None, ENVD)
check(st == 200 and len(data) == 1000, f"E2B /files: a small file arrives ({st}, {len(data)} bytes)")

print(f"download-cap: {checks} checks, {failures} failed")
sys.exit(1 if failures or checks != 9 else 0)

#!/usr/bin/env python3
"""HTTP checks of `space serve` (started by serve_api.sh with --max-upload 8M --connection-timeout 2
--request-timeout 5).

Environment: SERVE_URL, SERVE_KEY, SERVE_PID, SERVE_STATE, SPACE_CLI. Standard library only.
"""
import concurrent.futures
import hashlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse

URL = urllib.parse.urlparse(os.environ["SERVE_URL"])
KEY = os.environ["SERVE_KEY"]
AUTH = {"X-API-Key": KEY}
failures = 0


def check(cond, what):
    global failures
    if cond:
        print(f"ok   {what}")
    else:
        failures += 1
        print(f"FAIL {what}")
    return cond


def conn(timeout=120):
    return http.client.HTTPConnection(URL.hostname, URL.port, timeout=timeout)


def call(method, path, body=None, headers=None, auth=True, raw=False):
    """One request; returns (status, parsed JSON or bytes, headers)."""
    h = dict(AUTH) if auth else {}
    h.update(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        h.setdefault("Content-Type", "application/json")
    c = conn()
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    if not raw and r.getheader("Content-Type", "").startswith("application/json"):
        data = json.loads(data)
    return r.status, data, r


def early_status(method, path, length):
    """Sends only the headers of a request with a body of length bytes; returns the status answered."""
    s = socket.create_connection((URL.hostname, URL.port), timeout=30)
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nX-API-Key: {KEY}\r\nContent-Length: {length}\r\n\r\n".encode())
    reply = s.recv(4096)
    s.close()
    return int(reply.split(b" ")[1]) if reply.startswith(b"HTTP/1.1 ") else 0


def err_code(data):
    return data.get("error", {}).get("code") if isinstance(data, dict) else None


def create(**fields):
    fields.setdefault("template", "tiny")
    fields.setdefault("isolation", "jail")
    st, data, _ = call("POST", "/v1/sandboxes", fields)
    if st != 201:
        raise RuntimeError(f"create: {st} {data}")
    return data["id"]


def q(base, **args):
    return base + "?" + urllib.parse.urlencode(args)


# --- health and auth ---------------------------------------------------------------------------------
st, data, _ = call("GET", "/v1/health", auth=False)
check(st == 200 and data.get("status") == "ok", "health without a key")
st, data, _ = call("GET", "/v1/templates", auth=False)
check(st == 401 and err_code(data) == "unauthorized", "no key: 401")
st, data, _ = call("GET", "/v1/templates", auth=False, headers={"X-API-Key": "e2b_" + "0" * 64})
check(st == 401, "unknown key: 401")
st, data, _ = call("GET", "/v1/templates", auth=False, headers={"Authorization": "Bearer " + KEY[:-1] + "x"})
check(st == 401, "key with one wrong character: 401")
st, data, _ = call("GET", "/v1/templates", auth=False, headers={"Authorization": "Bearer " + KEY})
check(st == 200 and [t["name"] for t in data["templates"]] == ["tiny"], "Bearer key: templates listed")
st, data, _ = call("GET", "/v1/sandboxes/sb-xxxxxxxxxxxxxxxx", auth=False)
check(st == 401, "auth is checked before the sandbox lookup")

# --- bad requests ------------------------------------------------------------------------------------
st, data, _ = call("POST", "/v1/sandboxes", b'{"template": "tiny",', {"Content-Type": "application/json"})
check(st == 400 and err_code(data) == "bad_json", "malformed JSON: 400")
st, data, _ = call("POST", "/v1/sandboxes", b'{"template": "tiny"} trailing', {"Content-Type": "application/json"})
check(st == 400 and err_code(data) == "bad_json", "text after the JSON value: 400")
st, data, _ = call("POST", "/v1/sandboxes", b'[1, 2]', {"Content-Type": "application/json"})
check(st == 400, "JSON array instead of object: 400")
st, data, _ = call("POST", "/v1/sandboxes", {"template": "tiny", "isolation": "jail", "colour": "red"})
check(st == 400 and err_code(data) == "unknown_field" and "colour" in data["error"]["message"], "unknown field: 400")
st, data, _ = call("POST", "/v1/sandboxes", {"template": "tiny", "cpus": -1})
check(st == 400, "negative cpus: 400")
st, data, _ = call("POST", "/v1/sandboxes", {"template": "tiny", "isolation": "container"})
check(st == 400, "bad isolation: 400")
st, data, _ = call("POST", "/v1/sandboxes", {"template": "no-such-template", "isolation": "jail"})
check(st == 404, "unknown template: 404")
if not os.path.exists("/dev/kvm"):
    st, data, _ = call("POST", "/v1/sandboxes", {"template": "tiny", "isolation": "vm"})
    check(st == 503 and err_code(data) == "isolation_unavailable", f"vm isolation without /dev/kvm: 503 ({st})")
st, data, _ = call("PATCH", "/v1/sandboxes")
check(st == 405, "PATCH on /v1/sandboxes: 405")
st, data, _ = call("GET", "/v1/nothing-here")
check(st == 404 and err_code(data) == "not_found", "unknown endpoint: 404")
for path in ["/v1/sandboxes/sb-aaaaaaaaaaaaaaaa", q("/v1/sandboxes/sb-aaaaaaaaaaaaaaaa/files", path="/x")]:
    for method in ["GET", "DELETE"]:
        st, data, _ = call(method, path)
        check(st == 404, f"{method} {path} of an unknown sandbox: 404")
st, data, _ = call("POST", "/v1/sandboxes/sb-aaaaaaaaaaaaaaaa/exec", {"argv": ["true"]})
check(st == 404, "exec in an unknown sandbox: 404")

# Bodies over the limit: 413, with Content-Length (refused before reading) and chunked.
st = early_status("POST", "/v1/sandboxes", 2 << 20)
check(st == 413, f"2 MiB JSON body announced by Content-Length: 413 before the body ({st})")


def chunked(n):
    yield b'{"template": "'
    for _ in range(n):
        yield b"x" * 65536
    yield b'"}'


c = conn()
c.request("POST", "/v1/sandboxes", body=chunked(32), headers={**AUTH, "Transfer-Encoding": "chunked"},
          encode_chunked=True)
r = c.getresponse()
check(r.status == 413, f"2 MiB chunked JSON body: 413 ({r.status})")
c.close()

# Malformed chunked encoding: a clean 400 from the HTTP layer, and the server goes on.
s = socket.create_connection((URL.hostname, URL.port))
s.sendall(b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: " + KEY.encode() +
          b"\r\nTransfer-Encoding: chunked\r\n\r\nzz-not-hex\r\nabc\r\n0\r\n\r\n")
s.settimeout(10)
reply = s.recv(4096)
s.close()
check(reply.startswith(b"HTTP/1.1 400"), f"broken chunked encoding: 400 ({reply[:20]!r})")

# Oversized headers: refused by the HTTP layer, the server goes on.
s = socket.create_connection((URL.hostname, URL.port))
try:
    s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (256 << 10) + b"\r\n\r\n")
except (BrokenPipeError, ConnectionResetError):
    pass
s.settimeout(10)
try:
    reply = s.recv(4096)
except ConnectionResetError:
    reply = b""
s.close()
check(reply.startswith(b"HTTP/1.1 431"),
      f"256 KiB of headers refused ({reply[:20]!r})")
st, _, _ = call("GET", "/v1/health", auth=False)
check(st == 200, "served after oversized headers")

# A slow client (headers never finished) is dropped after the connection timeout, others are served.
slow = socket.create_connection((URL.hostname, URL.port))
slow.sendall(b"GET /v1/templates HTTP/1.1\r\nHost: x\r\n")
st, _, _ = call("GET", "/v1/health", auth=False)
check(st == 200, "served while a slow client holds a connection")
slow.settimeout(15)
t0 = time.time()
try:
    dropped = slow.recv(4096) == b""
except (ConnectionResetError, socket.timeout):
    dropped = False
check(dropped and time.time() - t0 < 10, "slow client dropped at the connection timeout")
slow.close()

# A body that trickles in (a byte every half second: never idle for the 2 s connection timeout) is cut
# off at the 5 s request timeout, while others are served; a body that stops short of its
# Content-Length is dropped at the connection timeout.
trickle = socket.create_connection((URL.hostname, URL.port))
trickle.sendall(f"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: {KEY}\r\n"
                f"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n".encode())
t0, cut = time.time(), False
trickle.settimeout(0.5)
while time.time() - t0 < 15:
    try:
        trickle.sendall(b" ")
        if trickle.recv(4096) == b"":
            cut = True
            break
    except socket.timeout:
        continue
    except (BrokenPipeError, ConnectionResetError):
        cut = True
        break
    st, _, _ = call("GET", "/v1/health", auth=False)
    if st != 200:
        break
check(cut and 4 <= time.time() - t0 < 12, f"trickling body cut off at the request timeout ({time.time() - t0:.1f} s)")
trickle.close()
short_body = socket.create_connection((URL.hostname, URL.port))
short_body.sendall(f"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: {KEY}\r\n"
                   f"Content-Length: 100\r\n\r\n{{\"template\":".encode())
short_body.settimeout(15)
try:
    gone = short_body.recv(4096) == b""
except (socket.timeout, ConnectionResetError):
    gone = False
short_body.close()
st, _, _ = call("GET", "/v1/health", auth=False)
check(gone and st == 200, "a body short of its Content-Length: connection closed, server fine")

# --- lifecycle, list, pagination, metadata ----------------------------------------------------------
a = create(env={"GREETING": "hello"}, metadata={"task": "t1", "n": 1}, timeout_s=3600)
b = create(metadata={"task": "t2"}, network={"allow": ["pypi.org", "*.pythonhosted.org"]})
st, data, _ = call("POST", "/v1/sandboxes", {"template": "tiny", "isolation": "jail", "network": "open"})
check(st == 400 and err_code(data) == "invalid", f"network that is not a policy object: 400 ({st} {data})")
st, data, _ = call("POST", "/v1/sandboxes", {"template": "tiny", "isolation": "jail", "network": {"allow": [5]}})
check(st == 400, f"a malformed network policy: 400 ({st} {data})")
st, data, _ = call("GET", f"/v1/sandboxes/{a}")
check(st == 200 and data["status"] == "running" and data["isolation"] == "jail" and
      data["metadata"] == {"task": "t1", "n": 1} and "path" not in data and data.get("expires_ms", 0) > 0,
      "get: running, metadata kept, lifetime set, no host path")
st, data, _ = call("GET", q("/v1/sandboxes", status="running", template="tiny"))
check(st == 200 and {s["id"] for s in data["sandboxes"]} >= {a, b}, "list filtered by status and template")
st, data, _ = call("GET", q("/v1/sandboxes", status="failed"))
check(st == 200 and not any(s["id"] in (a, b) for s in data["sandboxes"]), "status filter excludes")
st, data, _ = call("GET", q("/v1/sandboxes", template="other"))
check(st == 200 and data["sandboxes"] == [], "template filter excludes")
seen, cursor, pages = [], None, 0
while True:
    args = {"limit": 1}
    if cursor:
        args["cursor"] = cursor
    st, data, _ = call("GET", q("/v1/sandboxes", **args))
    pages += 1
    seen += [s["id"] for s in data["sandboxes"]]
    cursor = data["next_cursor"]
    if not cursor or pages > 10:
        break
check(seen == [a, b], f"pagination with limit=1 walks both sandboxes in order ({pages} pages)")
st, data, _ = call("GET", q("/v1/sandboxes", limit=0))
check(st == 400, "limit=0: 400")
st, data, _ = call("GET", q("/v1/sandboxes", cursor="garbage"))
check(st == 400, "bad cursor: 400")

# --- exec --------------------------------------------------------------------------------------------
st, data, _ = call("POST", f"/v1/sandboxes/{a}/exec",
                   {"argv": ["sh", "-c", "echo $GREETING $EXTRA $(pwd); echo oops >&2; cat; exit 3"],
                    "env": {"EXTRA": "world"}, "cwd": "/tmp", "stdin": "line from stdin\n"})
check(st == 200 and data["exit_code"] == 3 and data["signal"] is None and not data["timed_out"] and
      data["stdout"] == "hello world /tmp\nline from stdin\n" and data["stderr"] == "oops\n",
      f"exec: exit code, env (sandbox + call), cwd, stdin, streams apart ({data})")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/exec", {"argv": ["sleep", "10"], "timeout_ms": 300})
check(st == 200 and data["timed_out"] and data["exit_code"] is None and data["signal"],
      f"exec timeout kills: {data}")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/exec", {"argv": ["sh", "-c", "kill -TERM $$"]})
check(st == 200 and data["signal"] == 15, "exec ended by a signal")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/exec", {"argv": ["no-such-command"]})
check(st == 400 and err_code(data) == "command_not_found", "missing command: 400 command_not_found")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/exec", {"argv": []})
check(st == 400, "empty argv: 400")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/exec", {"argv": ["true"], "tty": True})
check(st == 400 and err_code(data) == "unknown_field", "exec unknown field: 400")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/exec", {"argv": ["printf", "\\377\\376ok\\342\\202\\254"]})
check(st == 200 and data["stdout"] == "\ufffd\ufffdok\u20ac", f"invalid UTF-8 output is replaced: {data}")
# (Printable bytes: NULs would come back as "\\u0000", six times the bytes, and make this slow.)
st, data, _ = call("POST", f"/v1/sandboxes/{a}/exec", {"argv": ["sh", "-c", "head -c 20000000 /dev/zero | tr '\\0' a"]})
check(st == 200 and data["stdout_truncated"] and len(data["stdout"]) == 16 << 20, "output capped at 16 MiB")

# Streaming: lines arrive while the process runs, in order, and end with the result.
for how in ({"path": "?stream=1", "headers": {}}, {"path": "", "headers": {"Accept": "application/x-ndjson"}}):
    c = conn()
    body = json.dumps({"argv": ["sh", "-c", "echo one; sleep 1; echo two >&2; sleep 1; echo three; exit 4"]})
    t0 = time.time()
    c.request("POST", f"/v1/sandboxes/{a}/exec" + how["path"], body=body,
              headers={**AUTH, "Content-Type": "application/json", **how["headers"]})
    r = c.getresponse()
    lines, first_at = [], None
    for raw in r:
        if first_at is None:
            first_at = time.time() - t0
        lines.append(json.loads(raw))
    c.close()
    got = [(x.get("stream"), x.get("data")) for x in lines[:-1]]
    check(r.status == 200 and r.getheader("Content-Type") == "application/x-ndjson" and
          got == [("stdout", "one\n"), ("stderr", "two\n"), ("stdout", "three\n")] and
          lines[-1] == {"exit_code": 4, "signal": None, "timed_out": False, "oom_killed": False},
          f"stream {how}: order and result ({lines})")
    check(first_at is not None and first_at < 1.5, f"first line came before the process ended ({first_at:.2f} s)")
c = conn()
c.request("POST", f"/v1/sandboxes/{a}/exec?stream=1", body=json.dumps({"argv": ["no-such-command"]}),
          headers=AUTH)
r = c.getresponse()
last = json.loads(r.read().splitlines()[-1])
c.close()
check(err_code(last) == "command_not_found", "stream: a missing command ends with an error line")

# A client that leaves a streaming exec: the process is killed (the sandbox keeps going).
c = conn()
c.request("POST", f"/v1/sandboxes/{a}/exec?stream=1",
          body=json.dumps({"argv": ["sh", "-c", "while true; do echo tick; sleep 0.1; done"]}), headers=AUTH)
r = c.getresponse()
r.readline()
c.sock.shutdown(socket.SHUT_RDWR)
c.close()
time.sleep(1.5)
st, data, _ = call("POST", f"/v1/sandboxes/{a}/exec", {"argv": ["sh", "-c", "ps | grep -c '[w]hile true' || true"]})
check(st == 200 and data["stdout"].strip() == "0", f"process of a departed stream client was killed ({data})")

# --- files -------------------------------------------------------------------------------------------
content = os.urandom(5 << 20)
st, data, _ = call("PUT", q(f"/v1/sandboxes/{a}/files", path="/root/new/dir/blob.bin", mode="0600"), content,
                   {"Content-Type": "application/octet-stream"})
check(st == 201 and data["size"] == len(content) and data["mode"] == 0o600 and data["type"] == "file",
      f"upload 5 MiB into a new directory ({st} {data})")
st, got, _ = call("GET", q(f"/v1/sandboxes/{a}/files", path="/root/new/dir/blob.bin"), raw=True)
check(st == 200 and hashlib.sha256(got).digest() == hashlib.sha256(content).digest(), "download: same bytes")
c = conn()
c.request("PUT", q(f"/v1/sandboxes/{a}/files", path="/root/chunked.txt"),
          body=iter([b"part one, ", b"part two"]), headers=AUTH, encode_chunked=True)
r = c.getresponse()
r.read()
c.close()
st, got, _ = call("GET", q(f"/v1/sandboxes/{a}/files", path="/root/chunked.txt"), raw=True)
check(got == b"part one, part two", "chunked upload")
st, data, _ = call("PUT", q(f"/v1/sandboxes/{a}/files", path="/root/empty"), b"")
st2, got, _ = call("GET", q(f"/v1/sandboxes/{a}/files", path="/root/empty"), raw=True)
check(st == 201 and st2 == 200 and got == b"", "empty file round trip")
st, data, _ = call("GET", q(f"/v1/sandboxes/{a}/files/stat", path="/root/new/dir/blob.bin"))
check(st == 200 and data["size"] == len(content) and data["mtime_ms"] > 0, "stat")
st, data, _ = call("GET", q(f"/v1/sandboxes/{a}/files/list", path="/root/new/dir"))
check(st == 200 and [e["name"] for e in data["entries"]] == ["blob.bin"], f"list: only the file, no temp ({data})")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/files/mkdir", {"path": "/srv/a/b"})
st2, data2, _ = call("GET", q(f"/v1/sandboxes/{a}/files/stat", path="/srv/a/b"))
check(st == 201 and st2 == 200 and data2["type"] == "dir", "mkdir with parents")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/files/mkdir", {"path": "/srv/x/y", "parents": False})
check(st == 404, f"mkdir without parents, parent missing: 404 ({st})")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/files/mkdir", {"path": "relative"})
check(st == 400, "relative path: 400")
st, data, _ = call("DELETE", q(f"/v1/sandboxes/{a}/files", path="/srv"))
check(st == 400, f"removing a non-empty dir without recursive: 400 ({st} {data})")
st, data, _ = call("DELETE", q(f"/v1/sandboxes/{a}/files", path="/srv", recursive=1))
st2, _, _ = call("GET", q(f"/v1/sandboxes/{a}/files/stat", path="/srv"))
check(st == 204 and st2 == 404, "recursive remove")
st, data, _ = call("GET", q(f"/v1/sandboxes/{a}/files", path="/nonexistent"))
check(st == 404, "download of a missing file: 404")
st, data, _ = call("GET", q(f"/v1/sandboxes/{a}/files", path="/root"))
check(st == 400 and err_code(data) == "is_directory", "download of a directory: 400")
st, data, _ = call("GET", f"/v1/sandboxes/{a}/files")
check(st == 400, "files without path: 400")
# Over --max-upload (8M): 413, and no file, whole or partial, appears.
st = early_status("PUT", q(f"/v1/sandboxes/{a}/files", path="/root/too-big"), 9 << 20)
check(st == 413, f"upload over --max-upload with Content-Length: 413 before the body ({st})")
c = conn()
c.request("PUT", q(f"/v1/sandboxes/{a}/files", path="/root/too-big"), body=(b"\0" * (1 << 20) for _ in range(9)),
          headers=AUTH, encode_chunked=True)
r = c.getresponse()
r.read()
c.close()
check(r.status == 413, f"chunked upload over --max-upload: 413 ({r.status})")
st, data, _ = call("GET", q(f"/v1/sandboxes/{a}/files/list", path="/root"))
names = [e["name"] for e in data["entries"]]
check("too-big" not in names and not any(".upload-" in n for n in names), f"nothing left of refused uploads: {names}")

# --- pause, resume ------------------------------------------------------------------------------------
st, data, _ = call("POST", f"/v1/sandboxes/{a}/pause")
check(st == 200 and data["status"] == "paused", f"pause: 200 paused ({st} {data})")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/exec", {"argv": ["true"]})
check(st == 409 and err_code(data) == "busy", "exec in a paused sandbox: 409 busy")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/timeout", {"timeout_s": 60})
check(st == 409 and err_code(data) == "busy", "timeout of a paused sandbox: 409 busy")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/pause", {"colour": 1})
check(st == 400 and err_code(data) == "unknown_field", "pause with an unknown field: 400")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/resume", {})
check(st == 200 and data["status"] == "running", "resume: 200 running")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/exec", {"argv": ["echo", "back"]})
check(st == 200 and data["stdout"] == "back\n", "exec after resume")

# --- lifetimes -----------------------------------------------------------------------------------------
st, data, _ = call("POST", f"/v1/sandboxes/{a}/timeout", {})
check(st == 400 and err_code(data) == "invalid", "timeout without timeout_s: 400")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/timeout", {"timeout_s": 600, "extra": 1})
check(st == 400 and err_code(data) == "unknown_field", "timeout with an unknown field: 400")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/timeout", {"timeout_s": 400 * 86400})
check(st == 400 and err_code(data) == "invalid", "timeout over 366 days: 400")
# Issue 20: one longest lifetime (366 days) in the CLI, the library and the API, named in each refusal.
check("31622400" in json.dumps(data), f"the refused timeout names the limit: {data}")
st, data, _ = call("POST", "/v1/sandboxes", {"template": "tiny", "isolation": "jail", "timeout_s": 366 * 86400 + 1})
check(st == 400 and err_code(data) == "invalid" and "31622400" in json.dumps(data),
      f"create with a lifetime over 366 days: 400 naming the limit ({st} {data})")
st, data, _ = call("POST", "/v1/sandboxes/sb-aaaaaaaaaaaaaaaa/timeout", {"timeout_s": 5})
check(st == 404, "timeout of an unknown sandbox: 404")
short, longer = create(timeout_s=300), create(timeout_s=3)
t0 = time.time()
st, data, _ = call("POST", f"/v1/sandboxes/{longer}/timeout", {"timeout_s": 30})
check(st == 200 and abs(data["expires_ms"] / 1000 - time.time() - 30) < 5, f"timeout extended: expires_ms moved ({data})")
st, data, _ = call("POST", f"/v1/sandboxes/{short}/timeout", {"timeout_s": 2})
check(st == 200 and data["expires_ms"] / 1000 - time.time() < 3, "timeout shortened to 2 s")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/timeout", {"timeout_s": 0})
check(st == 200 and data.get("expires_ms", 0) == 0, "timeout 0: no lifetime")
time.sleep(max(0, t0 + 4.5 - time.time()))
st, data, _ = call("POST", f"/v1/sandboxes/{longer}/exec", {"argv": ["echo", "alive"]})
check(st == 200 and data["stdout"] == "alive\n", "extended sandbox runs past its old 3 s deadline")
gone = False
for _ in range(40):
    st, data, _ = call("GET", f"/v1/sandboxes/{short}")
    if st == 404:
        gone = True
        break
    time.sleep(0.25)
check(gone and time.time() - t0 < 12, f"shortened sandbox gone on time ({time.time() - t0:.1f} s)")
st, data, _ = call("GET", q("/v1/events", sandbox=longer))
kinds = [e["kind"] for e in data["events"]] if st == 200 else []
check(st == 200 and "lifetime" in kinds and all(e["sandbox"] == longer for e in data["events"]),
      f"events of one sandbox, with its lifetime change ({kinds})")
st, page, _ = call("GET", q("/v1/events", limit=2))
st2, page2, _ = call("GET", q("/v1/events", limit=2, after=page["next_after"]))
check(st == 200 and st2 == 200 and len(page["events"]) == 2 and
      page2["events"][0]["seq"] > page["events"][-1]["seq"], "events paged with after/next_after")
st, data, _ = call("GET", q("/v1/events", limit=0))
check(st == 400, "events limit=0: 400")
st, data, resp = call("GET", "/v1/metrics", raw=True)
text = data.decode() if isinstance(data, bytes) else ""
import re
made = re.search(r"^space_create_seconds_count (\d+)$", text, re.M)
running = re.search(r'^space_sandboxes\{state="running"\} (\d+)$', text, re.M)
execs = re.search(r"^space_exec_total (\d+)$", text, re.M)
check(st == 200 and resp.getheader("Content-Type", "").startswith("text/plain") and made and int(made.group(1)) >= 2
      and running and int(running.group(1)) >= 1 and execs and int(execs.group(1)) >= 1
      and "space_gateway_denials_total" in text and 'space_create_seconds_bucket{le="+Inf"}' in text,
      f"metrics: creates, running sandboxes, execs, denials ({text[:300]!r})")
st, _, _ = call("GET", "/v1/metrics", auth=False)
check(st == 401, "metrics without a key: 401")
# One sandbox's usage: samples with the figures of space_sandbox_get_usage, the last read now.
st, data, _ = call("GET", f"/v1/sandboxes/{longer}/metrics")
last = data["samples"][-1] if st == 200 and data.get("samples") else {}
check(last.get("cpus", 0) >= 1 and last.get("memory_bytes", 0) > 0 and last.get("memory_limit_bytes", 0) > 0
      and 0 < last.get("disk_used_bytes", 0) <= last.get("disk_total_bytes", 0)
      and abs(last.get("time_ms", 0) / 1000 - time.time()) < 60, f"sandbox metrics ({st} {data})")
st, data, _ = call("GET", q(f"/v1/sandboxes/{longer}/metrics", start=1, end=2))
check(st == 200 and data["samples"] == [], "sandbox metrics outside their time: none")
st, data, _ = call("GET", q(f"/v1/sandboxes/{longer}/metrics", start="soon"))
check(st == 400, "sandbox metrics with a bad start: 400")
st, data, _ = call("GET", "/v1/sandboxes/sb-aaaaaaaaaaaaaaaa/metrics")
check(st == 404, "metrics of no sandbox: 404")
call("DELETE", f"/v1/sandboxes/{longer}")

# --- checkpoints, rollback, fork ---------------------------------------------------------------------
call("PUT", q(f"/v1/sandboxes/{a}/files", path="/root/state.txt"), b"one")
st, cp, _ = call("POST", f"/v1/sandboxes/{a}/checkpoints", {"name": "v1"})
check(st == 201 and cp["id"].startswith("cp-") and cp["name"] == "v1" and cp["sandbox"] == a and "path" not in cp,
      f"checkpoint: 201 ({st} {cp})")
st, cp2, _ = call("POST", f"/v1/sandboxes/{a}/checkpoints")
check(st == 201 and cp2["name"] is None, "checkpoint without a body")
st, data, _ = call("GET", f"/v1/sandboxes/{a}/checkpoints")
check(st == 200 and [c["id"] for c in data["checkpoints"]] == [cp["id"], cp2["id"]], "checkpoints listed, oldest first")
call("PUT", q(f"/v1/sandboxes/{a}/files", path="/root/state.txt"), b"two")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/rollback", {"checkpoint": cp["id"]})
check(st == 200 and data["status"] == "running", f"rollback: 200 ({st} {data})")
st, got, _ = call("GET", q(f"/v1/sandboxes/{a}/files", path="/root/state.txt"), raw=True)
check(got == b"one", f"rollback restored the file ({got!r})")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/rollback", {"checkpoint": "cp-aaaaaaaaaaaaaaaa"})
check(st == 404, f"rollback to an unknown checkpoint: 404 ({st})")
st, data, _ = call("POST", f"/v1/sandboxes/{a}/rollback", {})
check(st == 400, "rollback without a checkpoint: 400")
st, data, _ = call("POST", f"/v1/checkpoints/{cp['id']}/fork", {"count": 2})
forks = [s["id"] for s in data.get("sandboxes", [])] if st == 201 else []
check(st == 201 and len(forks) == 2 and a not in forks, f"fork 2: 201 ({st} {data})")
for f in forks:
    st, got, _ = call("GET", q(f"/v1/sandboxes/{f}/files", path="/root/state.txt"), raw=True)
    check(got == b"one", "a fork has the checkpoint's files")
    call("DELETE", f"/v1/sandboxes/{f}")
st, data, _ = call("POST", f"/v1/checkpoints/{cp['id']}/fork", {"count": 65})
check(st == 400, "fork of 65: 400")
st, data, _ = call("GET", f"/v1/checkpoints/{cp2['id']}")
check(st == 200 and data["id"] == cp2["id"], "get a checkpoint")
st, _, _ = call("DELETE", f"/v1/checkpoints/{cp2['id']}")
st2, _, _ = call("GET", f"/v1/checkpoints/{cp2['id']}")
check(st == 204 and st2 == 404, "delete a checkpoint, then 404")
call("DELETE", f"/v1/checkpoints/{cp['id']}")

# --- delete ------------------------------------------------------------------------------------------
st, _, _ = call("DELETE", f"/v1/sandboxes/{b}")
st2, _, _ = call("GET", f"/v1/sandboxes/{b}")
st3, _, _ = call("DELETE", f"/v1/sandboxes/{b}")
check(st == 204 and st2 == 404 and st3 == 404, "delete, then 404")


# --- 20 concurrent clients ---------------------------------------------------------------------------
def worker(i):
    try:
        sid = create(env={"N": str(i)})
    except RuntimeError as e:
        print(e)
        return False
    st, data, _ = call("POST", f"/v1/sandboxes/{sid}/exec", {"argv": ["sh", "-c", "echo $N"]})
    ok = st == 200 and data["stdout"] == f"{i}\n"
    st2, _, _ = call("DELETE", f"/v1/sandboxes/{sid}")
    return ok and st2 == 204


t0 = time.time()
with concurrent.futures.ThreadPoolExecutor(20) as pool:
    results = list(pool.map(worker, range(20)))
check(all(results), f"20 concurrent create/exec/destroy: {results.count(True)}/20 in {time.time() - t0:.1f} s")
st, data, _ = call("GET", "/v1/sandboxes")
check([s["id"] for s in data["sandboxes"]] == [a], "after the concurrent run only the first sandbox is left")

# --- the reaper ends sandboxes whose lifetime is over, with no request to trigger it ----------------
import sqlite3  # noqa: E402  (read-only look at the store: any API call would reap by itself)

short = create(timeout_s=1)
deadline, status = time.time() + 20, None
while time.time() < deadline:
    time.sleep(1)
    db = sqlite3.connect(f"file:{os.environ['SERVE_STATE']}/space.db?mode=ro", uri=True, timeout=10)
    status = db.execute("SELECT status FROM sandboxes WHERE id = ?", (short,)).fetchone()[0]
    db.close()
    if status == "destroyed":
        break
check(status == "destroyed", f"the server's reaper destroyed an expired sandbox ({status})")

# --- sandboxes outlive the server --------------------------------------------------------------------
os.kill(int(os.environ["SERVE_PID"]), signal.SIGKILL)
time.sleep(0.3)
out = subprocess.run([os.environ["SPACE_CLI"], "ls", "--json", "--state", os.environ["SERVE_STATE"]],
                     capture_output=True, text=True)
listed = {s["id"]: s["status"] for s in json.loads(out.stdout or "[]")}
check(listed.get(a) == "running", f"server killed: the sandbox still runs ({listed})")
out = subprocess.run([os.environ["SPACE_CLI"], "exec", a, "--state", os.environ["SERVE_STATE"], "--", "echo", "alive"],
                     capture_output=True, text=True)
check(out.stdout == "alive\n", "and it still runs commands")

print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)

#!/usr/bin/env python3
"""The E2B plane of `space serve` on the wire: control-plane status codes and error bodies, Connect
framing of process.Process/Start (envelopes, end-of-stream, errors), unary Connect errors, /files in
both upload formats and with chunked bodies, per-sandbox envd access tokens (and the sandbox they name
without E2b-Sandbox-Id), lifetimes that change (setTimeout), pause and resume through connect.

Environment: SERVE_URL, SERVE_KEY.
"""
import base64
import http.client
import json
import os
import struct
import sys
import time
import urllib.parse

url = urllib.parse.urlparse(os.environ["SERVE_URL"])
KEY = os.environ["SERVE_KEY"]
failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures += 1


def call(method, path, body=None, headers=None, chunked=False):
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    h = dict(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        h.setdefault("Content-Type", "application/json")
    if chunked:
        c.putrequest(method, path)
        for k, v in {**h, "Transfer-Encoding": "chunked"}.items():
            c.putheader(k, v)
        c.endheaders()
        for i in range(0, len(body), 7):
            part = body[i:i + 7]
            c.send(b"%x\r\n%s\r\n" % (len(part), part))
        c.send(b"0\r\n\r\n")
    else:
        c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data, r.getheader("Content-Type", "")


API = {"X-API-KEY": KEY}

# Control plane: auth, create with a chunked body, 404 bodies with an integer code.
st, data, _ = call("POST", "/v2/sandboxes", {"templateID": "base"})
check(st == 401, "create without a key: 401")
st, data, ct = call("POST", "/v2/sandboxes", {"templateID": "base", "envVars": {"A": "1"}, "secure": True,
                                              "metadata": {"k": "v"}}, API, chunked=True)
check(st == 201 and ct.startswith("application/json"), f"create (chunked body): 201 ({st} {data[:200]})")
sb = json.loads(data) if st == 201 else {}
sid = sb.get("sandboxID", "none")
TOKEN = sb.get("envdAccessToken", "")
check(sb.get("envdVersion") and TOKEN.startswith("sbt_") and TOKEN != KEY and sb.get("domain") is None,
      "Sandbox JSON: envdVersion, an envdAccessToken of its own (not the API key), domain null")
st, data, _ = call("POST", "/sandboxes", {"templateID": "no-such"}, API)
check(st == 404 and json.loads(data).get("code") == 404, "unknown template: 404 with code 404")
st, data, _ = call("GET", "/sandboxes/sb-nope", None, API)
check(st == 404 and json.loads(data).get("code") == 404, "info of an unknown sandbox: code 404")
st, data, _ = call("GET", f"/sandboxes/{sid}", None, API)
d = json.loads(data) if st == 200 else {}
check(st == 200 and d.get("state") == "running" and d.get("metadata") == {"k": "v"}, "info: running, metadata")
st, data, _ = call("GET", "/v2/sandboxes?state=running", None, API)
check(st == 200 and any(s["sandboxID"] == sid for s in json.loads(data)), "list shows it")
st, data, _ = call("GET", "/v2/sandboxes?limit=0", None, API)
check(st == 400, "list with limit=0: 400")
st, data, _ = call("GET", "/v2/sandboxes?state=paused", None, API)
check(st == 200 and json.loads(data) == [], "list of paused ones is empty")
st, data, _ = call("POST", f"/v2/sandboxes/{sid}/connect", {"timeout": 300}, API)
TOKEN2 = json.loads(data).get("envdAccessToken", "") if st == 200 else ""
check(st == 200 and TOKEN2.startswith("sbt_") and TOKEN2 != TOKEN, "connect: 200 with a new access token")

ENVD = {"X-Access-Token": TOKEN, "E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983"}


def envelopes(data):
    out = []
    while len(data) >= 5:
        flags, n = struct.unpack(">BI", data[:5])
        out.append((flags, json.loads(data[5:5 + n])))
        data = data[5 + n:]
    check(not data, "stream: whole envelopes only")
    return out


def start(req, headers=ENVD):
    msg = json.dumps(req).encode()
    return call("POST", "/process.Process/Start", struct.pack(">BI", 0, len(msg)) + msg,
                {**headers, "Content-Type": "application/connect+json", "Connect-Protocol-Version": "1"})


# Start: start event first, data as base64, end event, then the end-of-stream envelope.
st, data, ct = start({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "echo $A; echo e >&2; exit 4"]},
                      "stdin": False})
check(st == 200 and ct == "application/connect+json", "Start: 200 application/connect+json")
ev = envelopes(data)
check(ev and "start" in ev[0][1]["event"] and ev[0][1]["event"]["start"]["pid"] > 0, "first event: start")
out = b"".join(base64.b64decode(e["event"]["data"]["stdout"]) for f, e in ev if f == 0 and "data" in e["event"]
               and "stdout" in e["event"]["data"])
err = b"".join(base64.b64decode(e["event"]["data"]["stderr"]) for f, e in ev if f == 0 and "data" in e["event"]
               and "stderr" in e["event"]["data"])
check(out == b"1\n" and err == b"e\n", f"stdout/stderr with the sandbox env ({out!r} {err!r})")
end = [e["event"]["end"] for f, e in ev if f == 0 and "end" in e["event"]]
check(end and end[0]["exitCode"] == 4 and end[0]["exited"], "end event: exit code 4")
check(ev and ev[-1] == (2, {}), "last envelope: end-of-stream {}")
# Bad requests end the stream with an error.
st, data, _ = start({"process": {"args": []}})
ev = envelopes(data)
check(st == 200 and ev and ev[-1][0] == 2 and ev[-1][1]["error"]["code"] == "invalid_argument",
      "Start without cmd: end-of-stream error invalid_argument")
st, data, _ = call("POST", "/process.Process/Start", b"\x01\x00\x00\x00\x02{}",
                   {**ENVD, "Content-Type": "application/connect+json"})
check(envelopes(data)[-1][1]["error"]["code"] == "invalid_argument", "compressed envelope refused")
st, data, _ = start({"process": {"cmd": "/no/such"}})
ev = envelopes(data)
check(ev and ev[-1][0] == 2 and "error" in ev[-1][1], "a command that does not exist: stream error")

# Unary errors: JSON with a string code and the matching status.
st, data, ct = call("POST", "/process.Process/SendSignal", {"process": {"pid": 99999}, "signal": "SIGNAL_SIGKILL"},
                    ENVD)
check(st == 404 and json.loads(data)["code"] == "not_found" and ct.startswith("application/json"),
      "SendSignal to no process: 404 not_found")
st, data, _ = call("POST", "/process.Process/Update", {"process": {"pid": 99999}, "pty": {"size": {"cols": 9, "rows": 9}}},
                   ENVD)
check(st == 404 and json.loads(data)["code"] == "not_found", f"Update of no process: 404 not_found ({st})")
st, data, _ = call("POST", "/process.Process/Update", {"process": {"pid": 1}, "pty": {"size": {"cols": 0, "rows": 9}}},
                   ENVD)
check(st == 400 and json.loads(data)["code"] == "invalid_argument", f"Update to 0 columns: 400 invalid_argument ({st})")
# Connect to no process: a stream that only ends, with not_found.
msg = json.dumps({"process": {"pid": 99999}}).encode()
st, data, _ = call("POST", "/process.Process/Connect", struct.pack(">BI", 0, len(msg)) + msg,
                   {**ENVD, "Content-Type": "application/connect+json"})
ev = envelopes(data)
check(st == 200 and len(ev) == 1 and ev[0][0] == 2 and ev[0][1]["error"]["code"] == "not_found",
      "Connect to no process: end-of-stream not_found")
# A user the sandbox does not have (Authorization: Basic base64("USER:"), as the SDK sends it).
st, data, _ = start({"process": {"cmd": "id"}}, {**ENVD, "Authorization": "Basic " + base64.b64encode(b"nosuch:").decode()})
ev = envelopes(data)
check(ev and ev[-1][0] == 2 and ev[-1][1]["error"]["code"] == "invalid_argument"
      and "no user 'nosuch'" in ev[-1][1]["error"]["message"], f"Start as an unknown user: invalid_argument ({ev})")
st, data, _ = call("POST", "/filesystem.Filesystem/Stat", {"path": "/nope"}, ENVD)
check(st == 404 and json.loads(data)["code"] == "not_found", "Stat of a missing path: not_found")
st, data, _ = call("POST", "/filesystem.Filesystem/ListDir", b"not json", ENVD)
check(st == 400 and json.loads(data)["code"] == "invalid_argument", "a body that is not JSON: invalid_argument")

# Watchers polled by the client (CreateWatcher, GetWatcherEvents, RemoveWatcher): the differences since
# the last call; WatchDir's refusals end its stream with the error.
call("POST", "/filesystem.Filesystem/MakeDir", {"path": "/root/wd"}, ENVD)
st, data, _ = call("POST", "/filesystem.Filesystem/CreateWatcher", {"path": "/root/wd"}, ENVD)
wid = json.loads(data).get("watcherId", "") if st == 200 else ""
check(st == 200 and wid, f"CreateWatcher: a watcher id ({st} {data[:200]})")
call("POST", "/files?path=/root/wd/n.txt", b"abc", {**ENVD, "Content-Type": "application/octet-stream"})
st, data, _ = call("POST", "/filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid}, ENVD)
evs = json.loads(data).get("events", []) if st == 200 else []
check({"name": "n.txt", "type": "EVENT_TYPE_CREATE"} in evs and {"name": "n.txt", "type": "EVENT_TYPE_WRITE"} in evs,
      f"GetWatcherEvents: create and write of a new file ({data[:300]})")
st, data, _ = call("POST", "/filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid}, ENVD)
check(st == 200 and json.loads(data).get("events", []) == [], "GetWatcherEvents again: nothing new")
st, data, _ = call("POST", "/filesystem.Filesystem/RemoveWatcher", {"watcherId": wid}, ENVD)
check(st == 200, "RemoveWatcher")
st, data, _ = call("POST", "/filesystem.Filesystem/GetWatcherEvents", {"watcherId": wid}, ENVD)
check(st == 404 and json.loads(data)["code"] == "not_found", "a removed watcher: not_found")
st, data, _ = call("POST", "/filesystem.Filesystem/CreateWatcher", {"path": "/root/nowhere"}, ENVD)
check(st == 404 and json.loads(data)["code"] == "not_found", "CreateWatcher of a missing directory: not_found")
# A directory past the bound (10,000 entries): refused, saying so.
start({"process": {"cmd": "/bin/sh", "args": ["-c", "mkdir -p /root/many && cd /root/many && "
                                                     "i=0; while [ $i -le 10000 ]; do : > f$i; i=$((i+1)); done"]}})
st, data, _ = call("POST", "/filesystem.Filesystem/CreateWatcher", {"path": "/root/many"}, ENVD)
check(st == 429 and json.loads(data)["code"] == "resource_exhausted" and "10000" in json.loads(data)["message"],
      f"CreateWatcher of 10,001 entries: resource_exhausted ({st} {data[:200]})")
start({"process": {"cmd": "/bin/rm", "args": ["-rf", "/root/many"]}})
for path, code in (("/root/nowhere", "not_found"), ("/root/wd/n.txt", "invalid_argument")):
    req = json.dumps({"path": path}).encode()
    st, data, _ = call("POST", "/filesystem.Filesystem/WatchDir", struct.pack(">BI", 0, len(req)) + req,
                       {**ENVD, "Content-Type": "application/connect+json"})
    ev = envelopes(data)
    check(st == 200 and ev and ev[-1][0] == 2 and ev[-1][1]["error"]["code"] == code, f"WatchDir {path}: {code}")

# envd auth: the sandbox's own tokens only, checked before anything else happens.
st, data, _ = call("POST", "/process.Process/List", {}, {**ENVD, "X-Access-Token": "e2b_00"})
check(st == 401 and json.loads(data)["code"] == "unauthenticated", "a wrong access token: 401 unauthenticated")
st, data, _ = call("POST", "/process.Process/List", {}, {**ENVD, "X-Access-Token": KEY})
check(st == 401, "the API key is not an access token: 401")
st, data, _ = call("POST", "/process.Process/List", {}, {**ENVD, "X-Access-Token": TOKEN2})
check(st == 200, "the token from connect works too")
noauth = {k: v for k, v in ENVD.items() if k != "X-Access-Token"}
st, data, _ = call("POST", "/filesystem.Filesystem/MakeDir", {"path": "/tmp/unauth"}, noauth)
check(st == 401 and json.loads(data)["code"] == "unauthenticated", "no access token on an RPC: 401")
st, data, _ = call("POST", "/files?path=%2Ftmp%2Funauth", b"x", {**noauth, "Content-Type": "application/octet-stream"})
check(st == 401 and json.loads(data)["code"] == 401, "no access token on /files: 401 with code 401")
st, data, _ = call("POST", "/filesystem.Filesystem/Stat", {"path": "/tmp/unauth"}, ENVD)
check(st == 404, "refused calls touched nothing")
# A second sandbox: each token opens its own sandbox only.
st, data, _ = call("POST", "/v2/sandboxes", {"templateID": "base", "timeout": 300}, API)
sb_b = json.loads(data) if st == 201 else {}
sid_b, TOKEN_B = sb_b.get("sandboxID", "none"), sb_b.get("envdAccessToken", "")
check(st == 201 and TOKEN_B and TOKEN_B != TOKEN, "a second sandbox with its own token")
ENVD_B = {"X-Access-Token": TOKEN_B, "E2b-Sandbox-Id": sid_b}
st, data, _ = call("POST", "/filesystem.Filesystem/MakeDir", {"path": "/tmp/cross"}, {**ENVD_B, "X-Access-Token": TOKEN})
check(st == 401, "sandbox A's token on sandbox B: 401")
st, data, _ = start({"process": {"cmd": "/bin/sh", "args": ["-c", "touch /tmp/cross"]}}, {**ENVD, "E2b-Sandbox-Id": sid_b})
check(st == 401, "sandbox A's token on sandbox B, streaming Start: 401")
st, data, _ = call("POST", "/filesystem.Filesystem/Stat", {"path": "/tmp/cross"}, ENVD_B)
check(st == 404, "sandbox B untouched by refused calls")

# /files: octet-stream (chunked), multipart with several parts, relative paths, 404 as JSON.
st, data, _ = call("POST", "/files?path=%2Ftmp%2Foct", b"\x00\x01binary" * 100,
                   {**ENVD, "Content-Type": "application/octet-stream"}, chunked=True)
check(st == 200 and json.loads(data)[0]["path"] == "/tmp/oct", "octet-stream upload")
st, data, _ = call("GET", "/files?path=%2Ftmp%2Foct", None, ENVD)
check(st == 200 and data == b"\x00\x01binary" * 100, "download is byte-exact")
body = (b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/p1\"\r\n"
        b"Content-Type: application/octet-stream\r\n\r\none\r\n"
        b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"rel\"\r\n\r\ntwo\r\n--XyZ--\r\n")
st, data, _ = call("POST", "/files", body, {**ENVD, "Content-Type": "multipart/form-data; boundary=XyZ"},
                   chunked=True)
paths = [e["path"] for e in json.loads(data)] if st == 200 else []
check(paths == ["/tmp/p1", "/root/rel"], f"multipart with two parts ({st} {paths})")
st, data, _ = call("GET", "/files?path=rel", None, ENVD)
check(st == 200 and data == b"two", "relative paths are under /root")
st, data, _ = call("GET", "/files?path=%2Fnope", None, ENVD)
check(st == 404 and json.loads(data)["code"] == 404, "download of a missing file: 404 with code 404")
# A refusal given before the body (unknown user, no token) is answered once the body is read, so a client
# still sending a large body gets the answer, not a broken pipe or a reset.
def upload_late_body(hdrs, size):
    """POST /files as an unknown user: the headers, a pause (the server answers meanwhile), then the body."""
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    try:
        c.putrequest("POST", "/files?path=%2Ftmp%2Flate&username=nosuchuser")
        for k, v in {**hdrs, "Content-Type": "application/octet-stream", "Content-Length": str(size)}.items():
            c.putheader(k, v)
        c.endheaders()
        time.sleep(0.2)
        for i in range(0, size, 64 << 10):
            c.send(b"z" * min(64 << 10, size - i))
        r = c.getresponse()
        r.read()
        return r.status
    except OSError as e:
        return type(e).__name__
    finally:
        c.close()


for what, hdrs, want in (("unknown user", ENVD, 400), ("no access token", noauth, 401)):
    got = [upload_late_body(hdrs, size) for size in (100, 256 << 10)]
    check(got == [want] * 2, f"upload refused before its body ({what}): {want}, not a broken pipe ({got})")
# Without E2b-Sandbox-Id (SDKs before 2.15 on /files): the token names the sandbox (B is newer).
st, data, _ = call("GET", "/files?path=%2Ftmp%2Fp1", None, {"X-Access-Token": TOKEN})
check(st == 200 and data == b"one", "no sandbox header: the token's sandbox")
st, _, _ = call("GET", "/files?path=%2Ftmp%2Fp1", None, {**ENVD, "E2b-Sandbox-Id": "sb-gone"})
check(st == 401, "a token for another sandbox id: 401")


def info(i):
    st, data, _ = call("GET", f"/sandboxes/{i}", None, API)
    return json.loads(data) if st == 200 else {"status": st}


# setTimeout: 204; extending keeps the sandbox past its old deadline, shortening ends it on time.
st, data, _ = call("POST", f"/sandboxes/{sid}/timeout", {"timeout": 3}, API)
check(st == 204, f"timeout change: 204 ({st} {data[:100]})")
st, data, _ = call("POST", f"/sandboxes/{sid}/timeout", {"timeout": 600}, API)
check(st == 204, "timeout extended: 204")
st, data, _ = call("POST", f"/sandboxes/{sid}/timeout", {}, API)
check(st == 400, "timeout without a value: 400")
st, data, _ = call("POST", "/sandboxes/sb-nope/timeout", {"timeout": 3}, API)
check(st == 404 and json.loads(data)["code"] == 404, "timeout of an unknown sandbox: 404")
st, data, _ = call("POST", f"/sandboxes/{sid_b}/timeout", {"timeout": 2}, API)
check(st == 204, "sandbox B's timeout shortened to 2 s")
time.sleep(4.5)
st, data, _ = start({"process": {"cmd": "/bin/sh", "args": ["-c", "echo alive"]}, "stdin": False})
ev = envelopes(data)
check(st == 200 and any("data" in e["event"] for f, e in ev if f == 0), "sandbox A lives past its old 3 s deadline")
gone = False
for _ in range(40):           # the server reaps every 5 s
    if info(sid_b).get("status") == 404:
        gone = True
        break
    time.sleep(0.25)
check(gone, "sandbox B is gone after its shortened lifetime")
st, _, _ = call("POST", "/process.Process/List", {}, ENVD_B)
check(st == 502, "envd call for a sandbox that is gone: 502")

# pause: 204, listed as paused, 409 the second time; connect resumes it (201) with a new token.
st, data, _ = call("POST", f"/sandboxes/{sid}/pause", {}, API)
check(st == 204, f"pause: 204 ({st} {data[:100]})")
check(info(sid).get("state") == "paused", "info: paused")
st, data, _ = call("GET", "/v2/sandboxes?state=paused", None, API)
check(st == 200 and [s["sandboxID"] for s in json.loads(data)] == [sid], "list state=paused shows it")
st, data, _ = call("POST", f"/sandboxes/{sid}/pause", {}, API)
check(st == 409 and json.loads(data)["code"] == 409, "pause again: 409")
st, data, _ = call("POST", f"/v2/sandboxes/{sid}/connect", {"timeout": 120}, API)
tok3 = json.loads(data).get("envdAccessToken", "") if st == 201 else ""
check(st == 201 and tok3.startswith("sbt_"), f"connect to a paused sandbox resumes it: 201 ({st})")
check(info(sid).get("state") == "running", "info: running again")
st, data, _ = call("GET", "/files?path=%2Ftmp%2Fp1", None, {**ENVD, "X-Access-Token": tok3})
check(st == 200 and data == b"one", "files kept across pause and resume")
st, data, _ = call("POST", f"/sandboxes/{sid}/resume", {"timeout": 60}, API)
check(st == 409, "resume of a running sandbox: 409")

# kill is 204 then 404; its tokens then reach nothing (502, like E2B's proxy).
st, _, _ = call("DELETE", f"/sandboxes/{sid}", None, API)
check(st == 204, "kill: 204")
st, data, _ = call("DELETE", f"/sandboxes/{sid}", None, API)
check(st == 404 and json.loads(data)["code"] == 404, "kill again: 404")
st, _, _ = call("GET", "/files?path=%2Ftmp%2Fp1", None, ENVD)
check(st == 502, "envd call with the token of a killed sandbox: 502")

print("failures:", failures)
sys.exit(1 if failures else 0)

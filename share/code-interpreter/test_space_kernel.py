#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks of space_kernel.py over HTTP, with plain python3: the kernel runs on a free loopback port in a
subprocess. The matplotlib and pandas checks run when those import (said otherwise).

    python3 share/code-interpreter/test_space_kernel.py [path/to/space_kernel.py]
"""
import base64
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "space_kernel.py")
PASSED = 0


def check(cond, what, detail=None):
    global PASSED
    if not cond:
        raise AssertionError("%s%s" % (what, "" if detail is None else ": %r" % (detail,)))
    PASSED += 1


def start_kernel():
    env = dict(os.environ, SPACE_KERNEL_HOST="127.0.0.1", SPACE_KERNEL_PORT="0", SPACE_KERNEL_KEEPALIVE="1",
               SPACE_KERNEL_EXIT_WITH_STDIN="1")
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, KERNEL], stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            text=True)
    line = proc.stderr.readline()
    m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
    if not m:
        proc.kill()
        raise AssertionError("the kernel did not start: %r" % line)
    took = time.monotonic() - t0
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # its later logs
    return proc, int(m.group(1)), took


class Client:
    def __init__(self, port):
        self.port = port

    def request(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        data = None if body is None else json.dumps(body)
        c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        out = r.status, r.getheader("Content-Type") or "", r.read()
        c.close()
        return out

    def json(self, method, path, body=None, status=200):
        st, _, raw = self.request(method, path, body)
        check(st == status, "%s %s answers %d" % (method, path, status), (st, raw))
        return json.loads(raw) if raw else None

    def execute(self, code, **kw):
        body = dict(kw, code=code)
        st, ctype, raw = self.request("POST", "/execute", body)
        check(st == 200, "execute answers 200", (st, raw))
        check(ctype.startswith("application/x-ndjson"), "execute answers NDJSON", ctype)
        return Run([json.loads(x) for x in raw.decode().splitlines() if x.strip()])


class Run:
    def __init__(self, msgs):
        self.msgs = msgs
        self.stdout = "".join(m["text"] for m in msgs if m["type"] == "stdout")
        self.stderr = "".join(m["text"] for m in msgs if m["type"] == "stderr")
        self.results = [m for m in msgs if m["type"] == "result"]
        self.main = next((m for m in self.results if m.get("is_main_result")), None)
        self.others = [m for m in self.results if not m.get("is_main_result")]
        self.error = next((m for m in msgs if m["type"] == "error"), None)
        counts = [m["execution_count"] for m in msgs if m["type"] == "number_of_executions"]
        self.count = counts[-1] if counts else None

    @property
    def text(self):
        return self.main["text"] if self.main else None


def raw_http(port, path, body, version="HTTP/1.0"):
    """A socket with the request sent (the answer still to read)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    data = json.dumps(body).encode()
    s.sendall(("POST %s %s\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
               % (path, version, len(data))).encode() + data)
    return s


def read_head(f):
    status = f.readline()
    headers = {}
    while True:
        line = f.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        k, _, v = line.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers


def importable(name):
    return subprocess.run([sys.executable, "-c", "import " + name], capture_output=True).returncode == 0


def main():
    proc, port, took = start_kernel()
    try:
        run_checks(port, took)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    print("space_kernel tests: %d checks passed" % PASSED)


def run_checks(port, took):
    k = Client(port)
    check(took < 1.5, "the kernel listens within 1.5 s (a loaded host's margin)", took)
    st, _, raw = k.request("GET", "/health")
    check(st == 200 and raw == b"OK", "GET /health", (st, raw))

    # state between executions, the last expression as the main result, execution counts
    r = k.execute("x = 1")
    check(r.main is None and r.error is None, "an assignment has no result", r.msgs)
    r2 = k.execute("x + 1")
    check(r2.text == "2", "state persists: x + 1 gives 2", r2.msgs)
    check(r2.count == r.count + 1, "number_of_executions counts", (r.count, r2.count))
    check(k.execute("x + 1;").main is None, "a trailing ';' hides the result")
    check(k.execute("print('hi')\nNone").main is None, "None is no result")
    r = k.execute("y = [i * i for i in range(4)]\ny")
    check(r.text == "[0, 1, 4, 9]", "a list result", r.msgs)
    r = k.execute("import asyncio\nawait asyncio.sleep(0.01)\n'awaited'")
    check(r.text == "'awaited'", "top-level await", r.msgs)

    # stdout, stderr, output of subprocesses
    r = k.execute("import sys\nprint('out')\nprint('err', file=sys.stderr)")
    check(r.stdout == "out\n" and r.stderr == "err\n", "stdout and stderr", r.msgs)
    check([m["text"] for m in r.msgs if m["type"] == "stdout"] == ["out\n"], "a print is one message", r.msgs)
    check(all(isinstance(m.get("timestamp"), int) for m in r.msgs if m["type"] in ("stdout", "stderr")),
          "stdout and stderr lines have a timestamp", r.msgs)
    r = k.execute("import os, subprocess\nos.system('echo from-shell')\n"
                  "subprocess.run(['sh', '-c', 'echo to-stderr >&2'])\nprint('after')")
    check("from-shell\n" in r.stdout and "after\n" in r.stdout, "a subprocess's stdout", r.msgs)
    check("to-stderr\n" in r.stderr, "a subprocess's stderr", r.msgs)
    r = k.execute("print('x' * 300000)")
    outs = [m["text"] for m in r.msgs if m["type"] == "stdout"]
    check(len(outs) > 1 and all(len(t.encode()) <= (1 << 20) for t in outs), "long output is split", len(outs))
    check("".join(outs) == "x" * 300000 + "\n", "long output arrives whole")
    r = k.execute("!echo bang-$((6*7))")
    check(r.stdout == "bang-42\n", "an !command line", r.msgs)

    # streaming: the first line arrives while the code still runs (HTTP/1.1 chunked)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/execute", body=json.dumps({"code": "import time\nprint('first')\ntime.sleep(1)\n"
                                                           "print('second')"}))
    resp = c.getresponse()
    check(resp.getheader("Transfer-Encoding") == "chunked", "HTTP/1.1: chunked", resp.getheaders())
    first = json.loads(resp.readline())
    first.pop("timestamp", None)
    t_first = time.monotonic()
    check(first == {"type": "stdout", "text": "first\n"}, "the first line", first)
    rest = [json.loads(x) for x in resp.read().splitlines() if x.strip()]
    check(time.monotonic() - t_first >= 0.8, "the first line came before the code ended (1 s later)",
          time.monotonic() - t_first)
    check(rest[0]["type"] == "stdout" and rest[0]["text"] == "second\n", "the second line", rest)
    c.close()

    # HTTP/1.0: no chunks, the body ends with the connection
    s = raw_http(port, "/execute", {"code": "import time\nprint('a')\ntime.sleep(0.6)\n'b'"})
    f = s.makefile("rb")
    status, headers = read_head(f)
    check(status.startswith(b"HTTP/1.") and b" 200 " in status, "HTTP/1.0: 200", status)
    check("transfer-encoding" not in headers and "content-length" not in headers, "HTTP/1.0: no length, no chunks",
          headers)
    line = json.loads(f.readline())
    t_first = time.monotonic()
    line.pop("timestamp", None)
    check(line == {"type": "stdout", "text": "a\n"}, "HTTP/1.0: the first line", line)
    body = f.read()  # until the server closes
    check(time.monotonic() - t_first >= 0.4, "HTTP/1.0 streams: the first line came before the end",
          time.monotonic() - t_first)
    lines = [json.loads(x) for x in body.splitlines() if x.strip()]
    check(lines[0].get("text") == "'b'" and lines[-1]["type"] == "number_of_executions", "HTTP/1.0 body", lines)
    s.close()
    s = raw_http(port, "/execute", {"code": "import time\ntime.sleep(1.7)"})
    body = s.makefile("rb").read()
    types = [json.loads(x)["type"] for x in body.split(b"\r\n\r\n", 1)[1].splitlines() if x.strip()]
    check(types == ["keepalive", "number_of_executions"], "HTTP/1.0: a keepalive line after 1 s of silence", types)
    s.close()

    # errors
    r = k.execute("def f(d):\n    return d['missing']\n\nf({})")
    e = r.error
    check(e is not None and e["name"] == "KeyError" and e["value"] == "'missing'", "KeyError", r.msgs)
    tb = e["traceback"]
    check("Cell In[" in tb and "----> 4 f({})" in tb and "return d['missing']" in tb and ", in f" in tb,
          "the traceback shows the cell's lines", tb)
    check("space_kernel" not in tb, "no kernel frames in the traceback", tb)
    check(r.main is None, "no result after an error")
    r = k.execute("x = (")
    check(r.error and r.error["name"] == "SyntaxError" and "Cell In[" in r.error["traceback"], "SyntaxError",
          r.msgs)
    r = k.execute("try:\n    1/0\nexcept Exception as e:\n    raise ValueError('wrapped') from e")
    check(r.error["name"] == "ValueError" and "ZeroDivisionError" in r.error["traceback"]
          and "direct cause" in r.error["traceback"], "a chained exception", r.error)
    r = k.execute("import sys\nsys.exit(4)")
    check(r.error and r.error["name"] == "SystemExit", "sys.exit() is an error, the context lives", r.msgs)
    check(k.execute("x").text == "1", "the context lives after SystemExit")

    # env_vars: for that execution only
    r = k.execute("import os\nos.environ.get('SPACE_T'), os.environ.get('HOME') is not None",
                  env_vars={"SPACE_T": "v1"})
    check(r.text == "('v1', True)", "env_vars applied", r.msgs)
    r = k.execute("os.environ.get('SPACE_T')")
    check(r.main is None, "env_vars restored after", r.msgs)
    os_home = k.execute("os.environ['HOME']").text
    k.execute("1", env_vars={"HOME": "/elsewhere"})
    check(k.execute("os.environ['HOME']").text == os_home, "an overridden variable is restored")

    # display() and _repr_*_ methods
    r = k.execute("display(1)\ndisplay('two')\n3")
    check([m["text"] for m in r.others] == ["1", "'two'"] and r.text == "3", "display()", r.msgs)
    r = k.execute("class H:\n    def _repr_html_(self):\n        return '<b>h</b>'\n"
                  "    def _repr_markdown_(self):\n        return '**h**'\n"
                  "    def _repr_json_(self):\n        return {'k': [1, float('nan')]}\n"
                  "    def __repr__(self):\n        return 'H()'\nH()")
    m = r.main
    check(m and m["text"] == "H()" and m["html"] == "<b>h</b>" and m["markdown"] == "**h**", "_repr_html_", r.msgs)
    check(m["json"] == {"k": [1, None]}, "_repr_json_ (NaN as null)", m)
    check("svg" not in m and "png" not in m, "only the representations an object has", m)
    r = k.execute("from IPython.display import display, HTML, Markdown\nimport IPython\n"
                  "display(HTML('<p>x</p>'))\nIPython.display.display(Markdown('*m*'))")
    check([(m.get("html"), m.get("markdown")) for m in r.others] == [("<p>x</p>", None), (None, "*m*")],
          "IPython.display", r.msgs)
    r = k.execute("class M:\n    def _repr_mimebundle_(self, include=None, exclude=None):\n"
                  "        return {'text/html': '<m/>', 'application/vnd.custom+json': {'a': 1}}\nM()")
    check(r.main and r.main.get("html") == "<m/>" and r.main.get("application/vnd.custom+json") == {"a": 1},
          "_repr_mimebundle_", r.msgs)
    r = k.execute("class P:\n    def _repr_png_(self):\n        return b'\\x89PNG-ish'\nP()")
    check(base64.b64decode(r.main["png"]) == b"\x89PNG-ish", "_repr_png_ bytes as base64", r.main)

    # contexts
    ctx = k.json("POST", "/contexts", {"language": "python", "cwd": "/tmp"})
    check(set(ctx) == {"id", "language", "cwd"} and ctx["cwd"] == "/tmp" and ctx["language"] == "python",
          "POST /contexts", ctx)
    cid = ctx["id"]
    check(any(c["id"] == cid for c in k.json("GET", "/contexts")), "GET /contexts lists it")
    r = k.execute("import os\nz = 7\nos.getcwd()", context_id=cid)
    check(r.text == "'/tmp'", "a context's cwd", r.msgs)
    check(k.execute("z").error["name"] == "NameError", "contexts do not share state")
    check(k.execute("z", context_id=cid).text == "7", "a context keeps its state")
    k.json("POST", "/contexts/%s/restart" % cid)
    r = k.execute("z", context_id=cid)
    check(r.error and r.error["name"] == "NameError", "restart clears the state", r.msgs)
    check(k.execute("os.getcwd()", context_id=cid).error is not None, "restart: imports gone too")
    st, _, raw = k.request("POST", "/execute", {"code": "1", "context_id": "no-such-context"})
    check(st == 404 and b"no-such-context" in raw, "unknown context: 404 with a body", (st, raw))
    st, _, raw = k.request("POST", "/contexts/nope/restart")
    check(st == 404, "restart of an unknown context: 404", st)
    st, _, raw = k.request("POST", "/execute", {"code": "1", "language": "r"})
    check(st == 400 and b"language 'r' is not available in this sandbox: python only" in raw,
          "unknown language: 400", (st, raw))
    st, _, raw = k.request("POST", "/contexts", {"language": "java"})
    check(st == 400 and b"python only" in raw, "a context of another language: 400", (st, raw))
    st, _, raw = k.request("POST", "/contexts", {"cwd": "/no/such/dir"})
    check(st == 400, "a context in a missing directory: 400", (st, raw))
    check(k.execute("1 + 1", language="python").text == "2", "language python")

    # one execution at a time per context: the second waits for the first
    ctx2 = k.json("POST", "/contexts", {})["id"]
    out = {}

    def slow():
        out["a"] = k.execute("import time\ntime.sleep(0.8)\nq = 'set'", context_id=ctx2)
    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.2)
    r = k.execute("q", context_id=ctx2)
    t.join()
    check(r.text == "'set'", "executions of a context queue", r.msgs)

    # the caller goes away: the execution is interrupted, the context lives on with its state
    s = raw_http(port, "/execute", {"code": "w = 5\nwhile True:\n    pass", "context_id": ctx2},
                 version="HTTP/1.1")
    f = s.makefile("rb")
    read_head(f)
    time.sleep(0.5)
    f.close()
    s.close()
    t0 = time.monotonic()
    r = k.execute("w + 1", context_id=ctx2)
    check(r.text == "6", "after a caller left, the context works with its state", r.msgs)
    check(time.monotonic() - t0 < 3, "the interrupt was quick", time.monotonic() - t0)

    # a crash of the context's process: an error, then a fresh process
    r = k.execute("import os\nos._exit(3)", context_id=ctx2)
    check(r.error is not None and "status 3" in r.error["value"] and "fresh" in r.error["value"],
          "a crash answers an error", r.msgs)
    r = k.execute("1 + 1", context_id=ctx2)
    check(r.text == "2" and r.error is None, "the next execution runs in a fresh process", r.msgs)
    r = k.execute("w", context_id=ctx2)
    check(r.error and r.error["name"] == "NameError", "a fresh process has no old state", r.msgs)

    # remove
    st, _, _ = k.request("DELETE", "/contexts/%s" % cid)
    check(st in (200, 204), "DELETE /contexts/{id}", st)
    check(not any(c["id"] == cid for c in k.json("GET", "/contexts")), "a removed context is not listed")
    st, _, _ = k.request("POST", "/execute", {"code": "1", "context_id": cid})
    check(st == 404, "a removed context: 404", st)
    st, _, _ = k.request("DELETE", "/contexts/%s" % cid)
    check(st == 404, "removing it twice: 404", st)
    k.request("DELETE", "/contexts/%s" % ctx2)

    # matplotlib and pandas, when they are there
    if importable("matplotlib"):
        r = k.execute("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [2, 4, 1], label='series')\n"
                      "plt.title('Line')\nplt.xlabel('time (s)')\nplt.ylabel('value')\nplt.show()")
        check(r.error is None and len(r.others) == 1, "a line plot: one figure", r.msgs)
        fig = r.others[0]
        check(base64.b64decode(fig["png"])[:8] == b"\x89PNG\r\n\x1a\n", "the figure as PNG")
        check(re.fullmatch(r"<Figure size \d+x\d+ with 1 Axes>", fig["text"]), "the figure's text", fig["text"])
        ch = fig.get("chart") or {}
        check(ch.get("type") == "line" and ch.get("title") == "Line" and ch.get("x_label") == "time (s)"
              and ch.get("x_unit") == "s" and ch.get("y_label") == "value", "a line chart", ch)
        check(ch["elements"] == [{"label": "series", "points": [[1, 2], [2, 4], [3, 1]]}], "the line's points",
              ch["elements"])
        check(ch.get("x_scale") == "linear" and len(ch.get("x_ticks", [])) == len(ch.get("x_tick_labels", [])),
              "the line chart's ticks", ch)
        r = k.execute("import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n"
                      "ax.bar(['a', 'b', 'c'], [3, 5, 2], label='sold')\nax.set_title('Bars')\n"
                      "fig2, ax2 = plt.subplots()\nax2.scatter([1, 2], [3, 4], label='pts')\nNone")
        charts = [m.get("chart", {}) for m in r.others]
        check(len(charts) == 2 and charts[0]["type"] == "bar" and charts[1]["type"] == "scatter",
              "figures left open at the end are sent", charts)
        check(charts[0]["elements"] == [{"label": "a", "group": "sold", "value": 3},
                                        {"label": "b", "group": "sold", "value": 5},
                                        {"label": "c", "group": "sold", "value": 2}], "a bar chart", charts[0])
        check(charts[1]["elements"][0]["points"] == [[1, 3], [2, 4]], "a scatter chart", charts[1])
        r = k.execute("import matplotlib.pyplot as plt\n"
                      "plt.boxplot([[1, 2, 3, 4, 10], [2, 3, 4, 5, 6]], labels=['A', 'B'])\nplt.title('Box')\n"
                      "plt.show()\nplt.pie([1, 3], labels=['p', 'q'])\nplt.show()")
        charts = [m.get("chart", {}) for m in r.others]
        check(len(charts) == 2 and charts[0].get("type") == "box_and_whisker" and charts[0]["title"] == "Box",
              "a box plot", charts)
        check(charts[0]["elements"][0] == {"label": "A", "min": 1, "first_quartile": 2, "median": 3,
                                           "third_quartile": 4, "max": 4, "outliers": [10]}, "a box's numbers",
              charts[0]["elements"])
        check(charts[1].get("type") == "pie" and [e["label"] for e in charts[1]["elements"]] == ["p", "q"]
              and [e["angle"] for e in charts[1]["elements"]] == [90, 270], "a pie chart", charts[1])
        r = k.execute("import matplotlib.pyplot as plt\nfig, axs = plt.subplots(1, 2)\nfig.suptitle('Two')\n"
                      "axs[0].plot([1, 2])\naxs[1].bar([0, 1], [1, 2])\naxs[1].set_xticks([0, 1], ['Q1', 'Q2'])\nfig")
        ch = r.main.get("chart", {}) if r.main else {}
        check(ch.get("type") == "superchart" and ch.get("title") == "Two"
              and [e["type"] for e in ch["elements"]] == ["line", "bar"], "a figure as the main result: a superchart",
              r.msgs)
        check([e["label"] for e in ch["elements"][1]["elements"]] == ["Q1", "Q2"], "bars named by their ticks", ch)
        check(r.others == [], "a figure shown as the result is not sent again", r.others)
        r = k.execute("import matplotlib.pyplot as plt\nplt.get_fignums()")
        check(r.text == "[]", "figures are closed once sent", r.msgs)
    else:
        print("note: matplotlib is not importable by %s; the figure checks did not run" % sys.executable)
    if importable("pandas"):
        r = k.execute("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', None]})")
        m = r.main
        check(m and "<table" in m.get("html", "") and m["text"].split()[:2] == ["a", "b"], "a DataFrame's html",
              r.msgs)
        check(m.get("data") == {"a": [1, 2], "b": ["x", None]}, "a DataFrame's data", m.get("data"))
    else:
        print("note: pandas is not importable by %s; the DataFrame checks did not run" % sys.executable)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("space_kernel tests: FAILED after %d checks: %s" % (PASSED, e))
        sys.exit(1)

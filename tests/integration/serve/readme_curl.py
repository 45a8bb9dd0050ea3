#!/usr/bin/env python3
"""The curl examples of README.md ("## HTTP API") and docs/api.md ("## Calls") run as written against a
running `space serve`: each sh block is run by bash as one script, with only the server's address (the
docs say 127.0.0.1:8080; the test server has its own port) and README's "sb-..." placeholder (the id its
create printed) substituted. curl is wrapped to report each call's HTTP status on stderr; every call
must succeed (2xx), and the outputs must be those the docs show.

Usage: readme_curl.py README.md docs/api.md   (environment: SERVE_URL, SERVE_KEY; cwd: a scratch dir)
"""
import json
import os
import re
import subprocess
import sys

URL, KEY = os.environ["SERVE_URL"], os.environ["SERVE_KEY"]
failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures += 1
    return cond


def block(path, heading):
    """The first ```sh block after the heading line."""
    text = open(path).read()
    at = text.index("\n" + heading + "\n")
    m = re.search(r"```sh\n(.*?)```", text[at:], re.S)
    return m.group(1)


# Each call's status goes to stderr, so pipes and -o files see curl's output unchanged.
WRAP = "curl() { command curl -w '%{stderr}@@status %{http_code}@@\\n' \"$@\"; }\n"


def run(script, env):
    p = subprocess.run(["bash", "-c", "set -euo pipefail\n" + WRAP + script], capture_output=True, text=True,
                       env={**os.environ, **env}, timeout=300)
    statuses = [int(s) for s in re.findall(r"@@status (\d+)@@", p.stderr)]
    return p, statuses


def curl_count(script):
    return len(re.findall(r"(?m)(?:^|\$\()\s*curl ", script))


def json_lines(text):
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


# --- README.md --------------------------------------------------------------------------------------
readme = block(sys.argv[1], "## HTTP API")
lines = readme.splitlines()
check(lines[0].startswith("space apikey create") and "space serve" in lines[0],
      "README starts the server with a key (the test harness did the same)")
calls = "\n".join(lines[1:]).replace("http://127.0.0.1:8080", URL)
create, rest = calls.split("\n", 1)
p, st = run(create, {"KEY": KEY})
created = json_lines(p.stdout)
check(p.returncode == 0 and st == [201] and created and created[0].get("status") == "running",
      f"README create: 201, a running sandbox ({st} {p.stdout[:200]} {p.stderr[-300:]})")
sid = created[0]["id"] if created else "sb-none"
p, st = run(rest.replace("sb-...", sid), {"KEY": KEY})
res = json_lines(p.stdout)
check(p.returncode == 0 and st == [200] and res and res[0].get("exit_code") == 0 and res[0].get("stdout") == "42\n",
      f"README exec of python3: 42 ({st} {p.stdout[:300]} {p.stderr[-300:]})")

# --- docs/api.md ------------------------------------------------------------------------------------
calls = block(sys.argv[2], "## Calls").replace("http://127.0.0.1:8080", URL)
p, st = run(calls, {"SPACE_API_KEY": KEY})
n = curl_count(calls)
check(p.returncode == 0, f"docs/api.md block runs to the end (exit {p.returncode}: {p.stderr[-500:]})")
check(len(st) == n and all(200 <= s < 300 for s in st), f"docs/api.md: {n} calls, all 2xx ({st})")
out = json_lines(p.stdout)
created = [o for o in out if o.get("status") == "running" and o.get("metadata") == {"task": "demo"}]
check(len(created) == 1 and created[0]["template"] == "base", "create with every field, as shown")
ran = [o for o in out if "stdout" in o and "exit_code" in o]
check(ran and ran[0]["exit_code"] == 3 and ran[0]["stdout"] == "hi\ninput\n",
      f"exec: exit 3, stdout as shown ({ran[:1]})")
streamed = [o for o in out if "stream" in o]
check([o["data"] for o in streamed] == ["one\n", "two\n"] and
      any(o.get("exit_code") == 0 and "stdout" not in o for o in out), f"streamed exec as shown ({streamed})")
check(os.path.exists("hello.copy.py") and open("hello.copy.py").read() == 'print("hello")\n',
      "upload and download round trip (hello.copy.py)")
check(any(o.get("path") == "/root/app" and [e["name"] for e in o.get("entries", [])] == ["hello.py"] for o in out),
      "list shows the uploaded file")
check(any("templates" in o for o in out) and any("sandboxes" in o for o in out), "templates and list answered")

print("failures:", failures)
sys.exit(1 if failures else 0)

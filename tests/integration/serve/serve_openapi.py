#!/usr/bin/env python3
"""Walks docs/openapi.json against a running `space serve`: every documented operation is called with
the document's examples and must answer its documented success status (the lowest 2xx, or the only
documented status); every route in the server's table must be documented and vice versa.

Usage: serve_openapi.py OPENAPI.json SERVE_V1.c   (environment: SERVE_URL, SERVE_KEY)
"""
import http.client
import json
import os
import re
import sys
import urllib.parse

spec = json.load(open(sys.argv[1]))
source = open(sys.argv[2]).read()
url = urllib.parse.urlparse(os.environ["SERVE_URL"])
key = os.environ["SERVE_KEY"]
failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures += 1


def request(method, path, body=None, ctype=None, auth=True):
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    headers = {"X-API-Key": key} if auth else {}
    if ctype:
        headers["Content-Type"] = ctype
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data, r.getheader("Content-Type", "")


# The server's routes (the table at the end of serve_v1.c) against the document's operations.
routes = {(m, p) for m, p in re.findall(r'\{ "([A-Z]+)", "(/v1/[^"]*)"', source)}
routes.add(("GET", "/v1/health"))
documented = {(m.upper(), p) for p, ops in spec["paths"].items() for m in ops}
check(routes == documented, f"server routes and documented operations match "
      f"(undocumented: {sorted(routes - documented)}, not served: {sorted(documented - routes)})")

# A sandbox for the {id} operations, from the create operation's own example.
create = spec["paths"]["/v1/sandboxes"]["post"]
st, data, _ = request("POST", "/v1/sandboxes",
                   json.dumps(create["requestBody"]["content"]["application/json"]["example"]), "application/json")
check(st == 201, f"POST /v1/sandboxes with the documented example: {st}")
if st != 201:
    sys.exit(1)
sandbox = json.loads(data)["id"]
# A checkpoint of it for the /v1/checkpoints/{id} operations and the rollback example.
st, data, _ = request("POST", f"/v1/sandboxes/{sandbox}/checkpoints", b"{}", "application/json")
check(st == 201, f"a checkpoint for the checkpoint operations: {st}")
checkpoint = json.loads(data)["id"] if st == 201 else "cp-none"


def image_archive():
    """A one-layer OCI image archive (a tar body of the image upload): one file, no /bin/sh (force=1)."""
    import hashlib, io, tarfile

    def tar(files):
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode="w") as t:
            for name, data in files.items():
                h = tarfile.TarInfo(name)
                h.size = len(data)
                t.addfile(h, io.BytesIO(data))
        return b.getvalue()

    def dg(b):
        return "sha256:" + hashlib.sha256(b).hexdigest()

    layer = tar({"etc/openapi": b"from the OpenAPI walk\n"})
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": ["A=1"]},
                         "rootfs": {"type": "layers", "diff_ids": [dg(layer)]}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": dg(config), "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": dg(layer),
                                       "size": len(layer)}]}).encode()
    index = json.dumps({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                                           "digest": dg(manifest), "size": len(manifest)}]}).encode()
    files = {"oci-layout": b'{"imageLayoutVersion":"1.0.0"}', "index.json": index}
    for b in (layer, config, manifest):
        files["blobs/sha256/" + dg(b)[7:]] = b
    return tar(files)


def context_archive():
    """A build context (a tar body of the build upload): a Dockerfile that copies one file onto scratch."""
    import io, tarfile
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w") as t:
        for name, data in {"Dockerfile": b"FROM scratch\nCOPY f /etc/f\n", "f": b"from the OpenAPI walk\n"}.items():
            h = tarfile.TarInfo(name)
            h.size = len(data)
            t.addfile(h, io.BytesIO(data))
    return b.getvalue()


def template_stream():
    """A template stream (the body of POST /v1/templates/{name}/stream): the server's template tiny, sent by
    the CLI from the same state directory."""
    import subprocess
    return subprocess.run([os.environ["SPACE_CLI"], "template", "send", "tiny", "-o", "-", "--state",
                           os.environ["SERVE_STATE"]], check=True, stdout=subprocess.PIPE).stdout


def order(op):
    """Creating things first, reading next, removing last, the sandbox itself at the very end."""
    method, path = op
    if path == "/v1/sandboxes/{id}/rollback":
        return (2.5, path)   # after the file operations: a rollback restarts the sandbox on older files
    if method == "delete":
        return ({"/v1/sandboxes/{id}": 3, "/v1/checkpoints/{id}": 2.7}.get(path, 2), path)
    return ({"put": 0, "post": 1}.get(method, 1 if "mkdir" in path else 1.5), path)


ops = sorted(((m, p) for p, o in spec["paths"].items() for m in o), key=order)
for method, path in ops:
    op = spec["paths"][path][method]
    if (method, path) == ("post", "/v1/sandboxes"):
        continue
    query, real_path = {}, path
    for p in op.get("parameters", []):
        if p["in"] == "path":
            real_path = real_path.replace("{" + p["name"] + "}",
                                          checkpoint if path.startswith("/v1/checkpoints/") else sandbox)
        elif p["in"] == "query" and "example" in p and (p.get("required") or p["name"] not in ("cursor",)):
            query[p["name"]] = p["example"]
    if path.endswith("/build"):
        real_path = real_path.replace(sandbox, sandbox + "-built")  # not the image upload's template
    if path.endswith("/stream"):
        real_path = real_path.replace(sandbox, sandbox + "-received")
    if path == "/v1/sandboxes":
        query = {}  # the filters' examples would hide the sandbox; they are exercised by serve_api.py
    full = real_path + ("?" + urllib.parse.urlencode(query) if query else "")
    body, ctype = None, None
    if "requestBody" in op:
        ctype, media = next(iter(op["requestBody"]["content"].items()))
        example = media.get("example")
        if isinstance(example, dict) and "checkpoint" in example:
            example = {**example, "checkpoint": checkpoint}
        if ctype == "application/x-tar":
            body = context_archive() if path.endswith("/build") else image_archive()
        elif ctype == "application/x-space-template-stream":
            body = template_stream()
        else:
            body = json.dumps(example).encode() if ctype == "application/json" else str(example).encode()
    codes = sorted(int(c) for c in op["responses"])
    want = next((c for c in codes if 200 <= c < 300), next(c for c in codes if c != 401))
    if op.get("x-space-cluster-only"):
        want = 400  # this server is alone: "not a host of a cluster" (serve-cluster exercises them)
    st, data, rtype = request(method.upper(), full, body, ctype)
    check(st == want, f"{method.upper()} {full}: {st}, documented {want}" + ("" if st == want else f" ({data[:200]!r})"))
    types = list(op["responses"][str(want)].get("content", {}))
    check(rtype.split(";")[0] in types if types else not data,
          f"{method.upper()} {path}: Content-Type {rtype!r}, documented {types}")
    if rtype == "application/json":
        json.loads(data)
    # Every operation but health needs the key, as the document says.
    secured = op.get("security", spec.get("security")) != []
    if secured:
        # (a large body cut short: the server answers 401 on the head and closes without reading it)
        st, _, _ = request(method.upper(), full, body[:4096] if body else body, ctype, auth=False)
        check(st == 401, f"{method.upper()} {path} without a key: {st}")

print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)

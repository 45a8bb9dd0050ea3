#!/usr/bin/env python3
"""Creates N sandboxes with C concurrent clients against `space serve` URLs (round robin), then deletes
them through the host that answered. Prints one JSON object: create latencies (ms), creates per second,
the owner of each sandbox, errors. With a sixth argument (the name of the first URL's host in a
cluster): before the deletes, every sandbox is read (GET) three times through the first URL, and the
latencies of reads it answered itself and of reads it forwarded to the owner are given apart."""
import json
import sys
import threading
import time
import urllib.request


def call(url, key, method, path, body=None):
    req = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"X-API-Key": key, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, r.headers.get("X-Space-Cluster-Host"), r.read()


def main():
    urls, key, n, clients, template = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    lat, owners, errors, ids = [], {}, [], []
    lock = threading.Lock()
    todo = list(range(n))

    def worker(w):
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop()
            url = urls[i % len(urls)]
            t0 = time.monotonic()
            try:
                st, host, body = call(url, key, "POST", "/v1/sandboxes", {"template": template})
                ms = (time.monotonic() - t0) * 1000
                sid = json.loads(body)["id"]
                with lock:
                    lat.append(ms)
                    owners[host] = owners.get(host, 0) + 1
                    ids.append((url, sid))
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown
                with lock:
                    errors.append(str(e)[:200])

    t0 = time.monotonic()
    ts = [threading.Thread(target=worker, args=(w,)) for w in range(clients)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    wall = time.monotonic() - t0
    local, fwd = [], []
    if len(sys.argv) > 6:
        for _ in range(3):
            for _, sid in ids:
                t1 = time.monotonic()
                try:
                    st, host, _b = call(urls[0], key, "GET", "/v1/sandboxes/" + sid)
                except Exception as e:  # noqa: BLE001
                    errors.append("get " + sid + ": " + str(e)[:200])
                    continue
                (local if host == sys.argv[6] else fwd).append((time.monotonic() - t1) * 1000)
    for url, sid in ids:
        try:
            call(url, key, "DELETE", "/v1/sandboxes/" + sid)
        except Exception as e:  # noqa: BLE001
            errors.append("delete " + sid + ": " + str(e)[:200])
    lat.sort()

    def pct(p):
        return round(lat[min(len(lat) - 1, int(p * len(lat)))], 1) if lat else None

    def p50(v):
        return round(sorted(v)[len(v) // 2], 2) if v else None

    print(json.dumps({"creates": len(lat), "errors": errors, "wall_s": round(wall, 2),
                      "per_s": round(len(lat) / wall, 1) if wall > 0 else 0, "p50_ms": pct(0.5), "p99_ms": pct(0.99),
                      "owners": owners, "get_local_p50_ms": p50(local), "get_forwarded_p50_ms": p50(fwd),
                      "gets": len(local) + len(fwd)}))


main()

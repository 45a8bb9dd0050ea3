#!/usr/bin/env python3
"""Sequential HTTP(S) GETs, one connection each; prints JSON: requests/s and latency percentiles (ms).
usage: egress_client.py URL COUNT [CAFILE]   (with CAFILE: verify against it, without hostname check;
without: the system trust store)"""
import json
import ssl
import sys
import time
import urllib.request

url, count = sys.argv[1], int(sys.argv[2])
# One context for the whole run (urlopen would otherwise load the trust store on every request).
if len(sys.argv) > 3:
    ctx = ssl.create_default_context(cafile=sys.argv[3])
    ctx.check_hostname = False
else:
    ctx = ssl.create_default_context()
lat = []
for _ in range(3):  # warm-up
    urllib.request.urlopen(url, context=ctx, timeout=10).read()
t0 = time.perf_counter()
for _ in range(count):
    t = time.perf_counter()
    with urllib.request.urlopen(url, context=ctx, timeout=10) as r:
        r.read()
    lat.append((time.perf_counter() - t) * 1000)
total = time.perf_counter() - t0
lat.sort()
print(json.dumps({"rps": count / total, "p50_ms": lat[len(lat) // 2],
                  "p99_ms": lat[min(len(lat) - 1, (len(lat) * 99 + 99) // 100 - 1)]}))

#!/usr/bin/env python3
"""Test upstreams on loopback: an HTTP and an HTTPS server that log every request's Host, Authorization
and X-Api-Key headers (one JSON line each) and answer 200 with a small body.

usage: upstream.py LOGFILE CERT KEY   -> prints "HTTP_PORT HTTPS_PORT" when listening, serves until killed
"""
import http.server
import json
import ssl
import sys
import threading


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        with open(sys.argv[1], "a") as f:
            f.write(json.dumps({"path": self.path, "host": self.headers.get("Host"),
                                "authorization": self.headers.get_all("Authorization") or [],
                                "x-api-key": self.headers.get_all("X-Api-Key") or [],
                                "tls": isinstance(self.connection, ssl.SSLSocket)}) + "\n")
        body = b"x" * int(self.path.split("size=")[1]) if "size=" in self.path else b"hello from upstream\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        # Like some servers, go on reading requests already sent on the connection even after
        # "Connection: close" (until the client ends it): what a gateway lets through is answered.
        self.close_connection = False

    def log_message(self, *args):
        pass


def serve(tls):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[2], sys.argv[3])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_address[1]


h, s = serve(False), serve(True)
print(h, s, flush=True)
threading.Event().wait()

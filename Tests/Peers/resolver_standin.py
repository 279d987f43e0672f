#!/usr/bin/env python3
"""A stand-in shard-map resolver (relay.md §8.2) for the client's resolver tests: it serves one map
and records every request it is sent, so a test can check what the client asked for.

Usage: resolver_standin.py MAP_JSON [HOLD_FROM] — prints "port N" once listening on 127.0.0.1; with
HOLD_FROM, map requests from the HOLD_FROM-th on (1-based) are held from the start. Serves:
  GET <any path but the ones below>   200 MAP_JSON (application/json), or, while held, no answer
                                      until released
  GET /moved...                       302 to /map.json
  GET /gone...                        404
  GET /silent...                      never answered (the connection stays open)
  POST /_hold, POST /_release         make map requests wait / answer the held ones
  POST /_map (body: MAP_JSON)         serve this map from now on (a failover published)
  GET /_log                           the requests so far (not counting /_*): a JSON array of
                                      {"method", "target", "headers": [[name, value], ...]}
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

current = {"map": sys.argv[1].encode()}
HOLD_FROM = int(sys.argv[2]) if len(sys.argv) > 2 else None
log = []
lock = threading.Lock()
released = threading.Event()
if HOLD_FROM is None:
    released.set()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path == "/_map":
            with lock:
                current["map"] = body
        elif self.path == "/_hold":
            released.clear()
        elif self.path == "/_release":
            released.set()
        self.answer(200, b"ok")

    def do_GET(self):
        if self.path == "/_log":
            with lock:
                body = json.dumps(log).encode()
            return self.answer(200, body, [("Content-Type", "application/json")])
        with lock:
            log.append({"method": self.command, "target": self.path, "headers": [[k, v] for k, v in self.headers.items()]})
            number = len(log)
        if self.path.startswith("/silent"):
            threading.Event().wait(120)
            return
        if self.path.startswith("/moved"):
            return self.answer(302, b"", [("Location", "/map.json")])
        if self.path.startswith("/gone"):
            return self.answer(404, b"not found")
        if HOLD_FROM is None or number >= HOLD_FROM:
            released.wait(60)
        with lock:
            body = current["map"]
        self.answer(200, body, [("Content-Type", "application/json")])


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print("port %d" % server.server_address[1], flush=True)
server.serve_forever()

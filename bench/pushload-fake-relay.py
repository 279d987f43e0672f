#!/usr/bin/env python3
"""A trivial Profile M push relay stand-in, for testing pushload itself (not Tether).

HTTP/1.1 keep-alive on 127.0.0.1. POST /v1/register answers a fixed pushID and relaySecret
(base64 of 09 x 32); POST /v1/push answers 200 {"ok":true}. With --verify, pushes are checked as
push.md §2.5 does (push id, |skew| <= 300 s, lowercase hex HMAC-SHA256 over "<ts>.<body>"),
401 {"error":"unauthorized"} otherwise. --fail-every N answers every Nth push 502; --close-every N
adds "connection: close" to every Nth answer and closes. Anything else: 404 {"error":"not found"}.

  python3 bench/pushload-fake-relay.py [--port P] [--procs N] [--verify] [--fail-every N] [--close-every N]
--procs N forks N server processes sharing the listening socket (counters are per process).
Prints "fake-relay: listening on 127.0.0.1:PORT" when ready.
"""
import argparse, asyncio, base64, hashlib, hmac, os, socket, time

PUSH_ID = b"0b6f7c1e-1a2b-4c3d-8e9f-0123456789ab"
SECRET = bytes([9]) * 32
REG_BODY = b'{"pushID":"%s","relaySecret":"%s"}' % (PUSH_ID, base64.b64encode(SECRET))


def answer(status, body, close=False):
    reason = {200: b"OK", 401: b"Unauthorized", 404: b"Not Found", 502: b"Bad Gateway"}[status]
    return b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s" % (
        status, reason, len(body), b"connection: close\r\n" if close else b"", body)


OK = answer(200, b'{"ok":true}')


class Relay(asyncio.Protocol):
    args = None
    pushes = 0

    def connection_made(self, tr):
        self.tr, self.buf = tr, b""

    def data_received(self, data):
        self.buf += data
        out = []
        while True:
            he = self.buf.find(b"\r\n\r\n")
            if he < 0:
                break
            head = self.buf[:he]
            lines = head.split(b"\r\n")
            hdr = {}
            for ln in lines[1:]:
                k, _, v = ln.partition(b":")
                hdr[k.strip().lower()] = v.strip()
            n = int(hdr.get(b"content-length", b"0"))
            if len(self.buf) < he + 4 + n:
                break
            body = self.buf[he + 4:he + 4 + n]
            self.buf = self.buf[he + 4 + n:]
            method, path = lines[0].split(b" ")[:2]
            close = False
            if method == b"POST" and path == b"/v1/push":
                Relay.pushes += 1
                a = Relay.args
                resp = OK
                if a.verify and not self.verify(hdr, body):
                    resp = answer(401, b'{"error":"unauthorized"}')
                elif a.fail_every and Relay.pushes % a.fail_every == 0:
                    resp = answer(502, b'{"error":"apns unreachable","status":0}')
                if a.close_every and Relay.pushes % a.close_every == 0:
                    resp = resp.replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n", 1)
                    close = True
            elif method == b"POST" and path == b"/v1/register":
                resp = answer(200, REG_BODY)
            else:
                resp = answer(404, b'{"error":"not found"}')
            out.append(resp)
            if close:
                break
        if out:
            self.tr.write(b"".join(out))
            if close:
                self.tr.close()

    @staticmethod
    def verify(hdr, body):
        ts, sig = hdr.get(b"x-mytty-timestamp", b""), hdr.get(b"x-mytty-signature", b"")
        if hdr.get(b"x-mytty-push-id") != PUSH_ID or not ts.isdigit() or abs(time.time() - int(ts)) > 300:
            return False
        want = hmac.new(SECRET, ts + b"." + body, hashlib.sha256).hexdigest().encode()
        return hmac.compare_digest(want, sig)


async def serve(sock):
    srv = await asyncio.get_running_loop().create_server(Relay, sock=sock)
    await srv.serve_forever()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--procs", type=int, default=1)
    p.add_argument("--verify", action="store_true")
    p.add_argument("--fail-every", type=int, default=0)
    p.add_argument("--close-every", type=int, default=0)
    Relay.args = a = p.parse_args()
    sock = socket.create_server(("127.0.0.1", a.port), backlog=1024)
    sock.setblocking(False)
    print("fake-relay: listening on 127.0.0.1:%d" % sock.getsockname()[1], flush=True)
    for _ in range(a.procs - 1):
        if os.fork() == 0:
            break
    try:
        asyncio.run(serve(sock))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

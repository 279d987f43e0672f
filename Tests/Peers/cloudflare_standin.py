#!/usr/bin/env python3
"""A loopback stand-in for Cloudflare's TURN credentials API (signaling.md §8.3), for testing
`tether signal` in TURN_MODE=cloudflare with CLOUDFLARE_TURN_API_URL pointing here and
CLOUDFLARE_CA_FILE = the CA it writes. Written from the spec and Cloudflare's public docs only
(Python standard library + `cryptography` for the certificates); it shares no code with Tether.

USAGE
  cloudflare_standin.py --token TOKEN --key-id KEYID --ca-out CA.pem
                        [--mode MODE] [--record FILE] [--host 127.0.0.1] [--port 0]
                        [--delay 10] [--plain-http]

  At start it makes a CA and a leaf certificate (EC P-256, SAN IP 127.0.0.1 and DNS localhost,
  one day) with `cryptography`, writes the CA to --ca-out, serves HTTPS (HTTP/1.1) on --host:--port
  (0 = a free port) and prints exactly `listening on <port>` on stdout (flushed) once it accepts.
  --plain-http serves plain HTTP instead (--ca-out is then optional). Exits 0 on SIGTERM/SIGINT.

ENDPOINT
  POST /v1/turn/keys/<key id>/credentials/generate-ice-servers
    - a key id other than --key-id                      -> 404 (Cloudflare-style JSON error)
    - Authorization other than `Bearer <--token>`       -> 401
    - other paths -> 404; other methods on the path -> 405
    - otherwise the answer depends on --mode (below).
  Every request is appended to --record as one JSON line, flushed before the answer is sent:
    {"time": unix seconds (float), "method", "path" (with any query), "headers": [[name, value],
     ...] in order, "body": the body as text (UTF-8, invalid bytes replaced), "authorized": bool,
     "mode", "status": the status answered, "answered": {"username", "credential"} or null}
  In mode slow, a client that closes its connection before the answer is due is recorded too,
  when it is seen (within 0.2 s): {"time", "event": "client-gone", "path"}.

MODES (what an authorized request gets)
  ok             201, the §8.3 example: a STUN entry (2 URLs) and a TURN entry (6 URLs) with a
                 fresh random username and credential.
  ok-200         the same body with 200 (Tether accepts any 2xx).
  single-object  201, the older form {"iceServers": {urls: 7 URLs (1 stun, 6 turn/turns),
                 username, credential}}.
  foreign-hosts  201, the ok body with extra URLs that §8.3 filtering must drop (other hosts, a
                 trailing-dot host, a user part, a look-alike suffix, an http: URL, stuns:) and a
                 whole entry on another host; after filtering it equals the ok body.
  no-turn        201, only STUN URLs (plus a TURN URL on a foreign host): issuance must fail.
  slow           answers like ok after --delay seconds (default 10; over Tether's 8 s timeout;
                 a --delay under 8 s makes issuance slow but successful).
  redirect       302 with Location: this server's same path + "?redirected=1" (answered like ok
                 there, so a client that follows redirects would be seen to succeed).
  oversize       201, the ok body padded with a "pad" field to 70,000 bytes (over 65,536).
  error          500 with a Cloudflare-style JSON error.
  bad-json       201, Content-Type application/json, a truncated JSON body.
"""
import argparse
import datetime
import ipaddress
import json
import os
import re
import secrets
import select
import signal
import ssl
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

MODES = ("ok", "ok-200", "single-object", "foreign-hosts", "no-turn", "slow", "redirect", "oversize", "error", "bad-json")
PATH_RE = re.compile(r"^/v1/turn/keys/([^/?]+)/credentials/generate-ice-servers(\?.*)?$")

STUN = ["stun:stun.cloudflare.com:3478", "stun:stun.cloudflare.com:53"]
TURN = ["turn:turn.cloudflare.com:3478?transport=udp", "turn:turn.cloudflare.com:53?transport=udp",
        "turn:turn.cloudflare.com:3478?transport=tcp", "turn:turn.cloudflare.com:80?transport=tcp",
        "turns:turn.cloudflare.com:5349?transport=tcp", "turns:turn.cloudflare.com:443?transport=tcp"]


def make_certificates(directory):
    """A CA and a leaf for 127.0.0.1/localhost; returns (ca.pem, leaf chain.pem, leaf key.pem)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Tether test Cloudflare stand-in CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(leaf_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = [os.path.join(directory, name) for name in ("ca.pem", "leaf-chain.pem", "leaf-key.pem")]
    with open(paths[0], "wb") as handle:
        handle.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(paths[1], "wb") as handle:
        handle.write(leaf.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM))
    with open(paths[2], "wb") as handle:
        handle.write(leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return paths


def credentials():
    return {"username": secrets.token_hex(32), "credential": secrets.token_hex(32)}


def body_for(mode, creds):
    """(status, body dict or raw bytes) for an authorized request in this mode."""
    ok = {"iceServers": [{"urls": list(STUN)}, dict({"urls": list(TURN)}, **creds)]}
    if mode in ("ok", "slow"):
        return 201, ok
    if mode == "ok-200":
        return 200, ok
    if mode == "single-object":
        return 201, {"iceServers": dict({"urls": [STUN[0]] + TURN}, **creds)}
    if mode == "foreign-hosts":
        stun = [STUN[0], "stun:stun.l.google.com:19302", STUN[1], "stuns:stun.cloudflare.com:5349"]
        turn = [TURN[0], "turn:turn.example.net:3478?transport=udp", TURN[1], TURN[2],
                "turn:turn.cloudflare.com.:3478?transport=udp", TURN[3], "turn:user@turn.cloudflare.com:3478?transport=udp",
                TURN[4], "turn:turn.cloudflare.com.evil.example:3478?transport=tcp", "http://turn.cloudflare.com/", TURN[5]]
        return 201, {"iceServers": [{"urls": ["stun:stun.example.org:3478"]}, {"urls": stun}, dict({"urls": turn}, **creds),
                                    dict({"urls": ["turn:turn.example.net:3478?transport=udp", "turns:turn.example.net:5349?transport=tcp"]}, **creds)]}
    if mode == "no-turn":
        return 201, {"iceServers": [{"urls": list(STUN)}, dict({"urls": ["turn:turn.example.net:3478?transport=udp"]}, **creds)]}
    if mode == "oversize":
        base = json.dumps(dict(ok, pad="")).encode()
        return 201, base[:-2] + b"x" * (70000 - len(base)) + base[-2:]
    if mode == "error":
        return 500, {"success": False, "errors": [{"code": 10000, "message": "Internal server error"}], "messages": [], "result": None}
    if mode == "bad-json":
        return 201, b'{"iceServers":[{"urls":["stun:stun.cloudflare.com:3478"]},{"urls":["turn:turn.cloud'
    raise ValueError(mode)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "cloudflare-standin"
    sys_version = ""

    def log_message(self, fmt, *args):
        if self.server.options.verbose:
            sys.stderr.write("cloudflare-standin: %s\n" % (fmt % args))

    def _read_body(self):
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            return b""
        return self.rfile.read(min(int(length), 1 << 20))

    def _record(self, body, authorized, status, answered):
        options = self.server.options
        if not options.record:
            return
        line = json.dumps({"time": time.time(), "method": self.command, "path": self.path, "headers": [[k, v] for k, v in self.headers.items()],
                           "body": body.decode("utf-8", errors="replace"), "authorized": authorized, "mode": options.mode,
                           "status": status, "answered": answered})
        with self.server.lock, open(options.record, "a") as handle:
            handle.write(line + "\n")
            handle.flush()

    def _send(self, status, payload, headers=()):
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            pass

    def _error(self, status, code, message):
        return status, {"success": False, "errors": [{"code": code, "message": message}], "messages": [], "result": None}

    def _handle(self):
        options = self.server.options
        body = self._read_body()
        match = PATH_RE.match(self.path)
        authorized = False
        answered = None
        headers = []
        if not match:
            status, payload = self._error(404, 7003, "Could not route to %s" % self.path.split("?")[0])
        elif self.command != "POST":
            status, payload = self._error(405, 10000, "Method not allowed")
        elif match.group(1) != options.key_id:
            status, payload = self._error(404, 10000, "TURN key not found")
        elif self.headers.get_all("Authorization") != ["Bearer %s" % options.token]:
            status, payload = self._error(401, 10000, "Authentication error")
        else:
            authorized = True
            mode = options.mode
            if mode == "redirect" and not match.group(2):
                scheme = "http" if options.plain_http else "https"
                location = "%s://127.0.0.1:%d%s?redirected=1" % (scheme, self.server.server_address[1], self.path)
                status, payload, headers = 302, b"", [("Location", location)]
            else:
                creds = credentials()
                status, payload = body_for("ok" if mode == "redirect" else mode, creds)
                if mode not in ("error", "bad-json"):
                    answered = creds
        self._record(body, authorized, status, answered)
        if authorized and options.mode == "slow":
            self._wait_or_gone(options.delay)
        self._send(status, payload, headers)

    def _wait_or_gone(self, seconds):
        """Waits `seconds` before answering; a client that closes meanwhile (TLS close_notify or
        TCP FIN: the request is complete, so anything readable is the end) is recorded as
        {"time", "event": "client-gone", "path"} and the wait ends."""
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            readable, _, _ = select.select([self.connection], [], [], min(remaining, 0.2))
            if not readable:
                continue
            previous = self.connection.gettimeout()
            try:
                self.connection.settimeout(0.2)
                data = self.connection.recv(1)
            except (ssl.SSLWantReadError, TimeoutError, BlockingIOError):
                continue
            except (ssl.SSLError, OSError):
                data = b""
            finally:
                self.connection.settimeout(previous)
            if data:
                continue
            options = self.server.options
            if options.record:
                with self.server.lock, open(options.record, "a") as handle:
                    handle.write(json.dumps({"time": time.time(), "event": "client-gone", "path": self.path}) + "\n")
                    handle.flush()
            return

    do_POST = do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        """TLS failures (a client that does not trust the CA) and resets are expected: quiet."""
        if self.options.verbose:
            super().handle_error(request, client_address)


def main():
    parser = argparse.ArgumentParser(description="Loopback stand-in for Cloudflare's TURN generate-ice-servers API.")
    parser.add_argument("--token", required=True)
    parser.add_argument("--key-id", required=True)
    parser.add_argument("--mode", choices=MODES, default="ok")
    parser.add_argument("--ca-out")
    parser.add_argument("--record")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=10.0)
    parser.add_argument("--plain-http", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    options = parser.parse_args()
    if not options.plain_http and not options.ca_out:
        parser.error("--ca-out is required (unless --plain-http)")

    server = Server((options.host, options.port), Handler)
    server.options = options
    server.lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="cf-standin-") as directory:
        if options.ca_out:
            ca_path, chain, key = make_certificates(directory)
            with open(ca_path, "rb") as source, open(options.ca_out, "wb") as target:
                target.write(source.read())
        if not options.plain_http:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.set_alpn_protocols(["http/1.1"])
            context.load_cert_chain(chain, key)
            server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)

        def stop(*_):
            threading.Thread(target=server.shutdown, daemon=True).start()
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        print("listening on %d" % server.server_address[1], flush=True)
        server.serve_forever(poll_interval=0.2)
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

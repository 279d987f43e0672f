#!/usr/bin/env python3
"""An independent client of `tether signal` (docs: shared protocol signaling.md §2-§6, §8, §13.1,
§14) and conformance scenarios for it. Written from the specification only, with PyPI
`websockets` (the ordinary client), hand-written sockets (exact HTTP refusals and frames a library
will not send) and `cryptography` (Ed25519). It shares no code with Tether.

USAGE
  signal_client.py --url ws://127.0.0.1:PORT/signal --scenario NAME [--scenario NAME ...]
  signal_client.py --url ... --scenario default          # every scenario marked "default"
  signal_client.py --list                                # names, tags and one-line descriptions

  Prints exactly one line per scenario, `PASS <name>` or `FAIL <name>: <why>`, in the order asked,
  and exits 0 iff every scenario passed (2 on bad arguments). `--verbose` adds details on stderr.

OPTIONS
  --url URL            ws://host:port/signal, or wss://... with --ca FILE (a PEM root to trust).
  --spread MODE        how scenario connections get distinct client IPs (see below):
                       `source` (default when the URL host is an IPv4 loopback address or
                       localhost), `xff`, or `none`.
  --timeout S          how long to wait for an expected reply (default 5).
  --turn-mode MODE     what `registered` must carry: `none` (default), `coturn`, `cloudflare`.
  --stun-urls LIST     the server's STUN_URLS (comma-separated); checked exactly when given.
  --turn-urls LIST     the server's TURN_URLS (coturn mode; checked exactly when given).
  --turn-secret S      the server's TURN_SECRET (coturn mode): the credential is recomputed.
  --cloudflare-mode M  the cloudflare_standin.py mode the server talks to (ok, single-object,
                       foreign-hosts; or a failing mode for `issuance-unavailable`).
  --cloudflare-record PATH  the stand-in's --record file: the request shape is checked too.
  --coturn-port P      a coturn_fixture.py `serve` with the server's TURN_SECRET (coturn-allocate).
  --origin-allowed V   a value listed in the server's SIGNAL_ALLOWED_ORIGINS (origin-allowed).
  --max-sockets N      the server's SIGNAL_MAX_SOCKETS, at most 16 (capacity).
  --forbid TEXT        fail any scenario in which a server message contains TEXT (a secret the
                       server holds, e.g. its CLOUDFLARE_TURN_API_TOKEN).
  --server-pid PID     the server process (shutdown: sends it SIGTERM).

CLIENT IPs AND THE PER-IP LIMITS
  The server allows 60 upgrades per client IP per 60 s and 16 concurrent sockets per IP (§6.4).
  One run of many scenarios opens far more than 60 connections, so every connection a scenario
  opens gets its own client address, unless the scenario pins one:
    --spread source  binds the TCP socket to a distinct loopback source address 127.a.b.c
                     (Linux routes all of 127/8 to lo); the server sees that peer address.
                     Works with any server bound to 127.0.0.1, trust-proxy on or off.
    --spread xff     sends `X-Forwarded-For: 10.a.b.c`; the server must run with
                     SIGNAL_TRUST_PROXY=true (and SIGNAL_TRUSTED_HOPS=1, the default).
    --spread none    every connection comes from one address: only a few scenarios fit in 60 s.
  The per-IP limit scenarios (limit-sockets, limit-upgrades, limit-order) use one fixed address
  each, chosen at random per run (127.200-254.x.y or 10.200-254.x.y), so they share no limiter
  with each other, with other scenarios, or with an earlier run against the same server.

SERVER CONFIGURATION
  Unless a scenario's description says otherwise it assumes `tether signal --local`: TURN_MODE
  none, no SIGNAL_ALLOWED_ORIGINS, default limits; scenarios marked "default" run with that.
  Opt-in scenarios need the configuration named in their description and usually a fresh server.

EXAMPLES (PY = .venv/bin/python, T = .build/debug/tether, P = Tests/Peers)
  $T signal --local --signal-port 8791 &                    # wait for "signal: listening on"
  $PY $P/signal_client.py --url ws://127.0.0.1:8791/signal --scenario default
  SIGNAL_TRUST_PROXY=true $T signal --local --signal-port 8791 &
  $PY $P/signal_client.py --url ws://127.0.0.1:8791/signal --spread xff --scenario default
  $PY $P/signal_client.py --url ws://127.0.0.1:8791/signal --scenario slow-keepalive
  # coturn mode against a real coturn:
  $PY $P/coturn_fixture.py serve --secret S &                # prints "listening on CP"
  TURN_MODE=coturn TURN_SECRET=S TURN_URLS="turn:127.0.0.1:CP?transport=udp,turn:127.0.0.1:CP?transport=tcp" \
    $T signal --signal-port 8791 &
  $PY $P/signal_client.py --url ws://127.0.0.1:8791/signal --turn-mode coturn --turn-secret S \
    --turn-urls "turn:127.0.0.1:CP?transport=udp,turn:127.0.0.1:CP?transport=tcp" --coturn-port CP \
    --scenario register --scenario coturn-allocate
  # cloudflare mode against the stand-in (one server per stand-in mode):
  $PY $P/cloudflare_standin.py --token TOK --key-id KID --ca-out ca.pem --record rec.jsonl --mode ok &
  TURN_MODE=cloudflare CLOUDFLARE_TURN_KEY_ID=KID CLOUDFLARE_TURN_API_TOKEN=TOK \
    CLOUDFLARE_TURN_API_URL=https://127.0.0.1:CFP CLOUDFLARE_CA_FILE=ca.pem $T signal --signal-port 8791 &
  $PY $P/signal_client.py --url ws://127.0.0.1:8791/signal --turn-mode cloudflare --cloudflare-mode ok \
    --cloudflare-record rec.jsonl --scenario register
  (stand-in --mode slow: --cloudflare-mode slow --scenario issuance-pending, then, on a fresh
  server, issuance-concurrency and issuance-unavailable; other failing modes: issuance-unavailable;
  stand-in --mode slow --delay 2 --record rec.jsonl: --cloudflare-mode slow --cloudflare-record
  rec.jsonl --scenario issuance-unroutable --scenario issuance-stale; stand-in --mode slow
  --record rec.jsonl: issuance-cancel)
"""
import argparse
import asyncio
import base64
import binascii
import hashlib
import hmac
import ipaddress
import itertools
import json
import os
import random
import re
import signal as signals
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid
from urllib.parse import urlparse

import websockets
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from websockets.exceptions import ConnectionClosed

# ------------------------------------------------------------------------------------------------
# Protocol library (signaling.md §2, §3.1, §5)
# ------------------------------------------------------------------------------------------------

KINDS = ("offer", "answer", "candidate", "channel", "reject", "close")
SIGNAL_FIELDS = ("type", "v", "kind", "from", "to", "call", "body", "sig")
MAX_MESSAGE = 65536
MAX_BODY = 32768
ID_RE = re.compile(r"^[0-9A-F]{64}$")
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
B64_RE = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")


def b64(data):
    return base64.b64encode(data).decode()


def b64decode_strict(text):
    """b64std as §2 and §13.1: standard alphabet, '=' padding, no whitespace, canonical."""
    if not isinstance(text, str) or not B64_RE.match(text):
        raise ValueError("not b64std: %r" % (text[:40] if isinstance(text, str) else text))
    data = base64.b64decode(text, validate=True)
    if b64(data) != text:
        raise ValueError("non-canonical b64std")
    return data


def id_of(key):
    """The canonical ID (§3.1): the raw Ed25519 public key, 64 uppercase hex characters."""
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex().upper()


def display_id(canonical_id):
    return "CT2-" + "-".join(canonical_id[i:i + 4] for i in range(0, 64, 4))


def register_string(challenge, ident):
    return ("cryptext.register.v2\n%s\n%s" % (challenge, ident)).encode()


def signal_string(kind, frm, to, call, body):
    return ("cryptext.signal.v2\n%s\n%s\n%s\n%s\n%s" % (kind, frm, to, call, body)).encode()


def identity_binding(agreement_public):
    return b"cryptext.identity.v2\x00" + agreement_public


def coturn_password(secret, username):
    """§8.2: base64(HMAC-SHA1(key = shared secret, message = username))."""
    return b64(hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest())


def new_call():
    return str(uuid.uuid4())


def sample_body(kind):
    """A plausible §7.1 body per kind (the server only checks it is a JSON object)."""
    if kind in ("offer", "answer"):
        return {"sdp": "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\n", "agreementKey": b64(os.urandom(32)),
                "identitySig": b64(os.urandom(64))}
    if kind == "candidate":
        return {"candidate": "candidate:1 1 udp 2122260223 192.0.2.1 54400 typ host", "sdpMid": "0", "sdpMLineIndex": 0}
    if kind == "channel":
        return {}
    if kind == "reject":
        return {"reason": "busy"}
    return {"reason": "hangup"}


def body_b64_of(body):
    if isinstance(body, (bytes, bytearray)):
        return b64(bytes(body))
    return b64(json.dumps(body, separators=(",", ":")).encode())


def make_signal(key, to, kind="offer", body=None, body_b64=None, call=None, frm=None, sign_key=None,
                sig=None, extra=None):
    """A signed `signal` (§5.4) as a dict; every field can be overridden to make it wrong."""
    frm = id_of(key) if frm is None else frm
    call = new_call() if call is None else call
    if body_b64 is None:
        body_b64 = body_b64_of(sample_body(kind) if body is None else body)
    if sig is None:
        sig = b64((sign_key or key).sign(signal_string(kind, frm, to, call, body_b64)))
    message = {"type": "signal", "v": 2, "kind": kind, "from": frm, "to": to, "call": call, "body": body_b64, "sig": sig}
    message.update(extra or {})
    return message


def dumps(obj):
    return json.dumps(obj, separators=(",", ":"))


def raw_json(obj, **replacements):
    """JSON text of obj where each string value "@NAME@" is replaced by raw text (2e0, 1.0, ...)."""
    text = dumps(obj)
    for name, raw in replacements.items():
        text = text.replace('"@%s@"' % name, raw)
    return text


class DuplicateKey(ValueError):
    pass


def strict_json(text):
    """Parses server output: one JSON value, no duplicate keys, no NaN/Infinity."""
    def pairs(items):
        out = {}
        for k, v in items:
            if k in out:
                raise DuplicateKey("duplicate key %r" % k)
            out[k] = v
        return out

    def constant(name):
        raise ValueError("non-JSON constant %s" % name)
    return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)


def non_point_id():
    """A canonical-looking ID whose 32 bytes are not an Ed25519 point (§3.1: signatures fail)."""
    p = 2 ** 255 - 19
    d = (-121665 * pow(121666, p - 2, p)) % p
    for y in range(2, 10000):
        x2 = (y * y - 1) * pow(d * y * y + 1, p - 2, p) % p
        if x2 != 0 and pow(x2, (p - 1) // 2, p) != 1:
            return y.to_bytes(32, "little").hex().upper()
    raise RuntimeError("unreachable")


# ------------------------------------------------------------------------------------------------
# Failures
# ------------------------------------------------------------------------------------------------

class Fail(Exception):
    pass


class Closed(Fail):
    """The connection closed while a message was expected."""

    def __init__(self, who, rcvd):
        self.code = rcvd.code if rcvd is not None else None
        self.reason = rcvd.reason if rcvd is not None else None
        self.rcvd = rcvd
        what = "close %s %r" % (self.code, self.reason) if rcvd is not None else "TCP close without a close frame"
        super().__init__("%s: connection ended (%s)" % (who, what))


def check(condition, message):
    if not condition:
        raise Fail(message)


ANY = object()
VERBOSE = False


def log(*args):
    if VERBOSE:
        print("  ..", *args, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# Network: addresses, websockets client, hand-written socket
# ------------------------------------------------------------------------------------------------

class Net:
    def __init__(self, url, ca=None, spread=None, timeout=5.0):
        parsed = urlparse(url)
        if parsed.scheme not in ("ws", "wss") or not parsed.hostname:
            raise ValueError("--url must be ws://host:port/signal or wss://...")
        self.url = url
        self.scheme = parsed.scheme
        self.host = parsed.hostname
        self.port = parsed.port or (443 if parsed.scheme == "wss" else 80)
        self.netloc = parsed.netloc
        self.path = parsed.path or "/"
        self.ssl = None
        if parsed.scheme == "wss":
            self.ssl = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
        if spread is None:
            spread = "source" if self._loopback_v4() else "none"
        self.spread = spread
        self.timeout = timeout
        rng = random.Random()
        self._counter = itertools.count(rng.randrange(0, 40000))
        self._rng = rng
        self._fixed = set()

    def _loopback_v4(self):
        if self.host == "localhost":
            return True
        try:
            address = ipaddress.ip_address(self.host)
        except ValueError:
            return False
        return address.version == 4 and address.is_loopback

    def _prefix(self):
        return "127" if self.spread == "source" else "10"

    def fresh_ip(self):
        """A client address used by no other connection of this run."""
        n = next(self._counter)
        a = 1 + (n // (254 * 256)) % 199
        return "%s.%d.%d.%d" % (self._prefix(), a, (n // 254) % 256, 1 + n % 254)

    def fixed_ip(self):
        """An address for one limit scenario: 127/10.200-254.x.y, random per run."""
        while True:
            ip = "%s.%d.%d.%d" % (self._prefix(), self._rng.randrange(200, 255), self._rng.randrange(256), self._rng.randrange(1, 255))
            if ip not in self._fixed:
                self._fixed.add(ip)
                return ip

    def headers_for(self, ip):
        return [("X-Forwarded-For", ip)] if self.spread == "xff" and ip else []

    def local_addr(self, ip):
        return (ip, 0) if self.spread == "source" and ip else None


class Peer:
    """A signaling client over PyPI `websockets` (no compression, no Origin, no client pings)."""

    def __init__(self, ws, key, name, net, challenge_msg, connected_at):
        self.ws = ws
        self.key = key
        self.name = name
        self.net = net
        self.challenge_msg = challenge_msg
        self.challenge = challenge_msg["challenge"]
        self.connected_at = connected_at
        self.registered = None

    @property
    def id(self):
        return id_of(self.key)

    @classmethod
    async def connect(cls, net, key=None, name="peer", ip=None, headers=None, origin=None):
        ip = ip or net.fresh_ip()
        kwargs = {}
        local = net.local_addr(ip)
        if local:
            kwargs["local_addr"] = local
        started = time.monotonic()
        ws = await websockets.connect(net.url, additional_headers=net.headers_for(ip) + list(headers or []),
                                      origin=origin, compression=None, max_size=None, ping_interval=None,
                                      proxy=None, user_agent_header=None, open_timeout=net.timeout,
                                      close_timeout=3, ssl=net.ssl, **kwargs)
        try:
            first = await asyncio.wait_for(ws.recv(), net.timeout)
        except ConnectionClosed as closed:
            raise Closed(name, closed.rcvd)
        except TimeoutError:
            raise Fail("%s: no challenge within %ss of the upgrade" % (name, net.timeout))
        check(isinstance(first, str), "%s: the challenge came in a binary frame" % name)
        message = strict_json(first)
        check(isinstance(message, dict) and message.get("type") == "challenge", "%s: first message is not a challenge: %s" % (name, first[:200]))
        check(message.get("v") == 2 and type(message.get("v")) is int, "%s: challenge v is %r" % (name, message.get("v")))
        try:
            check(len(b64decode_strict(message.get("challenge"))) == 32, "%s: challenge is not 32 bytes" % name)
        except ValueError as error:
            raise Fail("%s: challenge %r: %s" % (name, message.get("challenge"), error))
        return cls(ws, key or Ed25519PrivateKey.generate(), name, net, message, started)

    async def send(self, message):
        """A dict goes as compact JSON text; a str as a text frame; bytes as a binary frame."""
        if isinstance(message, dict) or isinstance(message, list):
            message = dumps(message)
        await self.ws.send(message)

    async def recv(self, timeout=None, what="a message"):
        timeout = self.net.timeout if timeout is None else timeout
        try:
            data = await asyncio.wait_for(self.ws.recv(), timeout)
        except TimeoutError:
            raise Fail("%s: no %s within %ss" % (self.name, what, timeout))
        except ConnectionClosed as closed:
            raise Closed(self.name, closed.rcvd)
        check(isinstance(data, str), "%s: the server sent a binary frame (§4: every message is text)" % self.name)
        check_forbidden(data, self.name)
        try:
            message = strict_json(data)
        except ValueError as error:
            raise Fail("%s: server message is not strict JSON (%s): %s" % (self.name, error, data[:200]))
        check(isinstance(message, dict), "%s: server message is not an object: %s" % (self.name, data[:200]))
        check(message.get("v") == 2 and type(message.get("v")) is int, "%s: server message without v 2: %s" % (self.name, data[:200]))
        log(self.name, "<-", data[:300])
        return message

    async def quiet(self, seconds=0.5):
        """Nothing arrives for `seconds` (the connection may stay open)."""
        try:
            data = await asyncio.wait_for(self.ws.recv(), seconds)
        except TimeoutError:
            return
        except ConnectionClosed as closed:
            raise Closed(self.name, closed.rcvd)
        raise Fail("%s: unexpected message: %s" % (self.name, str(data)[:200]))

    def register_message(self, challenge=None, ident=None, key=None):
        ident = self.id if ident is None else ident
        challenge = self.challenge if challenge is None else challenge
        sig = b64((key or self.key).sign(register_string(challenge, ident)))
        return {"type": "register", "v": 2, "id": ident, "sig": sig}

    async def register(self):
        started = time.time()
        await self.send(self.register_message())
        message = await self.recv(what="registered")
        if message.get("type") == "error":
            raise Fail("%s: register answered error %s (%s)" % (self.name, message.get("code"), message.get("message")))
        check_registered(message, self, started, time.time())
        self.registered = message
        return message

    async def expect(self, mtype, timeout=None):
        message = await self.recv(timeout, what=mtype)
        check(message.get("type") == mtype, "%s: expected %s, got %s" % (self.name, mtype, dumps(message)[:300]))
        return message

    async def expect_error(self, code, call=None, kind=None, timeout=None, context=""):
        """An `error` with this code; call/kind: None = absent, a value = equal, ANY = unchecked."""
        where = "%s%s" % (self.name, " (%s)" % context if context else "")
        try:
            message = await self.recv(timeout, what="error %s" % code)
        except Closed as closed:
            raise Fail("%s: expected error %s, but the connection ended (%s)" % (where, code,
                       "close %s %r" % (closed.code, closed.reason) if closed.rcvd else "no close frame"))
        check(message.get("type") == "error", "%s: expected error %s, got %s" % (where, code, dumps(message)[:300]))
        check(message.get("code") == code, "%s: expected error %s, got %s (%s)" % (where, code, message.get("code"), message.get("message")))
        check(isinstance(message.get("message"), str), "%s: error without a string message" % where)
        for field, want in (("call", call), ("kind", kind)):
            if want is ANY:
                continue
            if want is None:
                check(field not in message, "%s: error %s carries %s=%r, which it must not" % (where, code, field, message.get(field)))
            else:
                check(message.get(field) == want, "%s: error %s has %s=%r, want %r" % (where, code, field, message.get(field), want))
        return message

    async def expect_close(self, code, reason, timeout=None, context=""):
        where = "%s%s" % (self.name, " (%s)" % context if context else "")
        timeout = self.net.timeout if timeout is None else timeout
        try:
            data = await asyncio.wait_for(self.ws.recv(), timeout)
        except TimeoutError:
            raise Fail("%s: expected close %s %s, the connection stayed open" % (where, code, reason))
        except ConnectionClosed as closed:
            check(closed.rcvd is not None, "%s: expected close %s %s, got a TCP close without a close frame" % (where, code, reason))
            got = (closed.rcvd.code, closed.rcvd.reason)
            check(got == (code, reason), "%s: expected close %s %r, got %s %r" % (where, code, reason, got[0], got[1]))
            return
        raise Fail("%s: expected close %s %s, got a message: %s" % (where, code, reason, str(data)[:200]))

    async def expect_error_close(self, code, close_code=1008, context="", timeout=None):
        await self.expect_error(code, context=context, timeout=timeout)
        await self.expect_close(close_code, code, context=context)

    async def presence(self, ids, timeout=None):
        await self.send({"type": "presence", "v": 2, "ids": ids})
        message = await self.expect("presence", timeout)
        online = message.get("online")
        check(isinstance(online, dict), "%s: presence reply without an online object" % self.name)
        check(set(online) == set(ids), "%s: presence answered ids %s for %s" % (self.name, sorted(online), sorted(ids)))
        check(all(type(v) is bool for v in online.values()), "%s: presence values are not booleans" % self.name)
        return online

    async def kept(self):
        """The connection is open and serving: its own presence is true."""
        online = await self.presence([self.id])
        check(online[self.id] is True, "%s: own presence is false" % self.name)

    async def signal(self, to, **kw):
        message = make_signal(self.key, to, **kw)
        await self.send(message)
        return message

    async def expect_forwarded(self, sent, context=""):
        got = await self.recv(what="forwarded signal")
        check_forwarded(got, sent, self.name + (" (%s)" % context if context else ""))
        return got

    async def close(self):
        try:
            await asyncio.wait_for(self.ws.close(), 5)
        except Exception:
            pass


def check_forwarded(got, sent, who):
    check(got.get("type") == "signal", "%s: expected the forwarded signal, got %s" % (who, dumps(got)[:300]))
    check(set(got) == set(SIGNAL_FIELDS), "%s: forwarded signal has fields %s, want exactly %s" % (who, sorted(got), sorted(SIGNAL_FIELDS)))
    for field in SIGNAL_FIELDS:
        check(got[field] == sent[field] and type(got[field]) is type(sent[field]),
              "%s: forwarded %s is %r, sent %r" % (who, field, got[field], sent[field]))


# ------------------------------------------------------------------------------------------------
# registered / iceServers checks (§5.3, §8)
# ------------------------------------------------------------------------------------------------

OPTS = None   # the parsed command line, for the iceServers expectations

CF_STUN = ["stun:stun.cloudflare.com:3478", "stun:stun.cloudflare.com:53"]
CF_TURN = ["turn:turn.cloudflare.com:3478?transport=udp", "turn:turn.cloudflare.com:53?transport=udp",
           "turn:turn.cloudflare.com:3478?transport=tcp", "turn:turn.cloudflare.com:80?transport=tcp",
           "turns:turn.cloudflare.com:5349?transport=tcp", "turns:turn.cloudflare.com:443?transport=tcp"]
# What cloudflare_standin.py's modes must become after §8.3 filtering and splitting: lists of
# (urls, carries credentials).
CF_EXPECTED = {
    "ok": [(CF_STUN, False), (CF_TURN[:4], True), (CF_TURN[4:], True)],
    "ok-200": [(CF_STUN, False), (CF_TURN[:4], True), (CF_TURN[4:], True)],
    "slow": [(CF_STUN, False), (CF_TURN[:4], True), (CF_TURN[4:], True)],
    "foreign-hosts": [(CF_STUN, False), (CF_TURN[:4], True), (CF_TURN[4:], True)],
    "single-object": [(["stun:stun.cloudflare.com:3478"] + CF_TURN[:3], True), (CF_TURN[3:], True)],
}


def check_forbidden(text, who):
    """--forbid: no server message may contain that text (a secret of the server's)."""
    if getattr(OPTS, "forbid", None):
        check(OPTS.forbid not in text, "%s: a server message contains the --forbid text: %s" % (who, text[:200]))


def split_list(text):
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def chunks(items, size=4):
    return [items[i:i + size] for i in range(0, len(items), size)]


def check_registered(message, peer, started, finished):
    who = peer.name
    check(message.get("type") == "registered", "%s: expected registered, got %s" % (who, dumps(message)[:300]))
    check(message.get("id") == peer.id, "%s: registered id %r is not ours" % (who, message.get("id")))
    expires = message.get("iceExpiresAt")
    check(type(expires) is int, "%s: iceExpiresAt %r is not an integer" % (who, expires))
    check(int(started) + 3600 - 2 <= expires <= int(finished) + 3600 + 2,
          "%s: iceExpiresAt %d is not issue time + 3600 (now %d)" % (who, expires, int(finished)))
    servers = message.get("iceServers")
    check(isinstance(servers, list), "%s: iceServers is not an array" % who)
    for entry in servers:
        check(isinstance(entry, dict) and isinstance(entry.get("urls"), list), "%s: iceServers entry %r" % (who, entry))
        check(1 <= len(entry["urls"]) <= 4, "%s: an iceServers entry carries %d URLs (1-4)" % (who, len(entry["urls"])))
        check(all(isinstance(u, str) for u in entry["urls"]), "%s: non-string URL in %r" % (who, entry))
        check(("username" in entry) == ("credential" in entry), "%s: entry with only one of username/credential" % who)
        check(set(entry) <= {"urls", "username", "credential"}, "%s: entry fields %s" % (who, sorted(entry)))
    mode = OPTS.turn_mode if OPTS else "none"
    stun = split_list(OPTS.stun_urls) if OPTS and OPTS.stun_urls is not None else None
    shape = [(e["urls"], "username" in e) for e in servers]
    if mode == "none":
        check(all(not creds and all(u.startswith("stun:") for u in urls) for urls, creds in shape),
              "%s: none mode delivered non-STUN or credentialed entries: %s" % (who, dumps(servers)))
        if stun is not None:
            check(shape == [(c, False) for c in chunks(stun)], "%s: iceServers %s, want STUN_URLS %s in entries of 4" % (who, dumps(servers), stun))
    elif mode == "coturn":
        stun_entries = [s for s in shape if not s[1]]
        turn_entries = [e for e in servers if "username" in e]
        check(shape == stun_entries + [(e["urls"], True) for e in turn_entries], "%s: coturn mode: STUN entries must come first: %s" % (who, dumps(servers)))
        check(turn_entries, "%s: coturn mode delivered no TURN entry" % who)
        if stun is not None:
            check(stun_entries == [(c, False) for c in chunks(stun)], "%s: STUN entries %s, want %s" % (who, stun_entries, stun))
        if OPTS.turn_urls is not None:
            check([e["urls"] for e in turn_entries] == chunks(split_list(OPTS.turn_urls)), "%s: TURN entries %s, want TURN_URLS %s" % (who, dumps(turn_entries), OPTS.turn_urls))
        users = {(e["username"], e["credential"]) for e in turn_entries}
        check(len(users) == 1, "%s: TURN entries carry different credentials" % who)
        username, credential = users.pop()
        match = re.match(r"^(\d+):([0-9a-f]{32})$", username)
        check(match, "%s: coturn username %r is not <expiry>:<32 lowercase hex>" % (who, username))
        check(int(match.group(1)) == expires, "%s: username expiry %s != iceExpiresAt %d" % (who, match.group(1), expires))
        if OPTS.turn_secret is not None:
            check(credential == coturn_password(OPTS.turn_secret, username), "%s: credential is not base64(HMAC-SHA1(secret, username))" % who)
    elif mode == "cloudflare":
        want = CF_EXPECTED.get(OPTS.cloudflare_mode or "ok")
        if want is not None:
            check(shape == want, "%s: iceServers %s, want %s" % (who, dumps(servers), want))
        creds = {(e["username"], e["credential"]) for e in servers if "username" in e}
        check(len(creds) == 1, "%s: TURN entries carry different credentials" % who)
        if OPTS.cloudflare_record:
            check_cloudflare_record(who, creds.pop(), started, finished)


def check_cloudflare_record(who, creds, started, finished):
    with open(OPTS.cloudflare_record) as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    records = [r for r in records if "method" in r]
    check(records, "%s: the stand-in recorded no request" % who)
    last = records[-1]
    headers = {k.lower(): v for k, v in last["headers"]}
    check(last["method"] == "POST", "%s: upstream method %s" % (who, last["method"]))
    check(re.match(r"^/v1/turn/keys/[^/]+/credentials/generate-ice-servers$", last["path"]), "%s: upstream path %s" % (who, last["path"]))
    check(headers.get("authorization", "").startswith("Bearer "), "%s: upstream Authorization %r" % (who, headers.get("authorization")))
    check(headers.get("content-type", "").split(";")[0].strip() == "application/json", "%s: upstream Content-Type %r" % (who, headers.get("content-type")))
    try:
        body = strict_json(last["body"])
    except ValueError:
        body = None
    check(body == {"ttl": 3600} and type(body["ttl"]) is int, "%s: upstream body %r, want {\"ttl\": 3600}" % (who, last["body"]))
    check(last.get("authorized") is True, "%s: the stand-in refused the token or key id" % who)
    answered = last.get("answered") or {}
    check((answered.get("username"), answered.get("credential")) == creds, "%s: delivered credentials differ from the stand-in's" % who)


# ------------------------------------------------------------------------------------------------
# Hand-written socket: exact HTTP responses and arbitrary frames
# ------------------------------------------------------------------------------------------------

class Response:
    def __init__(self, status_line, headers, body):
        self.status_line = status_line
        parts = status_line.split(" ", 2)
        self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
        self.headers = headers
        self.body = body

    def get(self, name):
        values = self.get_all(name)
        return values[0] if values else None

    def get_all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def describe(self):
        return "%s %r" % (self.status_line, self.body[:100])


class Raw:
    """One TCP (or TLS) connection driven by hand."""

    def __init__(self, net, reader, writer, ip):
        self.net = net
        self.reader = reader
        self.writer = writer
        self.ip = ip
        self.response = None
        self.pings = []          # monotonic times of server pings
        self.auto_pong = True
        self.eof = False

    @classmethod
    async def open(cls, net, ip=None, rcvbuf=None):
        """rcvbuf: a small SO_RCVBUF set before connecting (a reader the server must not outpace)."""
        ip = ip or net.fresh_ip()
        kwargs = {}
        if net.ssl:
            kwargs["ssl"] = net.ssl
            kwargs["server_hostname"] = net.host
        if rcvbuf is None:
            if net.local_addr(ip):
                kwargs["local_addr"] = net.local_addr(ip)
            connecting = asyncio.open_connection(net.host, net.port, limit=1 << 20, **kwargs)
        else:
            family, kind, proto, _, address = (await asyncio.get_running_loop().getaddrinfo(net.host, net.port, type=socket.SOCK_STREAM))[0]
            sock = socket.socket(family, kind, proto)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            if net.local_addr(ip):
                sock.bind(net.local_addr(ip))
            sock.setblocking(False)
            await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, address), net.timeout)
            connecting = asyncio.open_connection(sock=sock, limit=1 << 20, **kwargs)
        reader, writer = await asyncio.wait_for(connecting, net.timeout)
        return cls(net, reader, writer, ip)

    def upgrade_request(self, target="/signal", headers=None, upgrade=True, key=None):
        lines = ["GET %s HTTP/1.1" % target, "Host: %s" % self.net.netloc]
        if upgrade:
            self.ws_key = key or b64(os.urandom(16))
            lines += ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Key: %s" % self.ws_key, "Sec-WebSocket-Version: 13"]
        lines += ["%s: %s" % kv for kv in self.net.headers_for(self.ip)]
        lines += ["%s: %s" % kv for kv in (headers or [])]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    async def request(self, target="/signal", headers=None, upgrade=True, raw=None):
        """Sends a request (or raw bytes) and reads the response head, and its body unless 101."""
        self.writer.write(raw if raw is not None else self.upgrade_request(target, headers, upgrade))
        await self.writer.drain()
        try:
            head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), self.net.timeout)
        except asyncio.IncompleteReadError as partial:
            raise Fail("connection closed before a full response head (%r)" % partial.partial[:100])
        except TimeoutError:
            raise Fail("no response head within %ss to %s" % (self.net.timeout, target))
        lines = head.decode("latin-1").split("\r\n")[:-2]
        headers_out = []
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers_out.append((name.strip(), value.strip()))
        response = Response(lines[0], headers_out, b"")
        if response.status != 101:
            response.body = await self._body(response)
        self.response = response
        return response

    async def _body(self, response):
        length = response.get("content-length")
        try:
            if length is not None:
                return await asyncio.wait_for(self.reader.readexactly(int(length)), self.net.timeout)
            if (response.get("transfer-encoding") or "").lower() == "chunked":
                out = b""
                while True:
                    size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                    chunk = await self.reader.readexactly(size + 2)
                    out += chunk[:-2]
                    if size == 0:
                        return out
            return await asyncio.wait_for(self.reader.read(), self.net.timeout)
        except (asyncio.IncompleteReadError, TimeoutError) as error:
            raise Fail("%s: body unreadable (%s)" % (response.status_line, type(error).__name__))

    async def upgrade(self, target="/signal", headers=None):
        response = await self.request(target, headers)
        check(response.status == 101, "upgrade refused: %s" % response.describe())
        return response

    def send_frame(self, opcode, payload, fin=True, rsv=0, mask=True, first_byte=None):
        byte0 = first_byte if first_byte is not None else (0x80 if fin else 0) | (rsv << 4) | opcode
        length = len(payload)
        maskbit = 0x80 if mask else 0
        if length < 126:
            header = bytes([byte0, maskbit | length])
        elif length < 65536:
            header = bytes([byte0, maskbit | 126]) + struct.pack(">H", length)
        else:
            header = bytes([byte0, maskbit | 127]) + struct.pack(">Q", length)
        if mask:
            key = os.urandom(4)
            masked = bytes(b ^ key[i % 4] for i, b in enumerate(payload)) if length < 4096 else _mask(payload, key)
            self.writer.write(header + key + masked)
        else:
            self.writer.write(header + payload)

    async def drain(self):
        try:
            await self.writer.drain()
        except (ConnectionError, OSError):
            pass

    async def send_text(self, data):
        self.send_frame(0x1, data.encode() if isinstance(data, str) else data)
        await self.drain()

    async def frame(self, timeout=None):
        """(fin, rsv, opcode, masked, payload) of the next frame, answering pings; None at EOF."""
        timeout = self.net.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            try:
                b0, b1 = await asyncio.wait_for(self.reader.readexactly(2), remaining)
                length = b1 & 0x7F
                if length == 126:
                    length = struct.unpack(">H", await self.reader.readexactly(2))[0]
                elif length == 127:
                    length = struct.unpack(">Q", await self.reader.readexactly(8))[0]
                key = await self.reader.readexactly(4) if b1 & 0x80 else None
                payload = await self.reader.readexactly(length)
            except TimeoutError:      # a subclass of OSError: not an EOF
                raise
            except (asyncio.IncompleteReadError, ConnectionError, OSError):
                self.eof = True
                return None
            if key:
                payload = _mask(payload, key)
            opcode = b0 & 0x0F
            if opcode == 0x9:
                self.pings.append(time.monotonic())
                if self.auto_pong:
                    self.send_frame(0xA, payload)
                    await self.drain()
                continue
            return (bool(b0 & 0x80), (b0 >> 4) & 0x7, opcode, bool(b1 & 0x80), payload)

    async def message(self, timeout=None, what="a message"):
        """The next text frame as strict JSON (a close or EOF raises Fail)."""
        try:
            frame = await self.frame(timeout)
        except TimeoutError:
            raise Fail("raw: no %s within %ss" % (what, self.net.timeout if timeout is None else timeout))
        check(frame is not None, "raw: TCP closed while waiting for %s" % what)
        fin, rsv, opcode, masked, payload = frame
        if opcode == 0x8:
            code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
            raise Fail("raw: close %s %r while waiting for %s" % (code, payload[2:].decode(errors="replace"), what))
        check(opcode == 0x1 and fin and rsv == 0 and not masked, "raw: server frame fin=%s rsv=%d opcode=%d masked=%s" % (fin, rsv, opcode, masked))
        check_forbidden(payload.decode(errors="replace"), "raw")
        message = strict_json(payload.decode())
        log("raw <-", payload[:300])
        return message

    async def close_frame(self, timeout=None):
        """[code, reason] of the next close frame, skipping data frames; None if TCP closed first."""
        while True:
            try:
                frame = await self.frame(timeout)
            except TimeoutError:
                raise Fail("raw: no close within %ss" % (self.net.timeout if timeout is None else timeout))
            if frame is None:
                return None
            if frame[2] == 0x8:
                payload = frame[4]
                return [struct.unpack(">H", payload[:2])[0], payload[2:].decode(errors="replace")] if len(payload) >= 2 else [None, ""]
            log("raw (skipped before close) <-", frame[4][:200])

    async def register(self, key):
        challenge = await self.message(what="challenge")
        check(challenge.get("type") == "challenge", "raw: first message %r" % challenge)
        ident = id_of(key)
        await self.send_text(dumps({"type": "register", "v": 2, "id": ident,
                                    "sig": b64(key.sign(register_string(challenge["challenge"], ident)))}))
        registered = await self.message(what="registered")
        check(registered.get("type") == "registered", "raw: register answered %r" % registered)
        return registered

    async def close(self, code=1000):
        """Sends a close frame, waits (up to 2 s) for the server's close frame or EOF, drops TCP."""
        if not self.eof and self.response is not None and self.response.status == 101:
            try:
                self.send_frame(0x8, struct.pack(">H", code))
                await self.drain()
                deadline = time.monotonic() + 2
                while time.monotonic() < deadline:
                    frame = await self.frame(timeout=deadline - time.monotonic())
                    if frame is None or frame[2] == 0x8:
                        break
            except Exception:
                pass
        await self.abort()

    async def abort(self):
        try:
            self.writer.close()
            await asyncio.wait_for(self.writer.wait_closed(), 2)
        except Exception:
            pass


def _mask(payload, key):
    n = len(payload)
    big = int.from_bytes(payload, "big")
    k = int.from_bytes((key * (n // 4 + 1))[:n], "big")
    return (big ^ k).to_bytes(n, "big")


def ws_accept(key):
    return b64(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())


# ------------------------------------------------------------------------------------------------
# Scenario machinery
# ------------------------------------------------------------------------------------------------

class Ctx:
    def __init__(self, net, opts):
        self.net = net
        self.opts = opts
        self.open = []
        self.names = itertools.count(1)

    async def peer(self, key=None, name=None, ip=None, register=False, headers=None, origin=None):
        p = await Peer.connect(self.net, key, name or "peer%d" % next(self.names), ip, headers, origin)
        self.open.append(p)
        if register:
            await p.register()
        return p

    async def raw(self, ip=None, rcvbuf=None):
        r = await Raw.open(self.net, ip, rcvbuf)
        self.open.append(r)
        return r

    async def http(self, target="/signal", headers=None, upgrade=True, ip=None):
        """One request on a fresh connection; the response (the connection is then closed)."""
        r = await self.raw(ip)
        try:
            return await r.request(target, headers, upgrade)
        finally:
            await r.abort()

    async def refused(self, status, body, target="/signal", headers=None, upgrade=True, ip=None, context=""):
        response = await self.http(target, headers, upgrade, ip)
        where = "%s%s" % (target, " (%s)" % context if context else "")
        check(response.status == status and response.body == body.encode(),
              "%s: got %s, want %d %r" % (where, response.describe(), status, body))
        content_type = response.get("content-type") or ""
        check(content_type.split(";")[0].strip().lower() == "text/plain", "%s: Content-Type %r, want text/plain" % (where, content_type))
        return response

    async def cleanup(self):
        await asyncio.gather(*(c.close() for c in self.open), return_exceptions=True)
        self.open = []


async def serving(ctx):
    """A fresh pair registers, sees each other online and exchanges a signal (the server still serves)."""
    a = await ctx.peer(name="fresh-A", register=True)
    b = await ctx.peer(name="fresh-B", register=True)
    online = await a.presence([b.id])
    check(online[b.id] is True, "fresh-A: fresh-B not online")
    sent = await a.signal(b.id, kind="offer")
    await b.expect_forwarded(sent)
    await a.close()
    await b.close()


class Scenario:
    def __init__(self, name, fn, default, timeout, needs):
        self.name, self.fn, self.default, self.timeout, self.needs = name, fn, default, timeout, needs
        doc = (fn.__doc__ or "").strip()
        self.summary = " ".join(doc.split())


SCENARIOS = {}


def scenario(name, default=True, timeout=60, needs=()):
    def wrap(fn):
        SCENARIOS[name] = Scenario(name, fn, default, timeout, needs)
        return fn
    return wrap


# ------------------------------------------------------------------------------------------------
# Scenarios: offline self-check
# ------------------------------------------------------------------------------------------------

@scenario("vectors")
async def sc_vectors(ctx):
    """No server needed. This client's signed strings, IDs and coturn credentials reproduce the
    §12 and §8.2 vectors (Alice seed a1x32, Bob b1x32)."""
    alice = Ed25519PrivateKey.from_private_bytes(b"\xa1" * 32)
    bob = Ed25519PrivateKey.from_private_bytes(b"\xb1" * 32)
    A = "BC7CBCB5636375FA1D82434D466724D92377F53B980695DD49D26D0CE12205A5"
    B = "4721B5B632272E65A68DDA7AC25B4185F8B01916DB185C14287DB92E2B770FAE"
    check(id_of(alice) == A and id_of(bob) == B, "IDs of the §12 seeds")
    check(display_id(A) == "CT2-BC7C-BCB5-6363-75FA-1D82-434D-4667-24D9-2377-F53B-9806-95DD-49D2-6D0C-E122-05A5", "display form")
    challenge = b64(bytes(range(32)))
    check(challenge == "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "challenge vector")
    s = register_string(challenge, A)
    check(len(s) == 130, "register string is %d bytes" % len(s))
    check(b64(alice.sign(s)) == "vxWMP5xC1mNuXW2j8MSGyxDZEYKPKcpn1UbwX+WaUzYCF20I/oPsd97RE9qCxKF7zMnI01/dlNCUQYNNlL9uCg==", "register sig")
    agreement = bytes.fromhex("3c5c6ce2dd99e10d2c3de05d773aa15e3e6d971ed4e41389c93b4bbdda177212")
    check(b64(alice.sign(identity_binding(agreement))) == "+iHvQBv1lRcBf3NP7Ikc6XP6rk4WIPi0CI4EQYLbKLUnF+Q1Mcfgg2bOcpOJ96MniQqfJUOJrmSHtlLv9gIzBA==", "identitySig")
    call = "6f1c2b8a-3d4e-4f50-9a61-7b8c9d0e1f20"
    body = b'{"agreementKey":"PFxs4t2Z4Q0sPeBddzqhXj5tlx7U5BOJyTtLvdoXchI=","identitySig":"+iHvQBv1lRcBf3NP7Ikc6XP6rk4WIPi0CI4EQYLbKLUnF+Q1Mcfgg2bOcpOJ96MniQqfJUOJrmSHtlLv9gIzBA==","sdp":"v=0\\r\\n"}'
    offer = make_signal(alice, B, kind="offer", body=body, call=call)
    check(len(signal_string("offer", A, B, call, offer["body"])) == 440, "signal string length")
    check(offer["sig"] == "4sLYBtP/C3BY/KUW5/js8vQvePXt3CDl7piEeI/iKTiop6hKzPEAj1eu98zq8bGrJrKOVHdyxPMxZF9QMWGSDQ==", "offer sig")
    channel = make_signal(bob, A, kind="channel", body=b"{}", call=call)
    check(channel["body"] == "e30=", "channel body")
    check(channel["sig"] == "ZvDNeMl7trkdBBuMXVUhaHP8WlDhYH5q+WumZ0RsFdO+eimW0JghzyS8NLoa/S4ah9EjE9W7cPADmOoEue9RDA==", "channel sig")
    for secret, user, password in (("foobar", "1599491771", "Tpz/nKkyvX/vMSLKvL4sbtBt8Vs="),
                                   ("logen", "1599491771:ninefingers", "J29oEQUjl4DZR6tZ/JfUdnsxKm4="),
                                   ("tether-turn-secret", "1700003600:00112233445566778899aabbccddeeff", "z/Watd7SW/6nf39LUgvrJsUP/nc=")):
        check(coturn_password(secret, user) == password, "coturn vector %s" % user)
    for bad in ("e31=", "e30", "e30=\n", "e3 0=", "e3-=", "====", "e30==", "e"):
        try:
            b64decode_strict(bad)
        except ValueError:
            continue
        raise Fail("strict base64 accepted %r" % bad)
    check(b64decode_strict("e30=") == b"{}" and b64decode_strict("") == b"", "strict base64 rejects good input")


# ------------------------------------------------------------------------------------------------
# Scenarios: HTTP refusals (§4, §13.1)
# ------------------------------------------------------------------------------------------------

@scenario("http-not-found")
async def sc_http_not_found(ctx):
    """Upgrades and plain GETs on other paths (/, /signal/, /Signal, /signalx, //signal, /other)
    are refused 404 `not found` (text/plain, exact body)."""
    for target in ("/", "/signal/", "/Signal", "/SIGNAL", "/signalx", "//signal", "/other", "/signal/x"):
        await ctx.refused(404, "not found", target)
    await ctx.refused(404, "not found", "/other", upgrade=False, context="plain GET")
    await serving(ctx)


@scenario("http-query")
async def sc_http_query(ctx):
    """An upgrade to /signal with a query, even a bare `?`, is refused 400 `query not allowed`."""
    for target in ("/signal?x=1", "/signal?", "/signal?relay=wss://a/signal", "/signal??"):
        await ctx.refused(400, "query not allowed", target)
    await serving(ctx)


@scenario("http-origin")
async def sc_http_origin(ctx):
    """With no SIGNAL_ALLOWED_ORIGINS (default), any Origin is refused 403 `forbidden`: a web
    origin, `null`, an empty Origin header, and two Origin headers."""
    await ctx.refused(403, "forbidden", headers=[("Origin", "https://evil.example")])
    await ctx.refused(403, "forbidden", headers=[("Origin", "null")], context="Origin: null")
    await ctx.refused(403, "forbidden", headers=[("Origin", "")], context="empty Origin")
    await ctx.refused(403, "forbidden", headers=[("Origin", "https://a.example"), ("Origin", "https://b.example")], context="two Origins")
    await ctx.refused(403, "forbidden", headers=[("origin", "http://127.0.0.1")], context="lowercase header name")
    await serving(ctx)


@scenario("http-no-upgrade")
async def sc_http_no_upgrade(ctx):
    """A plain GET /signal without upgrade headers is answered 426 `upgrade required`."""
    await ctx.refused(426, "upgrade required", "/signal", upgrade=False)
    await serving(ctx)


@scenario("http-order")
async def sc_http_order(ctx):
    """The refusal checks run in §13.1's order: path before query before Origin
    (/x?y with Origin -> 404; /signal? with Origin -> 400)."""
    await ctx.refused(404, "not found", "/x?y=1", headers=[("Origin", "https://evil.example")])
    await ctx.refused(404, "not found", "/x?", headers=[("Origin", "https://evil.example")])
    await ctx.refused(400, "query not allowed", "/signal?", headers=[("Origin", "https://evil.example")])
    await serving(ctx)


@scenario("handshake")
async def sc_handshake(ctx):
    """A correct upgrade gets 101 with Upgrade/Connection/Sec-WebSocket-Accept right, no
    subprotocol and no extensions."""
    raw = await ctx.raw()
    response = await raw.upgrade()
    check((response.get("upgrade") or "").lower() == "websocket", "Upgrade header %r" % response.get("upgrade"))
    check("upgrade" in (response.get("connection") or "").lower(), "Connection header %r" % response.get("connection"))
    check(response.get("sec-websocket-accept") == ws_accept(raw.ws_key), "Sec-WebSocket-Accept %r" % response.get("sec-websocket-accept"))
    check(response.get("sec-websocket-protocol") is None, "a subprotocol was selected")
    check(response.get("sec-websocket-extensions") is None, "extensions negotiated: %r" % response.get("sec-websocket-extensions"))


@scenario("no-compression")
async def sc_no_compression(ctx):
    """permessage-deflate offered by the client is never accepted: no Sec-WebSocket-Extensions
    in the 101, and the challenge frame has RSV1 clear."""
    for offer in ("permessage-deflate; client_max_window_bits", "permessage-deflate",
                  "permessage-deflate; server_no_context_takeover; client_no_context_takeover, permessage-deflate"):
        raw = await ctx.raw()
        response = await raw.upgrade(headers=[("Sec-WebSocket-Extensions", offer)])
        check(response.get("sec-websocket-extensions") is None, "server accepted extensions %r" % response.get("sec-websocket-extensions"))
        frame = await raw.frame()
        check(frame is not None and frame[1] == 0 and frame[2] == 0x1, "challenge frame rsv/opcode %r" % (frame[:3] if frame else None,))
        await raw.close()
    # and through the library: a client that asks for compression talks uncompressed
    ws = await websockets.connect(ctx.net.url, compression="deflate", proxy=None, origin=None, ssl=ctx.net.ssl,
                                  additional_headers=ctx.net.headers_for(ctx.net.fresh_ip()), max_size=None, ping_interval=None,
                                  **({"local_addr": ctx.net.local_addr(ctx.net.fresh_ip())} if ctx.net.spread == "source" else {}))
    try:
        check(not ws.protocol.extensions, "websockets negotiated %r" % ws.protocol.extensions)
    finally:
        await ws.close()


# ------------------------------------------------------------------------------------------------
# Scenarios: challenge and registration (§5.1-§5.3, §6.1)
# ------------------------------------------------------------------------------------------------

@scenario("challenge")
async def sc_challenge(ctx):
    """The challenge is sent at once after the 101, unasked, as one unmasked FIN text frame
    {"type":"challenge","v":2,"challenge":<b64std of 32 bytes>}, exactly once; every connection
    gets a different one."""
    seen = set()
    for _ in range(3):
        raw = await ctx.raw()
        await raw.upgrade()
        started = time.monotonic()
        frame = await raw.frame(timeout=2)
        elapsed = time.monotonic() - started
        check(frame is not None, "no challenge frame (TCP closed)")
        fin, rsv, opcode, masked, payload = frame
        check(elapsed < 1.0, "challenge took %.2fs" % elapsed)
        check(fin and rsv == 0 and opcode == 0x1 and not masked, "challenge frame fin=%s rsv=%d opcode=%d masked=%s" % (fin, rsv, opcode, masked))
        message = strict_json(payload.decode())
        check(isinstance(message, dict) and "challenge" in message, "challenge message %r" % (message,))
        check(message["type"] == "challenge" and message["v"] == 2 and type(message["v"]) is int, "challenge %r" % message)
        try:
            check(len(b64decode_strict(message["challenge"])) == 32, "challenge length")
        except ValueError as error:
            raise Fail("challenge %r: %s" % (message["challenge"], error))
        seen.add(message["challenge"])
        try:
            extra = await raw.frame(timeout=1.5)
        except TimeoutError:
            extra = "none"
        check(extra == "none", "a second frame after the challenge: %r" % (extra,))
        await raw.close()
    check(len(seen) == 3, "challenges repeat across connections")


@scenario("register")
async def sc_register(ctx):
    """register -> registered {id, iceServers, iceExpiresAt = now + 3600} (checked against
    --turn-mode and its options); the ID is then online for others, and the registered client
    can query presence. The §12 vector's sig cannot be replayed: see register-bad-signature."""
    a = await ctx.peer(name="A")
    registered = await a.register()
    check(set(registered) >= {"type", "v", "id", "iceServers", "iceExpiresAt"}, "registered fields %s" % sorted(registered))
    b = await ctx.peer(name="B", register=True)
    online = await b.presence([a.id, b.id])
    check(online == {a.id: True, b.id: True}, "presence %r" % online)
    await a.quiet(0.3)


@scenario("register-binary")
async def sc_register_binary(ctx):
    """Binary frames are parsed like text: a register, a presence query and a signal sent in
    binary frames work; every reply and the forwarded signal are text frames."""
    a = await ctx.peer(name="A")
    started = time.time()
    await a.send(dumps(a.register_message()).encode())
    check_registered(await a.expect("registered"), a, started, time.time())
    b = await ctx.peer(name="B", register=True)
    await a.send(dumps({"type": "presence", "v": 2, "ids": [b.id]}).encode())
    reply = await a.expect("presence")
    check(reply["online"] == {b.id: True}, "presence %r" % reply)
    sent = make_signal(a.key, b.id, kind="offer")
    await a.send(dumps(sent).encode())
    await b.expect_forwarded(sent)


@scenario("register-extra-fields")
async def sc_register_extra(ctx):
    """Unknown fields in register are ignored, numbers in them unchecked (1.5, 1e400, 2^64)."""
    a = await ctx.peer(name="A")
    message = a.register_message()
    message.update({"x": "@F@", "y": "@E@", "z": "@B@", "w": {"nested": [1, None, True]}})
    started = time.time()
    await a.send(raw_json(message, F="1.5", E="1e400", B="18446744073709551616"))
    check_registered(await a.expect("registered"), a, started, time.time())


@scenario("register-bad-signature")
async def sc_register_bad_signature(ctx):
    """A register whose signature fails -> error bad_signature, close 1008 `bad_signature`:
    random bytes, over another challenge, by another key, with a trailing newline, the §12 vector
    replayed, and an ID that is not a curve point."""
    alice = Ed25519PrivateKey.from_private_bytes(b"\xa1" * 32)
    vector_sig = "vxWMP5xC1mNuXW2j8MSGyxDZEYKPKcpn1UbwX+WaUzYCF20I/oPsd97RE9qCxKF7zMnI01/dlNCUQYNNlL9uCg=="

    def variant(name, p):
        other = b64(bytes(b ^ 1 if i == 0 else b for i, b in enumerate(b64decode_strict(p.challenge))))
        return {"random": {"type": "register", "v": 2, "id": p.id, "sig": b64(os.urandom(64))},
                "other challenge": p.register_message(challenge=other),
                "other key": p.register_message(key=Ed25519PrivateKey.generate()),
                "trailing newline": {"type": "register", "v": 2, "id": p.id, "sig": b64(p.key.sign(register_string(p.challenge, p.id) + b"\n"))},
                "vector replay": {"type": "register", "v": 2, "id": id_of(alice), "sig": vector_sig},
                "not a point": {"type": "register", "v": 2, "id": non_point_id(), "sig": b64(os.urandom(64))}}[name]
    for name in ("random", "other challenge", "other key", "trailing newline", "vector replay", "not a point"):
        p = await ctx.peer(name="bad-sig")
        await p.send(variant(name, p))
        await p.expect_error_close("bad_signature", context=name)
    await serving(ctx)


@scenario("register-bad-id")
async def sc_register_bad_id(ctx):
    """A register whose id is not canonical -> bad_message, close 1008 `bad_message`:
    lowercase, CT2- display form, 63/65 characters, a 32-hex legacy label, non-hex, number,
    null, missing (each signed over the string it carries)."""
    cases = [("lowercase", lambda i: i.lower()), ("CT2- form", display_id), ("CT2- prefix only", lambda i: "CT2-" + i),
             ("63 chars", lambda i: i[:63]), ("65 chars", lambda i: i + "A"), ("legacy 32 hex", lambda i: i[:32]),
             ("non-hex", lambda i: "G" + i[1:]), ("spaces", lambda i: " " + i), ("number", lambda i: 12), ("null", lambda i: None)]
    for name, transform in cases:
        p = await ctx.peer(name="bad-id")
        ident = transform(p.id)
        sig = b64(p.key.sign(register_string(p.challenge, str(ident))))
        await p.send({"type": "register", "v": 2, "id": ident, "sig": sig})
        await p.expect_error_close("bad_message", context=name)
    p = await ctx.peer(name="no-id")
    await p.send({"type": "register", "v": 2, "sig": b64(p.key.sign(register_string(p.challenge, p.id)))})
    await p.expect_error_close("bad_message", context="missing id")
    await serving(ctx)


@scenario("register-bad-fields")
async def sc_register_bad_fields(ctx):
    """A malformed register -> bad_message, close 1008 `bad_message`: v 1/3/"2"/2.0/2e0/null/
    missing; sig missing, not a string, not base64, base64url, unpadded, with a space,
    non-canonical pad bits, 63 or 65 bytes."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    def sig_variant(name, p):
        text = b64(p.key.sign(register_string(p.challenge, p.id)))
        data = b64decode_strict(text)
        return {"missing": None, "number": 5, "not base64": "!" * 88,
                "base64url": "-" + text[1:],                 # '-' where b64std has no such character
                "unpadded": text.rstrip("="), "space": text[:40] + " " + text[40:],
                "pad bits": text[:85] + alphabet[alphabet.index(text[85]) | 1] + "==",
                "63 bytes": b64(data[:63]), "65 bytes": b64(data + b"\0")}[name]
    for v_name, v_raw in (("v 1", "1"), ("v 3", "3"), ("v string", '"2"'), ("v 2.0", "2.0"), ("v 2e0", "2e0"),
                          ("v null", "null"), ("v true", "true")):
        p = await ctx.peer(name="bad-v")
        message = p.register_message()
        message["v"] = "@V@"
        await p.send(raw_json(message, V=v_raw))
        await p.expect_error_close("bad_message", context=v_name)
    p = await ctx.peer(name="no-v")
    message = p.register_message()
    del message["v"]
    await p.send(message)
    await p.expect_error_close("bad_message", context="v missing")
    for name in ("missing", "number", "not base64", "base64url", "unpadded", "space", "pad bits", "63 bytes", "65 bytes"):
        p = await ctx.peer(name="bad-sig-field")
        value = sig_variant(name, p)
        message = p.register_message()
        if value is None:
            del message["sig"]
        else:
            message["sig"] = value
        await p.send(message)
        await p.expect_error_close("bad_message", context="sig " + name)
    await serving(ctx)


@scenario("pre-register-garbage")
async def sc_pre_register_garbage(ctx):
    """Before registration, anything that is not a JSON object with a known type -> bad_message,
    close 1008: not JSON, empty, array, string, number, null, {}, unknown type, type not a
    string, type with other case, and server-only types (challenge, registered, error)."""
    cases = ["not json", "", "[]", '"register"', "1", "null", "{}", '{"v":2}', '{"type":"hello","v":2}',
             '{"type":2,"v":2}', '{"type":"Register","v":2}', '{"type":"register ","v":2}', '{"type":"challenge","v":2}',
             '{"type":"registered","v":2}', '{"type":"error","v":2}', '{"type":"register","v":2', '{"type":"register","v":2}}',
             '{"type":"register","v":2}{}']
    for text in cases:
        p = await ctx.peer(name="garbage")
        await p.send(text)
        await p.expect_error_close("bad_message", context=repr(text))
    await serving(ctx)


@scenario("post-register-garbage")
async def sc_post_register_garbage(ctx):
    """After registration, messages that are not a JSON object with a known type get
    bad_message and the connection is kept: not JSON, empty, array, null, {}, unknown type,
    type not a string, server-only types; the ID stays online."""
    a = await ctx.peer(name="A", register=True)
    for text in ("not json", "", "[]", "null", "{}", '{"v":2}', '{"type":"hello","v":2}', '{"type":2,"v":2}',
                 '{"type":"Signal","v":2}', '{"type":"challenge","v":2}', '{"type":"registered","v":2}', '{"type":"error","v":2}'):
        await a.send(text)
        await a.expect_error("bad_message", context=repr(text))
    await a.kept()
    b = await ctx.peer(name="B", register=True)
    sent = await b.signal(a.id, kind="offer")
    await a.expect_forwarded(sent)


@scenario("duplicate-keys")
async def sc_duplicate_keys(ctx):
    """JSON with a duplicate key is bad_message: a register with "id" or "type" twice (close
    1008), and after registration a presence with "ids" twice and a signal with "to" twice
    (kept, not forwarded)."""
    p = await ctx.peer(name="dup-id")
    message = p.register_message()
    await p.send('{"type":"register","v":2,"id":"%s","id":"%s","sig":"%s"}' % (p.id, p.id, message["sig"]))
    await p.expect_error_close("bad_message", context="id twice")
    p = await ctx.peer(name="dup-type")
    message = p.register_message()
    await p.send('{"type":"register","type":"register","v":2,"id":"%s","sig":"%s"}' % (p.id, message["sig"]))
    await p.expect_error_close("bad_message", context="type twice")
    p = await ctx.peer(name="dup-v")
    await p.send('{"type":"register","v":2,"v":2,"id":"%s","sig":"%s"}' % (p.id, p.register_message()["sig"]))
    await p.expect_error_close("bad_message", context="v twice")
    a = await ctx.peer(name="A", register=True)
    b = await ctx.peer(name="B", register=True)
    await a.send('{"type":"presence","v":2,"ids":["%s"],"ids":["%s"]}' % (b.id, b.id))
    await a.expect_error("bad_message", context="ids twice")
    sent = make_signal(a.key, b.id, kind="offer")
    text = dumps(sent)
    await a.send(text[:-1] + ',"to":"%s"}' % b.id)
    await a.expect_error("bad_message", call=ANY, kind=ANY, context="to twice")
    await a.send(text[:-1] + ',"x":1,"x":2}')
    await a.expect_error("bad_message", call=ANY, kind=ANY, context="unknown field twice")
    await b.quiet(0.5)
    await a.kept()
    await serving(ctx)


@scenario("challenge-expired", timeout=30)
async def sc_challenge_expired(ctx):
    """No register within 10 s of the challenge -> error challenge_expired and close 1008
    `challenge_expired`, not before ~10 s."""
    p = await ctx.peer(name="idle")
    await p.expect_error("challenge_expired", timeout=14)
    elapsed = time.monotonic() - p.connected_at
    check(9.5 <= elapsed <= 12.5, "challenge_expired after %.1fs (want ~10 s)" % elapsed)
    await p.expect_close(1008, "challenge_expired")
    await serving(ctx)


@scenario("challenge-late-register", timeout=30)
async def sc_challenge_late(ctx):
    """A register sent 10.5 s after the challenge (correctly signed) -> challenge_expired, close
    1008, whether the server's timer or the late register triggers it."""
    p = await ctx.peer(name="late")
    await asyncio.sleep(max(0, p.connected_at + 10.5 - time.monotonic()))
    try:
        await p.send(p.register_message())
    except ConnectionClosed:
        pass
    await p.expect_error("challenge_expired")
    await p.expect_close(1008, "challenge_expired")
    await serving(ctx)


@scenario("challenge-in-time", timeout=30)
async def sc_challenge_in_time(ctx):
    """A register 8.5 s after the challenge succeeds, and the connection survives past the
    10 s mark (the timer stops once register passes)."""
    p = await ctx.peer(name="slow")
    await asyncio.sleep(max(0, p.connected_at + 8.5 - time.monotonic()))
    await p.register()
    await asyncio.sleep(max(0, p.connected_at + 11.5 - time.monotonic()))
    await p.quiet(0.1)
    await p.kept()


@scenario("duplicate-id")
async def sc_duplicate_id(ctx):
    """A second connection registering a live ID -> duplicate_id, close 1008 `duplicate_id`;
    the first connection is unaffected (still online, still receives signals); once it closes,
    the ID can register again at once."""
    key = Ed25519PrivateKey.generate()
    a = await ctx.peer(key=key, name="A", register=True)
    c = await ctx.peer(name="C", register=True)
    twin = await ctx.peer(key=key, name="A-twin")
    await twin.send(twin.register_message())
    await twin.expect_error_close("duplicate_id")
    online = await c.presence([a.id])
    check(online[a.id] is True, "A is no longer online after the duplicate")
    sent = await c.signal(a.id, kind="offer")
    await a.expect_forwarded(sent, "after the duplicate")
    await a.kept()
    await a.close()
    again = await ctx.peer(key=key, name="A-again")
    await again.register()


@scenario("already-registered")
async def sc_already_registered(ctx):
    """register after a successful registration -> already_registered, kept, whatever it carries
    (a correct repeat, a bare {"type":"register","v":2}, another ID); the first registration
    is unaffected."""
    a = await ctx.peer(name="A", register=True)
    other = Ed25519PrivateKey.generate()
    for name, message in (("repeat", a.register_message()), ("bare", {"type": "register", "v": 2}),
                          ("other id", a.register_message(ident=id_of(other), key=other))):
        await a.send(message)
        await a.expect_error("already_registered", context=name)
    c = await ctx.peer(name="C", register=True)
    online = await c.presence([a.id, id_of(other)])
    check(online == {a.id: True, id_of(other): False}, "presence %r" % online)
    sent = await c.signal(a.id, kind="offer")
    await a.expect_forwarded(sent)
    await a.kept()


@scenario("not-registered")
async def sc_not_registered(ctx):
    """signal or presence before registration -> not_registered, kept (other fields unchecked:
    also {"type":"signal"} and {"type":"presence"}); registering afterwards works."""
    p = await ctx.peer(name="early")
    target = id_of(Ed25519PrivateKey.generate())
    sent = make_signal(p.key, target, kind="offer")
    await p.send(sent)
    error = await p.expect_error("not_registered", call=ANY, kind=ANY, context="full signal")
    for field in ("call", "kind"):
        check(field not in error or error[field] == sent[field], "not_registered %s=%r" % (field, error.get(field)))
    for text in ('{"type":"signal"}', '{"type":"signal","v":1,"kind":"chat"}', '{"type":"presence","v":2,"ids":["%s"]}' % target,
                 '{"type":"presence"}', '{"type":"presence","v":2,"ids":[]}'):
        await p.send(text)
        await p.expect_error("not_registered", call=None, kind=None, context=text)
    await p.register()
    await p.kept()


# ------------------------------------------------------------------------------------------------
# Scenarios: forwarding (§5.4, §6.2)
# ------------------------------------------------------------------------------------------------

@scenario("signal-forward")
async def sc_signal_forward(ctx):
    """A signal is forwarded with exactly the 8 fields, values unchanged, unknown fields dropped;
    the sender gets no acknowledgement; every kind is forwarded, both directions."""
    a = await ctx.peer(name="A", register=True)
    b = await ctx.peer(name="B", register=True)
    sent = make_signal(a.key, b.id, kind="offer", body={"sdp": "v=0\r\ns=\u00e9\u4e2d\U0001f600\r\n", "agreementKey": b64(os.urandom(32)), "identitySig": b64(os.urandom(64))},
                       extra={"extra": "x", "nested": {"a": [1, 2]}, "n": 1.5, "z": None})
    await a.send(sent)
    await b.expect_forwarded(sent, "offer with unknown fields")
    await a.quiet(0.5)
    call = sent["call"]
    for kind in KINDS:
        for src, dst in ((a, b), (b, a)):
            message = await src.signal(dst.id, kind=kind, call=call)
            await dst.expect_forwarded(message, kind)
    await a.quiet(0.2)
    await b.quiet(0.2)


@scenario("signal-order")
async def sc_signal_order(ctx):
    """45 signals sent back to back arrive in order (interleaved with another sender's 4)."""
    a = await ctx.peer(name="A", register=True)
    b = await ctx.peer(name="B", register=True)
    c = await ctx.peer(name="C", register=True)
    call = new_call()
    sent = []
    for i in range(45):
        sent.append(make_signal(a.key, b.id, kind="candidate", call=call,
                                body={"candidate": "candidate:%d 1 udp 1 192.0.2.1 %d typ host" % (i, 1000 + i), "sdpMid": "0", "sdpMLineIndex": 0}))
    others = [make_signal(c.key, b.id, kind="candidate", call=call) for _ in range(4)]
    for i, message in enumerate(sent):
        await a.send(message)
        if i % 10 == 5:
            await c.send(others[i // 10])
    got_a, got_c = [], []
    for _ in range(len(sent) + len(others)):
        message = await b.recv(what="forwarded signal")
        (got_a if message.get("from") == a.id else got_c).append(message)
    for i, (got, want) in enumerate(zip(got_a, sent)):
        check_forwarded(got, want, "B (A's signal %d)" % i)
    for got, want in zip(got_c, others):
        check_forwarded(got, want, "B (C's signal)")
    check(len(got_a) == 45 and len(got_c) == 4, "got %d + %d signals" % (len(got_a), len(got_c)))


@scenario("signal-offline")
async def sc_signal_offline(ctx):
    """A signal to an ID that is not online -> error offline with its call and kind, kept, never
    queued: a never-seen ID, a canonical non-point ID, and a peer that has just disconnected
    (its later re-registration receives nothing)."""
    a = await ctx.peer(name="A", register=True)
    for kind, target in (("offer", id_of(Ed25519PrivateKey.generate())), ("candidate", non_point_id())):
        sent = await a.signal(target, kind=kind)
        await a.expect_error("offline", call=sent["call"], kind=kind)
    key = Ed25519PrivateKey.generate()
    b = await ctx.peer(key=key, name="B", register=True)
    await b.close()
    sent = await a.signal(id_of(key), kind="answer")
    await a.expect_error("offline", call=sent["call"], kind="answer", context="after B disconnected")
    b2 = await ctx.peer(key=key, name="B-again", register=True)
    await b2.quiet(0.5)
    await a.kept()


@scenario("signal-self")
async def sc_signal_self(ctx):
    """A signal whose to equals from -> bad_message (with call and kind), kept."""
    a = await ctx.peer(name="A", register=True)
    sent = await a.signal(a.id, kind="offer")
    await a.expect_error("bad_message", call=sent["call"], kind="offer")
    await a.quiet(0.3)
    await a.kept()


@scenario("signal-from-mismatch")
async def sc_signal_from_mismatch(ctx):
    """A signal whose from is not the registered ID -> bad_message, kept, not forwarded: another
    (registered) ID correctly signed by its key, and our ID in lowercase."""
    a = await ctx.peer(name="A", register=True)
    b = await ctx.peer(name="B", register=True)
    c = await ctx.peer(name="C", register=True)
    forged = make_signal(c.key, b.id, kind="offer")
    await a.send(forged)
    await a.expect_error("bad_message", call=forged["call"], kind="offer", context="from C")
    lower = make_signal(a.key, b.id, kind="offer", frm=a.id.lower())
    await a.send(lower)
    await a.expect_error("bad_message", call=lower["call"], kind="offer", context="from lowercase")
    await b.quiet(0.5)
    await a.kept()


@scenario("signal-bad-signature")
async def sc_signal_bad_signature(ctx):
    """A signal with a well-formed but wrong sig -> bad_signature with call and kind, kept, not
    forwarded: another key, another body, another kind, random bytes, all zero."""
    a = await ctx.peer(name="A", register=True)
    b = await ctx.peer(name="B", register=True)
    call = new_call()
    good = make_signal(a.key, b.id, kind="offer", call=call)
    cases = [("other key", make_signal(a.key, b.id, kind="offer", call=call, sign_key=Ed25519PrivateKey.generate())),
             ("other body", dict(good, body=body_b64_of({"sdp": "x"}))),
             ("other kind", dict(good, kind="answer")),
             ("random", dict(good, sig=b64(os.urandom(64)))),
             ("zero", dict(good, sig=b64(bytes(64))))]
    for name, message in cases:
        await a.send(message)
        await a.expect_error("bad_signature", call=call, kind=message["kind"], context=name)
    await b.quiet(0.5)
    await a.kept()


@scenario("signal-body")
async def sc_signal_body(ctx):
    """A signal whose body is not b64std of a JSON object of at most 32,768 bytes -> bad_message
    with call and kind, kept (each correctly signed): not JSON, array, string, number, null,
    empty, invalid UTF-8, 32,769 bytes, unpadded, base64url, a space, a newline, non-canonical
    pad bits (e31=), not a string. A 32,768-byte object is forwarded."""
    a = await ctx.peer(name="A", register=True)
    b = await ctx.peer(name="B", register=True)
    url_body = None
    for i in range(1000):
        candidate = body_b64_of({"k": "%d???>>>" % i})
        if "+" in candidate or "/" in candidate:
            url_body = candidate.replace("+", "-").replace("/", "_")
            break
    big_ok = b'{"p":"' + b"x" * (MAX_BODY - 8) + b'"}'
    big_bad = b'{"p":"' + b"x" * (MAX_BODY - 7) + b'"}'
    check(len(big_ok) == MAX_BODY and len(big_bad) == MAX_BODY + 1, "body sizes")
    cases = [("not json", b64(b"not json")), ("array", b64(b"[]")), ("string", b64(b'"s"')), ("number", b64(b"1")),
             ("null", b64(b"null")), ("empty", ""), ("invalid utf-8", b64(b'{"a":"\xff"}')), ("truncated", b64(b'{"a":1')),
             ("trailing", b64(b'{"a":1} x')), ("over 32768", b64(big_bad)), ("unpadded", "e30"), ("base64url", url_body),
             ("space", "e3 0="), ("newline", "e30=\n"), ("pad bits", "e31="), ("double pad", "e30=="), ("not b64", "****")]
    call = new_call()
    for name, body in cases:
        message = make_signal(a.key, b.id, kind="offer", call=call, body_b64=body)
        await a.send(message)
        await a.expect_error("bad_message", call=call, kind="offer", context=name)
    for name, value in (("body number", "@N@"), ("body object", "@O@")):
        message = make_signal(a.key, b.id, kind="channel", call=call)
        message["body"] = "@N@" if name == "body number" else "@O@"
        await a.send(raw_json(message, N="12", O="{}"))
        await a.expect_error("bad_message", call=call, kind="channel", context=name)
    await b.quiet(0.3)
    sent = make_signal(a.key, b.id, kind="offer", call=call, body=big_ok)
    await a.send(sent)
    await b.expect_forwarded(sent, "32,768-byte body")
    await a.kept()


@scenario("signal-call")
async def sc_signal_call(ctx):
    """A call that is not a lowercase canonical UUID -> bad_message with kind but no call:
    uppercase, no dashes, braces, 35 chars, non-hex, empty, number, missing. A lowercase
    canonical UUID of another version/variant is forwarded (form only is checked)."""
    a = await ctx.peer(name="A", register=True)
    b = await ctx.peer(name="B", register=True)
    good = new_call()
    for name, call in (("uppercase", good.upper()), ("no dashes", good.replace("-", "")), ("braces", "{%s}" % good),
                       ("35 chars", good[:35]), ("non-hex", "g" + good[1:]), ("empty", ""), ("urn", "urn:uuid:" + good)):
        message = make_signal(a.key, b.id, kind="answer", call=call)
        await a.send(message)
        await a.expect_error("bad_message", call=None, kind="answer", context=name)
    message = make_signal(a.key, b.id, kind="answer", call="x")
    message["call"] = "@N@"
    await a.send(raw_json(message, N="7"))
    await a.expect_error("bad_message", call=None, kind="answer", context="number")
    message = make_signal(a.key, b.id, kind="answer")
    del message["call"]
    await a.send(message)
    await a.expect_error("bad_message", call=None, kind="answer", context="missing")
    await b.quiet(0.3)
    for odd in ("6f1c2b8a-3d4e-1f50-ca61-7b8c9d0e1f20", "00000000-0000-0000-0000-000000000000"):
        sent = await a.signal(b.id, kind="candidate", call=odd)
        await b.expect_forwarded(sent, odd)
    await a.kept()


@scenario("signal-fields")
async def sc_signal_fields(ctx):
    """Other malformed signals -> bad_message, kept, not forwarded: kind unknown/other case/
    missing (no kind in the error), to lowercase/CT2-/short/missing, v 1/2.0/missing, sig
    63 bytes/non-canonical/missing, body missing, from missing."""
    a = await ctx.peer(name="A", register=True)
    b = await ctx.peer(name="B", register=True)
    call = new_call()
    for kind in ("chat", "Offer", "message", ""):
        message = make_signal(a.key, b.id, kind=kind, call=call)
        await a.send(message)
        await a.expect_error("bad_message", call=call, kind=None, context="kind %r" % kind)
    message = make_signal(a.key, b.id, call=call)
    del message["kind"]
    await a.send(message)
    await a.expect_error("bad_message", call=call, kind=None, context="kind missing")
    for name, to in (("to lowercase", b.id.lower()), ("to CT2-", display_id(b.id)), ("to short", b.id[:63]), ("to legacy", b.id[:32])):
        message = make_signal(a.key, to, kind="offer", call=call)
        await a.send(message)
        await a.expect_error("bad_message", call=call, kind="offer", context=name)
    good = make_signal(a.key, b.id, kind="offer", call=call)
    data = b64decode_strict(good["sig"])
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    non_canonical = good["sig"][:85] + alphabet[alphabet.index(good["sig"][85]) | 1] + "=="
    variants = [("sig 63 bytes", dict(good, sig=b64(data[:63]))), ("sig pad bits", dict(good, sig=non_canonical)),
                ("sig unpadded", dict(good, sig=good["sig"].rstrip("=")))]
    for field in ("to", "sig", "body", "from", "v"):
        stripped = dict(good)
        del stripped[field]
        variants.append(("%s missing" % field, stripped))
    for name, message in variants:
        await a.send(message)
        await a.expect_error("bad_message", call=call, kind="offer", context=name)
    for name, raw in (("v 1", "1"), ("v 2.0", "2.0"), ("v 3", "3"), ("v \"2\"", '"2"')):
        await a.send(raw_json(dict(good, v="@V@"), V=raw))
        await a.expect_error("bad_message", call=call, kind="offer", context=name)
    await b.quiet(0.3)
    await a.kept()


@scenario("signal-rate", timeout=40)
async def sc_signal_rate(ctx):
    """50 signals per 10 s per connection: after 3 bad-signature signals (not counted), 50 are
    forwarded, the 51st -> rate_limited with call and kind (kept, not forwarded), and a signal
    after the window (10.6 s after the first counted one) passes. Offline signals count too:
    50 offline answers, then rate_limited."""
    a = await ctx.peer(name="A", register=True)
    b = await ctx.peer(name="B", register=True)
    call = new_call()
    for _ in range(3):
        await a.send(make_signal(a.key, b.id, kind="candidate", call=call, sig=b64(os.urandom(64))))
        await a.expect_error("bad_signature", call=call, kind="candidate")
    started = time.monotonic()
    sent = [make_signal(a.key, b.id, kind="candidate", call=call) for _ in range(51)]
    for message in sent:
        await a.send(message)
    for i in range(50):
        await b.expect_forwarded(sent[i], "signal %d" % (i + 1))
    await a.expect_error("rate_limited", call=call, kind="candidate", context="51st")
    await b.quiet(0.3)
    await a.kept()
    # offline signals count: another connection
    c = await ctx.peer(name="C", register=True)
    ghost = id_of(Ed25519PrivateKey.generate())
    for _ in range(51):
        await c.send(make_signal(c.key, ghost, kind="close", call=call))
    for i in range(50):
        await c.expect_error("offline", call=call, kind="close", context="offline %d" % (i + 1))
    await c.expect_error("rate_limited", call=call, kind="close", context="51st offline")
    await asyncio.sleep(max(0, started + 10.6 - time.monotonic()))
    later = await a.signal(b.id, kind="candidate", call=call)
    await b.expect_forwarded(later, "after the window")


# ------------------------------------------------------------------------------------------------
# Scenarios: presence (§5.5, §6.3)
# ------------------------------------------------------------------------------------------------

@scenario("presence")
async def sc_presence(ctx):
    """presence answers exactly the asked IDs (online true/false, own ID true, 16 distinct IDs
    ok); 17 IDs, duplicates, empty list, lowercase/CT2- IDs, ids not an array or missing ->
    bad_message, kept; after a peer disconnects it is false immediately."""
    a = await ctx.peer(name="A", register=True)
    b = await ctx.peer(name="B", register=True)
    ghost = id_of(Ed25519PrivateKey.generate())
    online = await b.presence([a.id, ghost, b.id])
    check(online == {a.id: True, ghost: False, b.id: True}, "presence %r" % online)
    sixteen = [a.id] + [id_of(Ed25519PrivateKey.generate()) for _ in range(15)]
    online = await b.presence(sixteen)
    check(online[a.id] is True and sum(online.values()) == 1, "16-ID presence %r" % online)
    bad = [("17 ids", sixteen + [ghost]), ("duplicate", [a.id, a.id]), ("empty", []), ("lowercase", [a.id.lower()]),
           ("CT2-", [display_id(a.id)]), ("number", [5])]
    for name, ids in bad:
        await b.send({"type": "presence", "v": 2, "ids": ids})
        await b.expect_error("bad_message", context=name)
    for name, text in (("ids string", '{"type":"presence","v":2,"ids":"%s"}' % a.id), ("ids missing", '{"type":"presence","v":2}'),
                       ("v 1", '{"type":"presence","v":1,"ids":["%s"]}' % a.id)):
        await b.send(text)
        await b.expect_error("bad_message", context=name)
    await a.close()
    online = await b.presence([a.id])
    check(online == {a.id: False}, "after A's close presence is %r" % online)


@scenario("presence-rate", timeout=30)
async def sc_presence_rate(ctx):
    """10 presence queries per 10 s: after 2 malformed ones (not counted) 10 are answered, the
    11th -> rate_limited (no call/kind), kept; signals still flow (separate limit)."""
    a = await ctx.peer(name="A", register=True)
    b = await ctx.peer(name="B", register=True)
    for _ in range(2):
        await a.send({"type": "presence", "v": 2, "ids": []})
        await a.expect_error("bad_message")
    for i in range(10):
        online = await a.presence([b.id])
        check(online[b.id] is True, "query %d" % (i + 1))
    await a.send({"type": "presence", "v": 2, "ids": [b.id]})
    await a.expect_error("rate_limited", context="11th")
    sent = await a.signal(b.id, kind="offer")
    await b.expect_forwarded(sent)


@scenario("disconnect-presence")
async def sc_disconnect_presence(ctx):
    """A registered peer that drops TCP without a close frame is offline within 2 s, and its
    ID can register again from a new connection."""
    key = Ed25519PrivateKey.generate()
    raw = await ctx.raw()
    await raw.upgrade()
    await raw.register(key)
    b = await ctx.peer(name="B", register=True)
    check((await b.presence([id_of(key)]))[id_of(key)] is True, "raw peer not online")
    await raw.abort()
    deadline = time.monotonic() + 2
    while (await b.presence([id_of(key)]))[id_of(key)]:
        check(time.monotonic() < deadline, "still online 2 s after the TCP close")
        await asyncio.sleep(0.3)
    await ctx.peer(key=key, name="again", register=True)


# ------------------------------------------------------------------------------------------------
# Scenarios: frames, sizes, UTF-8 (§4, §13.1)
# ------------------------------------------------------------------------------------------------

def padded(message, size):
    """JSON text of `message` plus a "pad" string field, exactly `size` bytes."""
    base = dumps(dict(message, pad=""))
    return base[:-2] + "x" * (size - len(base)) + base[-2:]


@scenario("too-large")
async def sc_too_large(ctx):
    """A message over 65,536 bytes -> error too_large, close 1009 `too_large`: before
    registration, after registration (text and binary), and as a fragmented text message;
    a message of exactly 65,536 bytes is processed normally."""
    p = await ctx.peer(name="early")
    await p.send(padded(p.register_message(), MAX_MESSAGE + 1))
    await p.expect_error_close("too_large", 1009, context="before registration")
    a = await ctx.peer(name="A", register=True)
    text = padded({"type": "presence", "v": 2, "ids": [a.id]}, MAX_MESSAGE)
    check(len(text.encode()) == MAX_MESSAGE, "padding")
    await a.send(text)
    reply = await a.expect("presence")
    check(reply["online"] == {a.id: True}, "65,536-byte presence %r" % reply)
    await a.send(padded({"type": "presence", "v": 2, "ids": [a.id]}, MAX_MESSAGE + 1))
    await a.expect_error_close("too_large", 1009, context="text after registration")
    c = await ctx.peer(name="C", register=True)
    await c.send(padded({"type": "presence", "v": 2, "ids": [c.id]}, MAX_MESSAGE + 1).encode())
    await c.expect_error_close("too_large", 1009, context="binary")
    key = Ed25519PrivateKey.generate()
    raw = await ctx.raw()
    await raw.upgrade()
    await raw.register(key)
    text = padded({"type": "presence", "v": 2, "ids": [id_of(key)]}, MAX_MESSAGE + 100).encode()
    raw.send_frame(0x1, text[:40000], fin=False)
    raw.send_frame(0x0, text[40000:], fin=True)
    await raw.drain()
    error = await raw.message(what="too_large error")
    check(error.get("type") == "error" and error.get("code") == "too_large", "fragmented: %r" % error)
    close = await raw.close_frame()
    check(close == [1009, "too_large"], "fragmented: close %r" % close)
    await serving(ctx)


@scenario("fragmented")
async def sc_fragmented(ctx):
    """A text message split into 3 frames (with a ping between them) is reassembled: a register
    and a presence query work; a UTF-8 character split across frames is fine."""
    key = Ed25519PrivateKey.generate()
    raw = await ctx.raw()
    await raw.upgrade()
    challenge = await raw.message(what="challenge")
    ident = id_of(key)
    text = json.dumps({"type": "register", "v": 2, "id": ident, "sig": b64(key.sign(register_string(challenge["challenge"], ident))),
                       "note": "\u00e9\u00e9"}, ensure_ascii=False, separators=(",", ":")).encode()
    cut = text.index(b"\xc3") + 1   # split inside the 2-byte character
    raw.send_frame(0x1, text[:10], fin=False)
    raw.send_frame(0x9, b"mid")
    raw.send_frame(0x0, text[10:cut], fin=False)
    raw.send_frame(0x0, text[cut:], fin=True)
    await raw.drain()
    while True:
        frame = await raw.frame()
        check(frame is not None, "TCP closed after a fragmented register")
        if frame[2] == 0xA:
            check(frame[4] == b"mid", "pong payload %r" % frame[4])
            continue
        break
    check(frame[2] == 0x1, "reply opcode %d" % frame[2])
    registered = strict_json(frame[4].decode())
    check(registered.get("type") == "registered", "fragmented register answered %r" % registered)
    query = dumps({"type": "presence", "v": 2, "ids": [ident]}).encode()
    raw.send_frame(0x2, query[:5], fin=False)
    raw.send_frame(0x0, query[5:], fin=True)
    await raw.drain()
    reply = await raw.message(what="presence")
    check(reply.get("online") == {ident: True}, "binary fragmented presence %r" % reply)


@scenario("invalid-utf8")
async def sc_invalid_utf8(ctx):
    """A text frame with invalid UTF-8 closes 1007: a lone 0xFF, an overlong encoding, a UTF-16
    surrogate, a truncated sequence; before and after registration."""
    for name, payload, register in (("0xff", b'{"type":"\xff"}', False), ("overlong", b'{"type":"\xc0\xaf"}', False),
                                    ("surrogate", b'{"type":"presence","v":2,"x":"\xed\xa0\x80"}', True),
                                    ("truncated", b'{"type":"presence","v":2,"x":"\xe2\x82"}', True)):
        raw = await ctx.raw()
        await raw.upgrade()
        if register:
            await raw.register(Ed25519PrivateKey.generate())
        else:
            await raw.message(what="challenge")
        raw.send_frame(0x1, payload)
        await raw.drain()
        close = await raw.close_frame()
        check(close is not None and close[0] == 1007, "%s: close %r, want 1007" % (name, close))
    await serving(ctx)


@scenario("binary-invalid-utf8")
async def sc_binary_invalid_utf8(ctx):
    """A binary frame whose payload is not UTF-8 is bad_message: closed 1008 before
    registration, kept after."""
    p = await ctx.peer(name="early")
    await p.send(b'{"type":"register","v":2,"id":"\xff"}')
    await p.expect_error_close("bad_message", context="before registration")
    a = await ctx.peer(name="A", register=True)
    await a.send(b'{"type":"presence","v":2,"ids":["\xc0\xaf"]}')
    await a.expect_error("bad_message", context="after registration")
    await a.send(b"\xff\xfe\x00")
    await a.expect_error("bad_message", context="after registration, garbage")
    await a.kept()
    await serving(ctx)


@scenario("protocol-violation")
async def sc_protocol_violation(ctx):
    """RFC 6455 violations close 1002 (or, at worst, drop TCP - reported): unmasked frame,
    RSV1 set, reserved opcode 3, continuation with nothing to continue, a 126-byte ping,
    a fragmented ping, a new data frame inside a fragmented message."""
    cases = [("unmasked", lambda r: r.send_frame(0x1, b"{}", mask=False)),
             ("rsv1", lambda r: r.send_frame(0x1, b"{}", rsv=4)),
             ("opcode 3", lambda r: r.send_frame(0x3, b"{}")),
             ("stray continuation", lambda r: r.send_frame(0x0, b"{}")),
             ("long ping", lambda r: r.send_frame(0x9, b"x" * 126)),
             ("fragmented ping", lambda r: r.send_frame(0x9, b"x", fin=False)),
             ("interleaved", lambda r: (r.send_frame(0x1, b'{"a"', fin=False), r.send_frame(0x1, b":1}")))]
    failures = []
    for name, act in cases:
        raw = await ctx.raw()
        await raw.upgrade()
        await raw.register(Ed25519PrivateKey.generate())
        act(raw)
        await raw.drain()
        close = await raw.close_frame()
        if close is None or close[0] != 1002:
            failures.append("%s: %r" % (name, close))
    check(not failures, "want close 1002: " + "; ".join(failures))
    await serving(ctx)


@scenario("ping-pong")
async def sc_ping_pong(ctx):
    """The server answers client pings (before and after registration) with the same payload."""
    p = await ctx.peer(name="A")
    for stage in ("challenged", "registered"):
        waiter = await p.ws.ping(b"tether-%s" % stage.encode())
        try:
            await asyncio.wait_for(waiter, 3)
        except TimeoutError:
            raise Fail("no pong in state %s" % stage)
        if stage == "challenged":
            await p.register()


@scenario("close-normal")
async def sc_close_normal(ctx):
    """A client close 1000 is answered with a close frame 1000 and a TCP close (or half-close);
    once the client closes TCP too, the ID is offline within 1 s."""
    key = Ed25519PrivateKey.generate()
    raw = await ctx.raw()
    await raw.upgrade()
    await raw.register(key)
    raw.send_frame(0x8, struct.pack(">H", 1000) + b"bye")
    await raw.drain()
    close = await raw.close_frame()
    check(close is not None and close[0] == 1000, "server answered close %r" % close)
    try:   # the server closes (or half-closes) TCP after the close handshake (RFC 6455 §7.1.1)
        check(await raw.frame(timeout=2) is None, "a frame after the close frame")
    except TimeoutError:
        raise Fail("the server kept TCP open 2 s after the close handshake")
    await raw.abort()
    b = await ctx.peer(name="B", register=True)
    deadline = time.monotonic() + 1
    while (await b.presence([id_of(key)]))[id_of(key)]:
        check(time.monotonic() < deadline, "still online 1 s after the close handshake and TCP close")
        await asyncio.sleep(0.2)


@scenario("slow-reader", timeout=60)
async def sc_slow_reader(ctx):
    """A recipient that stops reading (4 KiB receive buffer) while 5 senders forward 250 signals
    of ~44 KB (~11 MB, over the kernel's buffers) is closed 1008 `rate_limited` without an
    error message (over 1 MiB pending outbound bytes, §6.2 step 5, §13.1); it goes offline;
    the senders are unaffected."""
    victim_key = Ed25519PrivateKey.generate()
    victim = await ctx.raw(rcvbuf=4096)
    await victim.upgrade()
    await victim.register(victim_key)
    target = id_of(victim_key)
    senders = [await ctx.peer(name="S%d" % i, register=True) for i in range(5)]
    body = b'{"p":"' + b"x" * (MAX_BODY - 8) + b'"}'
    call = new_call()
    for sender in senders:
        for _ in range(50):
            await sender.signal(target, kind="candidate", call=call, body=body)
    watcher = await ctx.peer(name="W", register=True)
    deadline = time.monotonic() + 30
    # The server is still verifying and forwarding ~11 MB of signed signals (a debug build, on a
    # loaded machine), so its presence answers may take longer than the usual 5 s.
    while (await watcher.presence([target], timeout=20))[target]:
        check(time.monotonic() < deadline, "the non-reading recipient is still online 30 s after ~11 MB were forwarded to it")
        await asyncio.sleep(1.5)   # at most 8 queries: under the presence limit
    # what the victim finally reads: forwarded signals only, then close 1008 rate_limited or a TCP close
    ended = None
    while ended is None:
        try:
            frame = await victim.frame(timeout=10)
        except TimeoutError:
            raise Fail("the recipient's connection did not end")
        if frame is None:
            ended = "tcp"
        elif frame[2] == 0x8:
            payload = frame[4]
            ended = [struct.unpack(">H", payload[:2])[0], payload[2:].decode(errors="replace")] if len(payload) >= 2 else [None, ""]
        elif frame[2] == 0x1:
            message = strict_json(frame[4].decode())
            check(message.get("type") == "signal", "the recipient got %s before its close" % dumps(message)[:200])
    check(ended == "tcp" or ended == [1008, "rate_limited"], "the recipient's close: %r" % (ended,))
    for sender in senders:
        # Offline answers for the signals that reached the server after the close are fine, and
        # on a loaded machine some still arrive after the presence query below was sent: every
        # message up to its answer must be one of them.
        await sender.send({"type": "presence", "v": 2, "ids": [sender.id]})
        while True:
            message = await sender.recv(what="presence")
            if message.get("type") == "presence":
                check(message.get("online") == {sender.id: True}, "%s: own presence is %s" % (sender.name, dumps(message)[:200]))
                break
            check(message.get("type") == "error" and message.get("code") == "offline" and message.get("call") == call,
                  "%s got %s" % (sender.name, dumps(message)[:200]))
    await serving(ctx)


@scenario("abuse")
async def sc_abuse(ctx):
    """The server keeps serving others through malformed input: random bytes instead of HTTP, a
    100 KB header, a bad request line, a half-sent request, a bad Sec-WebSocket-Key/Version,
    a truncated frame, a frame announcing 2^63-1 bytes, a mid-frame TCP reset."""
    async def send_and_drop(data, wait=0.3):
        raw = await ctx.raw()
        raw.writer.write(data)
        await raw.drain()
        try:
            await asyncio.wait_for(raw.reader.read(65536), wait)
        except (TimeoutError, ConnectionError, OSError):
            pass
        await raw.abort()
    await send_and_drop(os.urandom(4096))
    await send_and_drop(b"GET /signal HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n")
    await send_and_drop(b"GARBAGE\r\n\r\n")
    await send_and_drop(b"GET /signal HTTP/1.1\r\nHost: x\r\nUpgrade: webs")
    await send_and_drop(b"GET /signal HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n\r\n")
    await send_and_drop(b"GET /signal HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 12\r\n\r\n")
    await send_and_drop(b"POST /signal HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
    for frame in (b"\x81", b"\x81\xfe\x10", b"\x81\xff\x7f\xff\xff\xff\xff\xff\xff\xff" + os.urandom(4) + b"x" * 100,
                  b"\x82\xfe\xff\xff" + os.urandom(4) + b"y" * 1000):
        raw = await ctx.raw()
        await raw.upgrade()
        await raw.message(what="challenge")
        raw.writer.write(frame)
        await raw.drain()
        await asyncio.sleep(0.1)
        await raw.abort()
    await serving(ctx)


# ------------------------------------------------------------------------------------------------
# Scenarios: per-IP limits (§6.4, §13.1)
# ------------------------------------------------------------------------------------------------

@scenario("limit-sockets")
async def sc_limit_sockets(ctx):
    """From one client IP, 16 concurrent sockets are served and the 17th upgrade is refused 429
    `too many connections`; Origin and query refusals still come first (403/400); after one
    socket closes a new one is accepted. Needs --spread source or xff."""
    ip = ctx.net.fixed_ip()
    held = [await ctx.peer(ip=ip, name="held%d" % i, register=True) for i in range(16)]
    await ctx.refused(429, "too many connections", ip=ip, context="17th")
    await ctx.refused(403, "forbidden", headers=[("Origin", "https://evil.example")], ip=ip, context="Origin at the cap")
    await ctx.refused(400, "query not allowed", "/signal?", ip=ip, context="query at the cap")
    await held[0].close()
    deadline = time.monotonic() + 2
    while True:
        response = await ctx.http(ip=ip)
        if response.status == 101:
            break
        check(time.monotonic() < deadline, "a socket closed but the 17th is still refused: %s" % response.describe())
        await asyncio.sleep(0.1)
    await serving(ctx)


@scenario("limit-upgrades")
async def sc_limit_upgrades(ctx):
    """From one client IP, 60 upgrades within 60 s are served (each closed after its
    challenge) and the 61st and 62nd are refused 429 `rate limited`; other IPs are unaffected.
    Needs --spread source or xff."""
    ip = ctx.net.fixed_ip()
    for i in range(60):
        raw = await ctx.raw(ip)
        response = await raw.request()
        check(response.status == 101, "upgrade %d refused: %s" % (i + 1, response.describe()))
        await raw.message(what="challenge")
        await raw.close()
    await ctx.refused(429, "rate limited", ip=ip, context="61st")
    await ctx.refused(429, "rate limited", ip=ip, context="62nd")
    await serving(ctx)


@scenario("limit-order", timeout=90)
async def sc_limit_order(ctx):
    """§13.1 order: per-IP sockets before the upgrade rate, and refusals there do not count:
    16 sockets held, 10 attempts refused `too many connections`, all closed, then 44 more
    upgrades succeed (60 counted) and the next is `rate limited`; Origin/query/path refusals
    still win over it. Needs --spread source or xff."""
    ip = ctx.net.fixed_ip()
    held = [await ctx.peer(ip=ip, name="held%d" % i, register=True) for i in range(16)]
    for i in range(10):
        await ctx.refused(429, "too many connections", ip=ip, context="attempt %d at the socket cap" % (i + 1))
    for p in held:
        await p.close()
    await asyncio.sleep(0.3)
    for i in range(44):
        raw = await ctx.raw(ip)
        response = await raw.request()
        check(response.status == 101, "upgrade %d of 60 refused: %s (refusals at the socket cap counted?)" % (17 + i, response.describe()))
        await raw.message(what="challenge")
        await raw.close()
    await ctx.refused(429, "rate limited", ip=ip, context="61st counted")
    await ctx.refused(403, "forbidden", headers=[("Origin", "https://evil.example")], ip=ip, context="Origin over the rate")
    await ctx.refused(400, "query not allowed", "/signal?", ip=ip, context="query over the rate")
    await ctx.refused(404, "not found", "/nope", ip=ip, context="path over the rate")
    await serving(ctx)


# ------------------------------------------------------------------------------------------------
# Opt-in scenarios: slow, or needing a particular server configuration
# ------------------------------------------------------------------------------------------------

@scenario("slow-keepalive", default=False, timeout=120)
async def sc_slow_keepalive(ctx):
    """(opt-in, ~65 s) The server pings every 30 s: a client answering pings gets them at
    ~30 s intervals and stays routable; a client that never answers is dropped (TCP close, no
    close frame) by ~60 s and goes offline."""
    good_key, mute_key = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    good, mute = await ctx.raw(), await ctx.raw()
    for r, k in ((good, good_key), (mute, mute_key)):
        await r.upgrade()
        await r.register(k)
    mute.auto_pong = False
    started = time.monotonic()

    async def until_end(r, seconds):
        end = started + seconds
        while time.monotonic() < end:
            try:
                frame = await r.frame(timeout=end - time.monotonic())
            except TimeoutError:
                return "open"
            if frame is None:
                return "tcp-closed"
            if frame[2] == 0x8:
                return "close-frame %r" % frame[4]
        return "open"
    good_end, mute_end = await asyncio.gather(until_end(good, 66), until_end(mute, 66))
    check(mute_end == "tcp-closed", "unanswering client: %s" % mute_end)
    check(good_end == "open", "answering client: %s" % good_end)
    check(good.pings and good.pings[0] - started <= 32, "first ping at %s" % [round(t - started, 1) for t in good.pings])
    check(len(good.pings) >= 2, "pings at %s (want every 30 s)" % [round(t - started, 1) for t in good.pings])
    intervals = [b - a for a, b in zip(good.pings, good.pings[1:])]
    check(all(27 <= i <= 33 for i in intervals), "ping intervals %s" % intervals)
    check(mute.pings, "the unanswering client was never pinged")
    b = await ctx.peer(name="B", register=True)
    online = await b.presence([id_of(good_key), id_of(mute_key)])
    check(online == {id_of(good_key): True, id_of(mute_key): False}, "presence %r" % online)


@scenario("origin-allowed", default=False, needs=("origin_allowed",))
async def sc_origin_allowed(ctx):
    """(SIGNAL_ALLOWED_ORIGINS contains --origin-allowed V) Origin V upgrades and registers;
    V with a trailing slash, V in other case, V twice, and another origin are refused 403."""
    value = ctx.opts.origin_allowed
    p = await ctx.peer(name="browser", origin=value)
    await p.register()
    variants = [value + "/", "https://evil.example"]
    if value.upper() != value:
        variants.append(value.upper())
    for variant in variants:
        await ctx.refused(403, "forbidden", headers=[("Origin", variant)], context=variant)
    await ctx.refused(403, "forbidden", headers=[("Origin", value), ("Origin", value)], context="V twice")


@scenario("capacity", default=False, needs=("max_sockets",))
async def sc_capacity(ctx):
    """(SIGNAL_MAX_SOCKETS = --max-sockets N <= 16, otherwise idle server) N sockets from one IP
    fill the server: the next upgrade from any IP is 503 `capacity` (before the per-IP check
    when N = 16), Origin is still 403; after one closes, a new one is served."""
    n = ctx.opts.max_sockets
    check(1 <= n <= 16, "--max-sockets must be 1..16")
    ip = ctx.net.fixed_ip()
    held = [await ctx.peer(ip=ip, name="held%d" % i, register=True) for i in range(n)]
    await ctx.refused(503, "capacity", ip=ip, context="same IP")
    await ctx.refused(503, "capacity", context="other IP")
    await ctx.refused(403, "forbidden", headers=[("Origin", "https://evil.example")], context="Origin at capacity")
    await held[0].close()
    deadline = time.monotonic() + 2
    while (await ctx.http()).status != 101:
        check(time.monotonic() < deadline, "still at capacity after a close")
        await asyncio.sleep(0.1)


@scenario("issuance-unavailable", default=False, timeout=40)
async def sc_issuance_unavailable(ctx):
    """(TURN_MODE=cloudflare with cloudflare_standin.py in a failing mode: no-turn, slow,
    redirect, oversize, error, bad-json) register -> error unavailable, close 1013
    `unavailable` (after ~8 s for slow); the ID is released: it is offline, and the same key
    on a new connection gets unavailable again, not duplicate_id."""
    key = Ed25519PrivateKey.generate()
    p = await ctx.peer(key=key, name="A")
    await p.send(p.register_message())
    sent_at = time.monotonic()
    await p.expect_error("unavailable", timeout=12)
    elapsed = time.monotonic() - sent_at
    if ctx.opts.cloudflare_mode == "slow":
        check(7.5 <= elapsed <= 9.5, "unavailable after %.1fs, want ~8 s (the upstream timeout)" % elapsed)
    await p.expect_close(1013, "unavailable")
    again = await ctx.peer(key=key, name="A-again")
    await again.send(again.register_message())
    await again.expect_error("unavailable", timeout=12)
    await again.expect_close(1013, "unavailable")


@scenario("issuance-pending", default=False, timeout=40)
async def sc_issuance_pending(ctx):
    """(TURN_MODE=cloudflare, stand-in --mode slow) While issuance is pending: a second register
    -> registration_pending (kept), signal/presence -> not_registered, another connection with
    the same ID -> duplicate_id close 1008, the ID is offline; after 8 s -> unavailable 1013.
    A pending connection that closes releases its reservation at once."""
    key = Ed25519PrivateKey.generate()
    a = await ctx.peer(key=key, name="A")
    await a.send(a.register_message())
    await asyncio.sleep(0.3)
    await a.send(a.register_message())
    await a.expect_error("registration_pending")
    await a.send(make_signal(key, id_of(Ed25519PrivateKey.generate()), kind="offer"))
    await a.expect_error("not_registered", call=ANY, kind=ANY)
    await a.send({"type": "presence", "v": 2, "ids": [a.id]})
    await a.expect_error("not_registered")
    twin = await ctx.peer(key=key, name="A-twin")
    await twin.send(twin.register_message())
    await twin.expect_error_close("duplicate_id")
    key2 = Ed25519PrivateKey.generate()
    q = await ctx.peer(key=key2, name="Q")
    await q.send(q.register_message())
    await asyncio.sleep(0.3)
    await q.close()
    q2 = await ctx.peer(key=key2, name="Q-again")
    await q2.send(q2.register_message())
    await asyncio.sleep(0.3)
    await q2.send(q2.register_message())
    await q2.expect_error("registration_pending", context="reservation released on close")
    await a.expect_error("unavailable", timeout=12)
    await a.expect_close(1013, "unavailable")


@scenario("issuance-unroutable", default=False, timeout=40)
async def sc_issuance_unroutable(ctx):
    """(TURN_MODE=cloudflare, stand-in --mode slow --delay 2: issuance succeeds after ~2 s) While
    A's issuance is pending, A is reserved but not routable: a registered B sees presence
    {A: false} and a signal to A gets `offline`; once issued, A is online and reachable."""
    b = await ctx.peer(name="B", register=True)
    a = await ctx.peer(name="A")
    await a.send(a.register_message())
    await asyncio.sleep(0.3)
    online = await b.presence([a.id])
    check(online == {a.id: False}, "B: presence of the pending A is %r" % online)
    sent = await b.signal(a.id, kind="offer")
    await b.expect_error("offline", call=sent["call"], kind="offer", context="signal to the pending A")
    started = time.time()
    registered = await a.recv(timeout=6, what="registered")
    check_registered(registered, a, started - 3, time.time())
    online = await b.presence([a.id])
    check(online == {a.id: True}, "B: presence of the registered A is %r" % online)
    sent = await b.signal(a.id, kind="offer")
    await a.expect_forwarded(sent, context="once registered")


@scenario("issuance-stale", default=False, timeout=40)
async def sc_issuance_stale(ctx):
    """(TURN_MODE=cloudflare, stand-in --mode slow --delay 2) A connection that closes while its
    issuance is pending: the completion arriving after the close is discarded: A stays offline
    for B, and the same key registers afresh on a new connection (not duplicate_id)."""
    key = Ed25519PrivateKey.generate()
    b = await ctx.peer(name="B", register=True)
    a = await ctx.peer(key=key, name="A")
    await a.send(a.register_message())
    await asyncio.sleep(0.3)
    await a.close()
    await asyncio.sleep(3)        # the stand-in answered A's request ~1.7 s ago
    online = await b.presence([id_of(key)])
    check(online == {id_of(key): False}, "B: presence after a stale completion is %r" % online)
    sent = await b.signal(id_of(key), kind="offer")
    await b.expect_error("offline", call=sent["call"], kind="offer", context="signal after a stale completion")
    again = await ctx.peer(key=key, name="A-again")
    await again.register()
    online = await b.presence([id_of(key)])
    check(online == {id_of(key): True}, "B: presence of A registered afresh is %r" % online)


@scenario("issuance-cancel", default=False, needs=("cloudflare_record",), timeout=40)
async def sc_issuance_cancel(ctx):
    """(TURN_MODE=cloudflare, stand-in --mode slow (10 s) with --record) A registering connection
    that closes cancels its upstream request: the stand-in sees its client go away within ~1 s
    of the close (long before the 8 s timeout would end it)."""
    def records():
        if not os.path.exists(ctx.opts.cloudflare_record):
            return []
        with open(ctx.opts.cloudflare_record) as handle:
            return [json.loads(line) for line in handle if line.strip()]
    before = len(records())
    a = await ctx.peer(name="A")
    await a.send(a.register_message())
    deadline = time.monotonic() + 3
    while not [r for r in records()[before:] if "method" in r]:
        check(time.monotonic() < deadline, "the stand-in saw no request for A's registration")
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    closed_at = time.time()
    await a.close()
    deadline = time.monotonic() + 3
    while True:
        gone = [r for r in records()[before:] if r.get("event") == "client-gone"]
        if gone:
            break
        check(time.monotonic() < deadline, "the upstream request was still open 3 s after the registering connection closed")
        await asyncio.sleep(0.05)
    check(gone[0]["time"] - closed_at < 2, "the upstream request ended %.1fs after the close" % (gone[0]["time"] - closed_at))


@scenario("issuance-unlimited", default=False, timeout=90)
async def sc_issuance_unlimited(ctx):
    """(TURN_MODE=none, e.g. --local) none mode issues nothing and is not limited: 61
    registrations within a minute and 9 at once all get `registered`, never `unavailable`."""
    for i in range(61):
        p = await ctx.peer(name="n%d" % (i + 1))
        await p.register()
        await p.close()
    together = [await ctx.peer(name="together%d" % i) for i in range(9)]
    for p in together:
        await p.send(p.register_message())
    for p in together:
        started = time.time()
        message = await p.recv(what="registered")
        check(message.get("type") == "registered", "%s: 9 at once: %s" % (p.name, dumps(message)[:200]))
        check_registered(message, p, started - 5, time.time())


@scenario("issuance-concurrency", default=False, timeout=40)
async def sc_issuance_concurrency(ctx):
    """(TURN_MODE=cloudflare, stand-in --mode slow, no other issuance in flight) 8 registrations
    pending at once; the 9th -> unavailable close 1013 at once (not after 8 s)."""
    pending = []
    for i in range(8):
        p = await ctx.peer(name="pending%d" % i)
        await p.send(p.register_message())
        pending.append(p)
    await asyncio.sleep(0.5)
    ninth = await ctx.peer(name="ninth")
    started = time.monotonic()
    await ninth.send(ninth.register_message())
    await ninth.expect_error("unavailable", timeout=4)
    check(time.monotonic() - started < 3, "the 9th waited %.1fs" % (time.monotonic() - started))
    await ninth.expect_close(1013, "unavailable")


@scenario("issuance-rate", default=False, timeout=90)
async def sc_issuance_rate(ctx):
    """(TURN_MODE=coturn, or cloudflare with an answering stand-in; fresh server, no issuance in
    the last minute) 60 registrations within a minute succeed, the 61st -> unavailable 1013."""
    for i in range(60):
        p = await ctx.peer(name="r%d" % (i + 1))
        await p.register()
        await p.close()
    last = await ctx.peer(name="r61")
    await last.send(last.register_message())
    await last.expect_error("unavailable")
    await last.expect_close(1013, "unavailable")


@scenario("coturn-allocate", default=False, needs=("coturn_port",), timeout=60)
async def sc_coturn_allocate(ctx):
    """(TURN_MODE=coturn, TURN_SECRET equal to a running `coturn_fixture.py serve --secret`,
    --coturn-port its port) the credentials in `registered` allocate a relay on the real coturn;
    the same username with a tampered credential is refused."""
    a = await ctx.peer(name="A", register=True)
    turn = [e for e in a.registered["iceServers"] if "username" in e]
    check(turn, "no TURN entry in registered")
    user, password = turn[0]["username"], turn[0]["credential"]
    fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "coturn_fixture.py")

    def allocate(pw):
        return subprocess.run([sys.executable, fixture, "allocate", "--port", str(ctx.opts.coturn_port), "--user", user, "--password", pw],
                              capture_output=True, text=True, timeout=30)
    ok = await asyncio.to_thread(allocate, password)
    check(ok.returncode == 0, "allocation with the issued credential failed: %s" % (ok.stdout + ok.stderr).strip()[-300:])
    bad = await asyncio.to_thread(allocate, b64(os.urandom(20)))
    check(bad.returncode != 0, "allocation with a tampered credential succeeded")


@scenario("shutdown", default=False, needs=("server_pid",), timeout=30)
async def sc_shutdown(ctx):
    """(--server-pid; destructive, run last) SIGTERM closes every socket 1001 `shutting_down`
    with no error message first (a registered and a challenged client); the process exits."""
    a = await ctx.peer(name="registered", register=True)
    b = await ctx.peer(name="challenged")
    os.kill(ctx.opts.server_pid, signals.SIGTERM)
    for p in (a, b):
        await p.expect_close(1001, "shutting_down")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(ctx.opts.server_pid, 0)
        except ProcessLookupError:
            return
        if os.path.exists("/proc/%d/status" % ctx.opts.server_pid):
            with open("/proc/%d/status" % ctx.opts.server_pid) as status:
                if "\nState:\tZ" in status.read():
                    return
        await asyncio.sleep(0.2)
    raise Fail("the server is still running 10 s after SIGTERM")


# ------------------------------------------------------------------------------------------------
# Runner
# ------------------------------------------------------------------------------------------------

# ------------------------------------------------------------------------------------------------
# Scenarios: several nodes on one shared registry (SIGNAL_DB); --url2 is a second node
# ------------------------------------------------------------------------------------------------

def second_node(ctx):
    if ctx.opts.url2 is None:
        raise Fail("needs --url2 (a second node of the same cluster)")
    if getattr(ctx, "net2", None) is None:
        ctx.net2 = Net(ctx.opts.url2, ctx.opts.ca, ctx.opts.spread, ctx.opts.timeout)
    return ctx.net2


async def peer_on(ctx, net, name, key=None, register=True):
    p = await Peer.connect(net, key, name)
    ctx.open.append(p)
    if register:
        await p.register()
    return p


@scenario("cluster-forward", default=False, needs=("url2",))
async def sc_cluster_forward(ctx):
    """A on node 1 and B on node 2: signals cross both ways unchanged and in order; a signal for
    an ID no node holds -> offline (call, kind), kept; after B leaves, A's next signal -> offline."""
    a = await ctx.peer(name="A", register=True)
    b = await peer_on(ctx, second_node(ctx), "B")
    call = new_call()
    sent = [await a.signal(b.id, kind=kind, call=call) for kind in ("offer", "candidate", "candidate")]
    for message in sent:
        await b.expect_forwarded(message, context="A to B across nodes")
    reply = await b.signal(a.id, kind="answer", call=call)
    await a.expect_forwarded(reply, context="B to A across nodes")
    ghost = id_of(Ed25519PrivateKey.generate())
    lost = await a.signal(ghost, kind="offer")
    await a.expect_error("offline", call=lost["call"], kind="offer", context="nobody holds it")
    await b.close()
    await asyncio.sleep(0.3)
    gone = await a.signal(b.id, kind="close", call=call)
    await a.expect_error("offline", call=gone["call"], kind="close", context="B left node 2")
    await a.kept()


@scenario("cluster-presence", default=False, needs=("url2",))
async def sc_cluster_presence(ctx):
    """presence on node 1 sees IDs registered on node 2 (and on itself), in order; false once the
    node-2 peer leaves."""
    a = await ctx.peer(name="A", register=True)
    b = await peer_on(ctx, second_node(ctx), "B")
    ghost = id_of(Ed25519PrivateKey.generate())
    online = await a.presence([b.id, ghost, a.id])
    check(online == {b.id: True, ghost: False, a.id: True}, "presence across nodes %r" % online)
    await b.close()
    deadline = time.monotonic() + 2
    while (await a.presence([b.id]))[b.id]:
        check(time.monotonic() < deadline, "B still online 2 s after leaving node 2")
        await asyncio.sleep(0.1)


@scenario("cluster-duplicate", default=False, needs=("url2",))
async def sc_cluster_duplicate(ctx):
    """An ID live on node 1 registering on node 2 -> duplicate_id (close 1008), the first never
    replaced; once it leaves node 1 the ID registers on node 2."""
    key = Ed25519PrivateKey.generate()
    first = await ctx.peer(key=key, name="first", register=True)
    second = await peer_on(ctx, second_node(ctx), "second", key=key, register=False)
    await second.send(second.register_message())
    await second.expect_error_close("duplicate_id")
    await first.kept()
    await first.close()
    await asyncio.sleep(0.3)
    again = await peer_on(ctx, second_node(ctx), "again", key=key)
    await again.kept()


@scenario("cluster-hold", default=False, timeout=600)
async def sc_cluster_hold(ctx):
    """Registers --key-hex's ID and holds it until the connection ends (prints HELD first)."""
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(ctx.opts.key_hex))
    holder = await ctx.peer(key=key, name="holder", register=True)
    print("HELD", flush=True)
    try:
        await holder.ws.wait_closed()
    except Exception:
        pass
    print("CLOSED %s %s" % (holder.ws.close_code, holder.ws.close_reason), flush=True)


@scenario("cluster-reclaim", default=False, timeout=60)
async def sc_cluster_reclaim(ctx):
    """--key-hex's ID, held on a node that was killed, registers here once that node's lease
    lapses (duplicate_id before): prints how long it took."""
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(ctx.opts.key_hex))
    started = time.monotonic()
    while True:
        p = await ctx.peer(key=key, name="reclaim", register=False)
        await p.send(p.register_message())
        message = await p.recv(what="registered or duplicate_id")
        if message.get("type") == "registered":
            print("RECLAIMED after %.1f s" % (time.monotonic() - started), flush=True)
            await p.kept()
            return
        check(message.get("type") == "error" and message.get("code") == "duplicate_id", "unexpected %s" % dumps(message)[:200])
        check(time.monotonic() - started < 50, "the ID was never freed")
        await p.close()
        await asyncio.sleep(0.5)


async def run_one(sc, net, opts):
    missing = [n for n in sc.needs if getattr(opts, n) is None]
    if missing:
        return "needs --%s" % ", --".join(m.replace("_", "-") for m in missing)
    ctx = Ctx(net, opts)
    try:
        await asyncio.wait_for(sc.fn(ctx), sc.timeout)
        return None
    except Fail as failure:
        return str(failure)
    except TimeoutError:
        return "scenario timed out after %ss" % sc.timeout
    except Exception as error:   # report, never crash the run
        return "%s: %s" % (type(error).__name__, error)
    finally:
        await ctx.cleanup()


async def main_async(opts, names):
    net = Net(opts.url, opts.ca, opts.spread, opts.timeout) if opts.url else None
    ok = True
    for name in names:
        sc = SCENARIOS[name]
        if net is None and name != "vectors":
            why = "needs --url"
        else:
            why = await run_one(sc, net, opts)
        ok = ok and why is None
        print("PASS %s" % name if why is None else "FAIL %s: %s" % (name, " ".join(why.split())), flush=True)
    return ok


def main():
    global OPTS, VERBOSE
    parser = argparse.ArgumentParser(description="Independent tether signal client and conformance scenarios.")
    parser.add_argument("--url")
    parser.add_argument("--ca")
    parser.add_argument("--scenario", action="append", default=[])
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--spread", choices=("source", "xff", "none"))
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--turn-mode", choices=("none", "coturn", "cloudflare"), default="none")
    parser.add_argument("--stun-urls")
    parser.add_argument("--turn-urls")
    parser.add_argument("--turn-secret")
    parser.add_argument("--cloudflare-mode")
    parser.add_argument("--cloudflare-record")
    parser.add_argument("--coturn-port", type=int)
    parser.add_argument("--origin-allowed")
    parser.add_argument("--max-sockets", type=int)
    parser.add_argument("--forbid", help="a string no server message may contain (a secret the server holds)")
    parser.add_argument("--server-pid", type=int)
    parser.add_argument("--url2", help="a second node of the same cluster (cluster-* scenarios)")
    parser.add_argument("--key-hex", help="a 32-byte Ed25519 private key in hex (cluster-hold, cluster-reclaim)")
    parser.add_argument("--verbose", action="store_true")
    opts = parser.parse_args()
    OPTS, VERBOSE = opts, opts.verbose
    if opts.list:
        for sc in SCENARIOS.values():
            print("%-24s %-8s %s" % (sc.name, "default" if sc.default else "opt-in", sc.summary))
        return 0
    names = []
    for name in opts.scenario:
        if name == "default":
            names += [n for n, sc in SCENARIOS.items() if sc.default]
        elif name in SCENARIOS:
            names.append(name)
        else:
            print("unknown scenario %r (see --list)" % name, file=sys.stderr)
            return 2
    if not names:
        parser.print_usage(sys.stderr)
        print("give --scenario NAME (or default), or --list", file=sys.stderr)
        return 2
    if not opts.url and names != ["vectors"]:
        print("--url is required", file=sys.stderr)
        return 2
    return 0 if asyncio.run(main_async(opts, names)) else 1


if __name__ == "__main__":
    sys.exit(main())

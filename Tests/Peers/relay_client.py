#!/usr/bin/env python3
"""An independent relay client (PyPI `websockets`) for Tether's end-to-end relay tests.

Usage: relay_client.py URL SCENARIO. Prints one JSON object with what happened.
  pair   a mac parks, a phone joins (open mode), random binary frames of many sizes cross in
         both directions, then the phone leaves and the mac sees "peer gone"
  gate   an Origin header (403 forbidden), a bad room (400 bad room), a phone with no mac
         (refused "mac offline" then close 1008)
  metrics  the gate scenario, then a parked mac, then loopback /metrics scrapes (plain, with a
         query and an Origin: 200) and proxied-looking ones (X-Forwarded-For, CF-Connecting-IP: 403)
  roomcap  (relay started with a room cap of 1) a mac parks in one room; a second room is refused
         503 capacity for an upgrade and for HTTP; the first room still admits its phone
  oversize  two pairs: one mac sends 300 KiB (over the 256 KiB admitted cap: 1009 "frame too large"),
         the other 600 KiB (over the 512 KiB transport cap: 1009 with an empty reason); each phone
         sees 1001 "peer gone"
  silent  (relay started with a short keepalive) a raw-socket client upgrades and then never
         answers a ping; reports how the connection ended (no close frame: the relay drops TCP)
  shard  (relay started with a shard map giving it buckets 0-32767) /shardmap.json, 421 for a foreign
         room over HTTP and upgrade, then `tether shardmap publish` moves a live paired room away:
         both legs close 4421 "reshard <owner>" and the bucket that moved in is served
  catalogue  (idle TTL 1 s) displacement and re-splice, slot occupied, bad hello, bad proof, too
         many pending, the admission rate limit, the pairing-cycle cap, bad signature, invalid
         UTF-8 (1007) and a protocol violation (1002) with peer gone, admission timeout (also in a
         room whose mac has been parked for 16 s), room expired
  abuse  (20 frames/s, 100,000-byte quota) frame rate exceeded, daily quota exceeded and its
         re-trip, then SIGTERM to the relay: server shutting down on both legs
  limits  (trusting X-Forwarded-For; small caps) 429 too many connections, 503 capacity,
         429 rate limited for upgrades and /attest*, 413 payload too large
  malformed  a spliced pair keeps working while malformed HTTP, upgrades and frames of every kind
         hit the relay, some in its own room
  attest_flow  (attestation mode, test root) the full App Attest pairing with its failures
  attested  (attestation mode) ticket required, bad ticket, /attest refused
  lifecycle  pair, /register the verifier (derived from a roomSecret with the `cryptography`
         package, independently of Tether), signed rejoins, then a signed /delete
  any_path, http_counted, unlimited_paths, no_extensions, metrics_methods, empty_origin,
  room_header_forms, attest_prefix, bodies, unrouted, room_json, gate_first, early_hello,
  keepalive_admitted, data_not_liveness, forwarding_headers
         the entry gate's and the transport's rules one by one, each written byte for byte
         (see each function's docstring)
"""
import asyncio
import json
import os
import random
import sys

import base64
import struct
import urllib.error
import urllib.request
from urllib.parse import urlparse

import websockets
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from websockets.exceptions import ConnectionClosed, InvalidStatus


def canonical(domain, fields):
    out = b""
    for element in [domain.encode()] + fields:
        out += struct.pack(">I", len(element)) + element
    return out


def join_key(room_secret):
    seed = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"relay-auth-ed25519").derive(room_secret)
    return Ed25519PrivateKey.from_private_bytes(seed)


def verifier_of(key):
    """The room verifier V: the join key's raw public key, base64."""
    return base64.b64encode(key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)).decode()


def post(url, room_name, path, body):
    parsed = urlparse(url)
    request = urllib.request.Request("http://%s%s" % (parsed.netloc, path), data=json.dumps(body).encode() if body is not None else None,
                                     headers={"x-relay-room": room_name, "User-Agent": "iTerm2Companion"}, method="POST")
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def room():
    return os.urandom(32).hex()


def tls_context(url):
    """For wss:// URLs: trust the test CA named by TETHER_TEST_CA (a relay serving TLS itself)."""
    if not url.startswith("wss://"):
        return None
    import ssl
    return ssl.create_default_context(cafile=os.environ["TETHER_TEST_CA"])


async def admit(url, room_name, role, key=None, origin=None):
    ws = await websockets.connect(url, additional_headers={"x-relay-room": room_name}, max_size=None,
                                  compression=None, origin=None, user_agent_header="iTerm2Companion", ssl=tls_context(url))
    await ws.send(json.dumps({"v": 1, "role": role}))
    challenge = json.loads(await ws.recv())
    if key is None:
        await ws.send("{}")
    else:
        nonce = base64.b64decode(challenge["nonce"])
        role_byte = b"\x01" if role == "mac" else b"\x02"
        transcript = canonical("iterm2-relay-join", [b"\x01", role_byte, nonce, room_name.encode(), origin.encode()])
        await ws.send(json.dumps({"sig": base64.b64encode(key.sign(transcript)).decode()}))
    result = json.loads(await ws.recv())
    return ws, challenge, result


async def pair_and_register(url):
    """A fresh room paired in open mode and registered with a new roomSecret's verifier."""
    r = room()
    secret = os.urandom(32)
    key = join_key(secret)
    verifier = verifier_of(key)
    mac, _, _ = await admit(url, r, "mac")
    phone, _, phone_result = await admit(url, r, "phone")
    token = phone_result["registrationToken"]
    registered = post(url, r, "/register", {"registrationToken": token, "verifier": verifier})
    return r, secret, key, verifier, token, mac, phone, registered


async def lifecycle(url):
    out = {}
    origin = "http://" + urlparse(url).netloc
    r, _, key, verifier, token, mac, phone, out["register"] = await pair_and_register(url)
    out["register_again"] = post(url, r, "/register", {"registrationToken": token, "verifier": verifier})
    out["attest_open_mode"] = post(url, r, "/attest", {"challenge": "x", "attestationObject": "y"})
    unsigned, _, unsigned_result = await admit(url, r, "mac")
    out["unsigned_join"] = unsigned_result
    mac2, _, mac2_result = await admit(url, r, "mac", key, origin)
    out["signed_mac"] = mac2_result
    phone2, _, phone2_result = await admit(url, r, "phone", key, origin)
    out["signed_phone_ok"] = phone2_result.get("ok")
    status, challenge = post(url, r, "/attest/challenge", None)
    out["challenge_status"] = status
    c = challenge["challenge"]
    transcript = canonical("iterm2-relay-delete", [b"\x01", base64.b64decode(c), r.encode(), origin.encode()])
    out["delete"] = post(url, r, "/delete", {"challenge": c, "signature": base64.b64encode(key.sign(transcript)).decode()})
    closes = []
    for ws in (mac2, phone2):
        try:
            await ws.recv()
        except ConnectionClosed as closed:
            closes.append([closed.rcvd.code, closed.rcvd.reason] if closed.rcvd else None)
    out["closes"] = closes
    out["delete_again"] = post(url, r, "/delete", {"challenge": c, "signature": "x"})
    out["unknown_path"] = post_raw(url, r, "/nothing")
    return out


def post_raw(url, room_name, path):
    parsed = urlparse(url)
    request = urllib.request.Request("http://%s%s" % (parsed.netloc, path), data=b"{}", headers={"x-relay-room": room_name}, method="POST")
    try:
        with urllib.request.urlopen(request) as response:
            return [response.status, response.read().decode()]
    except urllib.error.HTTPError as error:
        return [error.code, error.read().decode()]


async def pair(url):
    out = {}
    r = room()
    mac, challenge, mac_result = await admit(url, r, "mac")
    out["nonce_length"] = len(challenge["nonce"])
    out["room"] = r
    out["mac_result"] = mac_result
    phone, _, phone_result = await admit(url, r, "phone")
    out["phone_ok"] = phone_result.get("ok")
    out["token_length"] = len(phone_result.get("registrationToken", ""))
    rng = random.Random(7)
    sizes = [0, 1, 125, 126, 65535, 65536, 100_000, 262_144] + [rng.randrange(1, 5000) for _ in range(40)]
    frames = [os.urandom(n) for n in sizes]

    async def pump(sender, receiver, items):
        async def send():
            for f in items:
                await sender.send(f)
        task = asyncio.create_task(send())
        got = [await receiver.recv() for _ in items]
        await task
        return got

    out["phone_to_mac_ok"] = (await pump(phone, mac, frames)) == frames
    out["mac_to_phone_ok"] = (await pump(mac, phone, list(reversed(frames)))) == list(reversed(frames))
    await phone.close()
    try:
        await mac.recv()
    except ConnectionClosed as closed:
        out["mac_close"] = [closed.rcvd.code, closed.rcvd.reason] if closed.rcvd else None
    return out


async def gate(url):
    out = {}
    try:
        await websockets.connect(url, additional_headers={"x-relay-room": room()}, origin="https://evil.example")
    except InvalidStatus as refused:
        out["origin"] = [refused.response.status_code, refused.response.body.decode()]
    try:
        await websockets.connect(url, additional_headers={"x-relay-room": "ABC"})
    except InvalidStatus as refused:
        out["bad_room"] = [refused.response.status_code, refused.response.body.decode()]
    ws, _, result = await admit(url, room(), "phone")
    out["phone_alone"] = result
    try:
        await ws.recv()
    except ConnectionClosed as closed:
        out["phone_alone_close"] = [closed.rcvd.code, closed.rcvd.reason] if closed.rcvd else None
    return out


def scrape(url, headers=None, target="/metrics"):
    parsed = urlparse(url)
    request = urllib.request.Request("http://%s%s" % (parsed.netloc, target), headers=headers or {})
    try:
        with urllib.request.urlopen(request) as response:
            return [response.status, response.headers.get("content-type"), response.read().decode()]
    except urllib.error.HTTPError as error:
        return [error.code, error.headers.get("content-type"), error.read().decode()]


async def metrics(url):
    await gate(url)
    mac, _, _ = await admit(url, room(), "mac")
    out = {}
    status, content_type, body = scrape(url)
    out["status"], out["content_type"] = status, content_type
    out["series"] = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in body.splitlines() if line and not line.startswith("#")}
    out["help_lines"] = sum(1 for line in body.splitlines() if line.startswith("# HELP"))
    out["type_lines"] = sum(1 for line in body.splitlines() if line.startswith("# TYPE"))
    out["query_status"] = scrape(url, target="/metrics?x=1")[0]
    out["origin_status"] = scrape(url, {"Origin": "https://evil.example"})[0]
    out["forwarded"] = scrape(url, {"X-Forwarded-For": "127.0.0.1"})[::2]
    out["cf"] = scrape(url, {"CF-Connecting-IP": "127.0.0.1"})[::2]
    out["healthz"] = scrape(url, target="/healthz")[::2]
    out["healthz_forwarded"] = scrape(url, {"X-Forwarded-For": "127.0.0.1"}, target="/healthz")[::2]
    await mac.close()
    return out


async def roomcap(url):
    out = {}
    first = room()
    mac, _, _ = await admit(url, first, "mac")
    try:
        await websockets.connect(url, additional_headers={"x-relay-room": room()})
    except InvalidStatus as refused:
        out["upgrade"] = [refused.response.status_code, refused.response.body.decode()]
    out["http"] = post_raw(url, room(), "/attest/challenge")
    phone, _, result = await admit(url, first, "phone")
    out["resident_phone"] = result
    out["rejections"] = series(url, "relay_ws_upgrades_rejected_total")
    await phone.close()
    await mac.close()
    return out


async def closes_of(ws, peer):
    out = []
    for side in (ws, peer):
        try:
            while True:
                await side.recv()
        except ConnectionClosed as closed:
            out.append([closed.rcvd.code, closed.rcvd.reason] if closed.rcvd else None)
    return out


async def oversize(url):
    out = {}
    for name, size in (("app_cap", 300 * 1024), ("transport_cap", 600 * 1024)):
        r = room()
        mac, _, _ = await admit(url, r, "mac")
        phone, _, _ = await admit(url, r, "phone")
        try:
            await mac.send(os.urandom(size))
        except ConnectionClosed:
            # The relay may refuse the frame from its header and close while the payload is
            # still being written; the close itself is what closes_of reads.
            pass
        out[name] = await closes_of(mac, phone)
    return out


def upgrade_and_drain(url, room_name):
    """A hand-written upgrade, then every byte the relay sends until it drops TCP."""
    import socket
    parsed = urlparse(url)
    sock = socket.create_connection((parsed.hostname, parsed.port))
    sock.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                  "x-relay-room: %s\r\n\r\n" % (parsed.netloc, room_name)).encode())
    sock.settimeout(10)
    received = read_to_end(sock)
    return received


async def silent(url):
    import time
    started = time.monotonic()
    received = upgrade_and_drain(url, room())
    head, _, frames = received.partition(b"\r\n\r\n")
    opcodes = []
    while len(frames) >= 2:
        length = frames[1] & 0x7F
        opcodes.append(frames[0] & 0x0F)
        frames = frames[2 + length:]
    return {"status_line": head.split(b"\r\n")[0].decode(), "opcodes": opcodes, "seconds": time.monotonic() - started}


async def register(url):
    """Pairs and registers a room; prints what a later rejoin needs."""
    r, secret, _, _, _, mac, phone, (status, _) = await pair_and_register(url)
    await phone.close()
    await mac.close()
    return {"room": r, "secret": secret.hex(), "status": status}


async def rejoin(url, r, secret_hex):
    origin = "http://" + urlparse(url).netloc
    key = join_key(bytes.fromhex(secret_hex))
    unsigned, _, unsigned_result = await admit(url, r, "mac")
    mac, _, signed_result = await admit(url, r, "mac", key, origin)
    await mac.close()
    return {"unsigned": unsigned_result, "signed": signed_result}


async def first_access(url, r, secret_hex):
    """A stored room's first accesses after a restart, at the same moment on three connections:
    the mac's and the phone's upgrades and an /attest/challenge. Then both join signed (mac
    first), a frame crosses, and the relay says how many room contexts are live."""
    origin = "http://" + urlparse(url).netloc
    key = join_key(bytes.fromhex(secret_hex))

    async def connect():
        return await websockets.connect(url, additional_headers={"x-relay-room": r}, max_size=None, compression=None,
                                        origin=None, user_agent_header="iTerm2Companion")

    loop = asyncio.get_running_loop()
    mac, phone, (challenge_status, _) = await asyncio.gather(connect(), connect(),
                                                             loop.run_in_executor(None, post, url, r, "/attest/challenge", None))
    results = {}
    for role, ws in (("mac", mac), ("phone", phone)):
        await ws.send(json.dumps({"v": 1, "role": role}))
        nonce = base64.b64decode(json.loads(await ws.recv())["nonce"])
        transcript = canonical("iterm2-relay-join", [b"\x01", b"\x01" if role == "mac" else b"\x02", nonce, r.encode(), origin.encode()])
        await ws.send(json.dumps({"sig": base64.b64encode(key.sign(transcript)).decode()}))
        results[role] = json.loads(await ws.recv())
    await mac.send(b"\x01\x02\x03")
    spliced = (await asyncio.wait_for(phone.recv(), 5)).hex()
    live = [line for line in scrape(url)[2].splitlines() if line.startswith("relay_rooms_live ")]
    await phone.close()
    await mac.close()
    return {"challenge": challenge_status, "mac": results["mac"], "phone": results["phone"], "spliced": spliced, "rooms_live": live}


def room_in(low, high):
    """A random room whose bucket (its last 4 hex digits) lies in [low, high]."""
    while True:
        r = room()
        if low <= int(r[-4:], 16) <= high:
            return r


def request_full(url, room_name, path, method="POST", headers=None):
    """[status, selected headers, body] of a plain HTTP request."""
    parsed = urlparse(url)
    fields = {"x-relay-room": room_name} if room_name else {}
    fields.update(headers or {})
    request = urllib.request.Request("http://%s%s" % (parsed.netloc, path), data=b"{}" if method == "POST" else None,
                                     headers=fields, method=method)
    try:
        response = urllib.request.urlopen(request)
    except urllib.error.HTTPError as error:
        response = error
    wanted = ("content-type", "cache-control", "x-relay-owner", "content-length")
    return [response.status, {k: response.headers.get(k) for k in wanted if response.headers.get(k) is not None}, response.read().decode()]


def raw_upgrade(url, room_name):
    """An upgrade written by hand, so the refusal is seen byte for byte: [status line, headers, body]."""
    head, _, body = upgrade_and_drain(url, room_name).partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    fields = {line.split(":", 1)[0].lower(): line.split(":", 1)[1].strip() for line in lines[1:]}
    return [lines[0], fields, body.decode()]


async def shard(url, binary, db):
    """(relay started with a map giving it buckets 0-32767 and relay2.example the rest)"""
    import subprocess
    import tempfile
    out = {}
    own = urlparse(url).netloc
    mine, theirs = room_in(0, 32767), room_in(32768, 65535)
    out["map"] = request_full(url, None, "/shardmap.json", method="GET")
    out["map_head"] = request_full(url, None, "/shardmap.json", method="HEAD")
    out["map_with_origin"] = request_full(url, None, "/shardmap.json", method="GET", headers={"Origin": "https://evil.example"})[0]
    out["http_misdirected"] = request_full(url, theirs, "/attest/challenge")
    out["http_origin_first"] = request_full(url, theirs, "/attest/challenge", headers={"Origin": "https://evil.example"})[::2]
    out["http_bad_room_first"] = request_full(url, theirs.upper(), "/attest/challenge")[::2]
    out["http_mine"] = request_full(url, mine, "/attest/challenge")[0]
    out["upgrade_misdirected"] = raw_upgrade(url, theirs)
    mac, _, _ = await admit(url, mine, "mac")
    phone, _, phone_result = await admit(url, mine, "phone")
    out["phone_ok"] = phone_result.get("ok")
    moved = {"version": 2, "ranges": [{"low": 0, "high": 32767, "host": "relay3.example"},
                                      {"low": 32768, "high": 65535, "host": own}]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(moved, handle)
    published = subprocess.run([binary, "shardmap", "publish", handle.name, "--relay-db", db], capture_output=True, text=True)
    os.unlink(handle.name)
    out["publish"] = [published.returncode, published.stdout.strip()]
    out["closes"] = await asyncio.wait_for(closes_of(mac, phone), 10)
    out["map_after"] = json.loads(request_full(url, None, "/shardmap.json", method="GET")[2])
    out["upgrade_moved"] = raw_upgrade(url, mine)[0::2]
    newly_mine, _, newly_mine_result = await admit(url, theirs, "mac")
    out["newly_mine_mac"] = newly_mine_result
    await newly_mine.close()
    series = scrape(url)[2]
    out["misdirected_metric"] = [line for line in series.splitlines() if 'reason="misdirected"' in line]
    return out


def read_to_end(sock):
    """Every byte the relay sends until it closes the connection."""
    received = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return received
        received += chunk


def masked(payload, mask):
    """RFC 6455 §5.3 masking as one big-integer XOR: a byte-at-a-time loop masks 256 KiB in tens
    of milliseconds, too slow for a flood to outrun the relay on a loaded machine."""
    if not payload:
        return b""
    key = (mask * (len(payload) // 4 + 1))[:len(payload)]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(len(payload), "big")


def masked_frame(opcode, payload, first_byte=None):
    """One client frame (masked, as a client must send it)."""
    mask = os.urandom(4)
    byte0 = first_byte if first_byte is not None else 0x80 | opcode
    length = len(payload)
    if length < 126:
        header = bytes([byte0, 0x80 | length])
    elif length < 65536:
        header = bytes([byte0, 0x80 | 126]) + struct.pack(">H", length)
    else:
        header = bytes([byte0, 0x80 | 127]) + struct.pack(">Q", length)
    return header + mask + masked(payload, mask)


class RawSocket:
    """A WebSocket client written by hand, for frames a library refuses to send (invalid UTF-8,
    reserved bits) and for watching exactly what the relay sends back."""

    def __init__(self, url, room_name, headers="", source=None, path="/", host=None, early=b""):
        """`path` and `host` as the request line and Host header carry them; `early` is written in
        the same send as the request (frames sent before the 101 arrives)."""
        import socket
        parsed = urlparse(url)
        self.sock = socket.create_connection((parsed.hostname, parsed.port), source_address=(source, 0) if source else None)
        self.sock.settimeout(40)
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                           "x-relay-room: %s\r\n%s\r\n" % (path, host or parsed.netloc, room_name, headers)).encode() + early)
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                break
            self.buffer += chunk
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.status = lines[0]
        self.headers = {line.split(":", 1)[0].lower(): line.split(":", 1)[1].strip() for line in lines[1:] if ":" in line}

    def send_frame(self, opcode, payload, first_byte=None):
        self.sock.sendall(masked_frame(opcode, payload, first_byte))

    def drain_opcodes(self):
        """The opcodes of every frame the relay sends until it drops TCP, answering nothing
        (pings included): a client that has gone silent."""
        opcodes = []
        try:
            while True:
                opcodes.append(self._read_frame()[0])
        except (EOFError, OSError):
            return opcodes

    def _read_frame(self):
        """(opcode, payload) of the next frame as it arrives (no ping answered)."""
        byte0, byte1 = self._read(2)
        length = byte1 & 0x7F
        if length == 126:
            length = struct.unpack(">H", self._read(2))[0]
        elif length == 127:
            length = struct.unpack(">Q", self._read(8))[0]
        return byte0 & 0x0F, self._read(length)

    def _read(self, count):
        while len(self.buffer) < count:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        out, self.buffer = self.buffer[:count], self.buffer[count:]
        return out

    def recv_frame(self):
        """(opcode, payload) of the next frame, answering pings; None when TCP closes."""
        try:
            while True:
                opcode, payload = self._read_frame()
                if opcode == 0x9:
                    self.send_frame(0xA, payload)
                    continue
                return opcode, payload
        except (EOFError, OSError):
            return None

    def close_received(self):
        """[code, reason] of the relay's close frame (skipping other frames), or None."""
        while True:
            frame = self.recv_frame()
            if frame is None:
                return None
            if frame[0] == 0x8:
                payload = frame[1]
                return [struct.unpack(">H", payload[:2])[0], payload[2:].decode()] if len(payload) >= 2 else [None, ""]

    def admit(self, role):
        self.send_frame(0x1, json.dumps({"v": 1, "role": role}).encode())
        self.recv_frame()
        self.send_frame(0x1, b"{}")
        return json.loads(self.recv_frame()[1])


async def admission_window(url):
    """45 Proofs in one room within 10 s, each on a fresh socket from its own loopback source
    address, each socket closed before the next opens (so the room empties every time)."""
    r = room()

    def attempt(i):
        raw = RawSocket(url, r, source="127.0.0.%d" % (10 + i))
        result = raw.admit("mac")
        close = None if result.get("ok") else raw.close_received()
        raw.sock.close()
        return {"result": result, "close": close}

    import time
    started = time.monotonic()
    attempts = [await asyncio.to_thread(attempt, i) for i in range(45)]
    return {"attempts": attempts, "seconds": time.monotonic() - started}


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def round_trips_until(stop, a, b, pid):
    """64 B round trips from `a` to `b` every 10 ms until `stop` (monotonic): the RTTs, sorted,
    and the relay's peak RSS meanwhile."""
    import time
    rtts, peak = [], 0
    while time.monotonic() < stop:
        started = time.monotonic()
        a.send_frame(0x2, b"x" * 64)
        b.recv_frame()
        rtts.append(time.monotonic() - started)
        peak = max(peak, rss_kib(pid))
        time.sleep(0.01)
    return sorted(rtts), peak


async def flood(url, pid):
    """Back-pressure: in each of FLOOD_ROOMS rooms (default 1) a mac floods 256 KiB frames for
    FLOOD_SECONDS into a phone that never reads, while an unrelated pair exchanges 64 B frames;
    the relay's RSS growth and the other pair's round trips."""
    import threading
    import time
    seconds = float(os.environ.get("FLOOD_SECONDS", "4"))
    rooms = int(os.environ.get("FLOOD_ROOMS", "1"))
    rss_before = rss_kib(pid)
    floods = []
    out = {}
    for _ in range(rooms):
        r = room()
        mac, phone = RawSocket(url, r), RawSocket(url, r)
        out["mac"], out["phone"] = mac.admit("mac"), phone.admit("phone")
        floods.append((mac, phone))
    other_room = room()
    a, b = RawSocket(url, other_room), RawSocket(url, other_room)
    a.admit("mac")
    b.admit("phone")
    sent = [0] * rooms
    stop = time.monotonic() + seconds
    frame = os.urandom(262_144)

    def pump(index, mac):
        mac.sock.settimeout(0.5)
        while time.monotonic() < stop:
            try:
                mac.send_frame(0x2, frame)
                sent[index] += len(frame)
            except OSError:
                pass   # the relay stopped reading us: exactly what back-pressure should do

    flooders = [threading.Thread(target=pump, args=(i, mac)) for i, (mac, _) in enumerate(floods)]
    for flooder in flooders:
        flooder.start()
    rtts, peak = round_trips_until(stop, a, b, pid)
    for flooder in flooders:
        flooder.join()
    out["rooms"] = rooms
    out["sent_bytes"] = max(sent)
    out["rss_growth_kib"] = rss_kib(pid) - rss_before
    out["rss_peak_growth_kib"] = peak - rss_before
    out["rtt_p99_ms"] = rtts[int(len(rtts) * 0.99)] * 1000 if rtts else None
    out["round_trips"] = len(rtts)
    return out


def flooders(url, kind, rooms, ready, done, results):
    """The flooding half of control_flood, in a process of its own (so the measuring pair never
    waits on this one's interpreter): admits `rooms` pairs, sets `ready`, floods until `done`."""
    import socket
    import threading
    first_byte, payload = {"ping": (0x80 | 0x9, os.urandom(125)), "close": (0x80 | 0x8, struct.pack(">H", 1000)),
                           "fragments": (0x0, b"x")}[kind]
    floods = []
    for index in range(rooms):
        r = room()
        # Each room from its own address: the per-IP caps stay as deployed.
        source = "127.0.%d.%d" % (1 + index // 250, 2 + index % 250)
        mac, phone = RawSocket(url, r, source=source), RawSocket(url, r, source=source)
        mac.admit("mac")
        phone.admit("phone")
        if kind == "fragments":
            mac.send_frame(0x2, b"x", first_byte=0x2)   # a binary message's first frame, FIN clear
        floods.append((mac, phone))
    closed = [False] * rooms

    def pump(index, mac):
        mac.sock.settimeout(0.2)
        while not done.is_set():
            try:
                mac.send_frame(first_byte & 0x0F, payload, first_byte=first_byte)
            except socket.timeout:
                pass   # the relay stopped reading this flooder: back-pressure
            except OSError:
                closed[index] = True
                return

    threads = [threading.Thread(target=pump, args=(i, mac)) for i, (mac, _) in enumerate(floods)]
    for thread in threads:
        thread.start()
    ready.set()
    for thread in threads:
        thread.join()
    results.put(sum(closed))
    for mac, phone in floods:
        mac.sock.close()
        phone.sock.close()


async def control_flood(url, pid):
    """In each of FLOOD_ROOMS rooms (default 100) an admitted mac floods one kind of frame for
    FLOOD_SECONDS (default 3) while never reading: pings (whose pongs pile up toward it), close
    frames, or the 1-byte fragments of a binary message that never ends; meanwhile an unrelated
    pair exchanges 64 B frames. Per kind: the relay's RSS peak growth, the other pair's RTT p99,
    and how many flooders the relay closed."""
    import multiprocessing
    import time
    seconds = float(os.environ.get("FLOOD_SECONDS", "3"))
    rooms = int(os.environ.get("FLOOD_ROOMS", "100"))
    out = {}
    other_room = room()
    a, b = RawSocket(url, other_room), RawSocket(url, other_room)
    a.admit("mac")
    b.admit("phone")
    context = multiprocessing.get_context("fork")
    for kind in ("ping", "close", "fragments"):
        rss_before = rss_kib(pid)
        ready, done, results = context.Event(), context.Event(), context.Queue()
        child = context.Process(target=flooders, args=(url, kind, rooms, ready, done, results))
        child.start()
        ready.wait(60)
        rtts, peak = round_trips_until(time.monotonic() + seconds, a, b, pid)
        done.set()
        closed = results.get(timeout=60)
        child.join(30)
        out[kind] = {"rss_peak_growth_kib": peak - rss_before, "rtt_p99_ms": round(rtts[int(len(rtts) * 0.99)] * 1000, 1) if rtts else None,
                     "round_trips": len(rtts), "flooders_closed": closed, "rooms": rooms}
        time.sleep(0.5)
    return out


async def refusal(url, room_name, hello, proof):
    """Result and close of a socket whose Hello or Proof the relay refuses."""
    ws = await websockets.connect(url, additional_headers={"x-relay-room": room_name}, compression=None)
    await ws.send(hello)
    messages = []
    try:
        if proof is not None:
            messages.append(json.loads(await ws.recv()).keys().__contains__("nonce"))
            await ws.send(proof)
        while True:
            messages.append(json.loads(await ws.recv()))
    except ConnectionClosed as closed:
        return {"messages": messages, "close": [closed.rcvd.code, closed.rcvd.reason] if closed.rcvd else None}


async def admission_timeout(url):
    import time
    started = time.monotonic()
    raw = await asyncio.to_thread(RawSocket, url, room())
    close = await asyncio.to_thread(raw.close_received)
    return {"close": close, "seconds": time.monotonic() - started}


async def long_lived_admission_timeout(url):
    """A mac parked in a room for 16 s, so the room's first 15 s of housekeeping have come and
    gone with nothing pending; then a pre-auth socket in that room, which must still time out."""
    import time
    r = room()
    mac, _, _ = await admit(url, r, "mac")
    await asyncio.sleep(16)
    started = time.monotonic()
    raw = await asyncio.to_thread(RawSocket, url, r)
    close = await asyncio.to_thread(raw.close_received)
    seconds = time.monotonic() - started
    await mac.close()
    return {"close": close, "seconds": seconds}


async def room_expired(url):
    r, _, _, _, _, mac, phone, (status, _) = await pair_and_register(url)
    return {"register": status, "closes": await closes_of(mac, phone)}


async def catalogue(url):
    """(relay started with an established-room idle TTL of 1 s) every admission-time close."""
    out = {}
    slow = [asyncio.create_task(admission_timeout(url)), asyncio.create_task(room_expired(url)),
            asyncio.create_task(long_lived_admission_timeout(url))]

    # Displacement: newest wins; the surviving peer is re-spliced, not closed.
    r = room()
    mac1, _, _ = await admit(url, r, "mac")
    phone, _, _ = await admit(url, r, "phone")
    mac2, _, mac2_result = await admit(url, r, "mac")
    try:
        await mac1.recv()
    except ConnectionClosed as closed:
        out["displaced"] = [closed.rcvd.code, closed.rcvd.reason]
    await phone.send(b"after displacement")
    out["respliced"] = (await mac2.recv()) == b"after displacement"
    out["slot_occupied"] = await refusal(url, r, json.dumps({"v": 1, "role": "mac", "nonDisplacing": True}), "{}")
    await mac2.send(b"incumbent untouched")
    out["incumbent_untouched"] = (await phone.recv()) == b"incumbent untouched"
    await phone.close()
    await mac2.close()

    out["bad_hello"] = await refusal(url, room(), "not json", None)
    out["bad_hello_v"] = await refusal(url, room(), json.dumps({"v": "1", "role": "mac"}), None)
    out["bad_proof"] = await refusal(url, room(), json.dumps({"v": 1, "role": "mac"}), "{not json")

    # Pre-auth cap: a fifth pending socket evicts the oldest.
    r = room()
    pending = [await asyncio.to_thread(RawSocket, url, r) for _ in range(5)]
    out["too_many_pending"] = await asyncio.to_thread(pending[0].close_received)
    for raw in pending[1:]:
        raw.sock.close()

    # Admission rate limit: 40 Proofs per 10 s per room; the 41st is refused.
    r = room()
    results = []
    for _ in range(40):
        ws, _, result = await admit(url, r, "mac")
        results.append(result.get("ok"))
    out["forty_admitted"] = all(results)
    out["rate_limited"] = await refusal(url, r, json.dumps({"v": 1, "role": "mac"}), "{}")
    await ws.close()

    # Pairing-cycle cap: one mac park allows 8 phone admissions; the 9th tears the room down.
    r = room()
    mac, _, _ = await admit(url, r, "mac")
    phones = []
    for _ in range(8):
        p, _, result = await admit(url, r, "phone")
        phones.append(result.get("ok"))
    out["eight_phones"] = phones
    ninth = await refusal(url, r, json.dumps({"v": 1, "role": "phone"}), "{}")
    out["pairing_cycle_cap"] = ninth
    try:
        await mac.recv()
    except ConnectionClosed as closed:
        out["pairing_cycle_cap_mac"] = [closed.rcvd.code, closed.rcvd.reason]

    # Signatures in an established room.
    r, _, key, _, _, mac, phone, _ = await pair_and_register(url)
    await phone.close()
    await mac.close()
    wrong = Ed25519PrivateKey.generate()
    origin = "http://" + urlparse(url).netloc
    ws = await websockets.connect(url, additional_headers={"x-relay-room": r}, compression=None)
    await ws.send(json.dumps({"v": 1, "role": "mac"}))
    nonce = base64.b64decode(json.loads(await ws.recv())["nonce"])
    transcript = canonical("iterm2-relay-join", [b"\x01", b"\x01", nonce, r.encode(), origin.encode()])
    await ws.send(json.dumps({"sig": base64.b64encode(wrong.sign(transcript)).decode()}))
    out["bad_signature"] = json.loads(await ws.recv())
    try:
        await ws.recv()
    except ConnectionClosed as closed:
        out["bad_signature_close"] = [closed.rcvd.code, closed.rcvd.reason]

    # Transport errors on an admitted socket: the sender gets the code, its peer "peer gone".
    for name, frame in (("invalid_utf8", (0x1, b"\xff\xfe", None)), ("protocol_violation", (0x2, b"x", 0x80 | 0x40 | 0x2))):
        r = room()
        raw = await asyncio.to_thread(RawSocket, url, r)
        out[name + "_admitted"] = (await asyncio.to_thread(raw.admit, "mac")).get("ok")
        phone, _, _ = await admit(url, r, "phone")
        opcode, payload, first = frame
        raw.send_frame(opcode, payload, first)
        sender = await asyncio.to_thread(raw.close_received)
        try:
            await phone.recv()
        except ConnectionClosed as closed:
            out[name] = [sender, [closed.rcvd.code, closed.rcvd.reason]]

    out["admission_timeout"], out["room_expired"], out["long_lived_admission_timeout"] = await asyncio.gather(*slow)
    return out


async def abuse(url, pid):
    """(relay started with 20 frames/s per room and a 100,000-byte daily quota) the splice's caps,
    then a graceful shutdown (SIGTERM to `pid`) with a pair still spliced."""
    import signal
    out = {}
    r = room()
    mac, _, _ = await admit(url, r, "mac")
    phone, _, _ = await admit(url, r, "phone")
    for i in range(25):
        try:
            await mac.send(b"x")
        except ConnectionClosed:
            break
    out["frame_rate"] = await closes_of(mac, phone)

    r = room()
    mac, _, _ = await admit(url, r, "mac")
    phone, _, _ = await admit(url, r, "phone")
    await mac.send(os.urandom(60_000))
    out["under_quota_delivered"] = len(await phone.recv()) == 60_000
    await phone.send(os.urandom(60_000))
    out["quota"] = await closes_of(mac, phone)
    mac, _, mac_again = await admit(url, r, "mac")
    phone, _, phone_again = await admit(url, r, "phone")
    out["readmitted"] = [mac_again.get("ok"), phone_again.get("ok")]
    await phone.send(b"y")
    out["quota_retrips"] = await closes_of(mac, phone)
    out["quota_metric"] = [line for line in scrape(url)[2].splitlines() if line.startswith("relay_quota_exceeded_total")]

    r = room()
    mac, _, _ = await admit(url, r, "mac")
    phone, _, _ = await admit(url, r, "phone")
    os.kill(pid, signal.SIGTERM)
    out["shutdown"] = await closes_of(mac, phone)
    return out


async def limits(url):
    """(relay trusting X-Forwarded-For, 2 sockets per IP, 4 in all, 6 upgrades and 3 /attest*
    requests per IP per minute) the entry-level refusals."""
    out = {}
    held = []

    def upgrade(ip):
        raw = RawSocket(url, room(), "X-Forwarded-For: %s\r\n" % ip)
        if raw.status.endswith("101 Switching Protocols"):
            held.append(raw)
            return [raw.status]
        return [raw.status, raw.buffer.decode()]

    out["ip_a"] = [upgrade("198.51.100.1") for _ in range(3)]
    out["ip_b"] = [upgrade("198.51.100.2") for _ in range(2)]
    out["ip_c"] = [upgrade("198.51.100.3") for _ in range(7)]

    def attest(ip):
        parsed = urlparse(url)
        request = urllib.request.Request("http://%s/attest/challenge" % parsed.netloc, data=b"",
                                         headers={"x-relay-room": room(), "X-Forwarded-For": ip}, method="POST")
        try:
            with urllib.request.urlopen(request) as response:
                return [response.status]
        except urllib.error.HTTPError as error:
            return [error.code, error.read().decode()]

    out["attest"] = [attest("198.51.100.4") for _ in range(4)]
    out["attest_other_ip"] = attest("198.51.100.5")

    def declared_large(extra):
        """A POST declaring a body over the cap, none of it sent: the answer comes from the head."""
        import socket
        parsed = urlparse(url)
        sock = socket.create_connection((parsed.hostname, parsed.port))
        sock.settimeout(10)
        sock.sendall(("POST /register HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\n"
                      "Content-Length: 65537\r\n\r\n" % (parsed.netloc, extra)).encode())
        answer = sock.recv(65536).decode()
        sock.close()
        return [answer.split("\r\n")[0], answer.partition("\r\n\r\n")[2]]

    out["too_large"] = declared_large("x-relay-room: %s\r\n" % room())
    out["too_large_with_origin"] = declared_large("x-relay-room: %s\r\nOrigin: https://evil.example\r\n" % room())
    out["too_large_bad_room"] = declared_large("x-relay-room: nope\r\n")
    out["rejections"] = [line for line in scrape(url)[2].splitlines() if line.startswith("relay_ws_upgrades_rejected_total{")]
    for raw in held:
        raw.sock.close()
    return out


async def attested(url):
    """(relay in attestation mode) a phone needs a ticket; /attest refuses until App Attest lands."""
    out = {}
    r = room()
    mac, _, mac_result = await admit(url, r, "mac")
    out["mac"] = mac_result
    out["no_ticket"] = await refusal(url, r, json.dumps({"v": 1, "role": "phone"}), "{}")
    out["bad_ticket"] = await refusal(url, r, json.dumps({"v": 1, "role": "phone"}), json.dumps({"ticket": "AAAA"}))
    status, challenge = post(url, r, "/attest/challenge", None)
    out["challenge"] = [status, len(challenge.get("challenge", ""))]
    out["attest"] = post(url, r, "/attest", {"challenge": challenge.get("challenge"), "attestationObject": "o2NmbXQ=", "keyId": "AAAA"})
    await mac.close()
    return out


async def malformed(url):
    """A spliced pair stays intact while every kind of malformed input hits the relay around it."""
    import socket
    out = {}
    r = room()
    mac, _, _ = await admit(url, r, "mac")
    phone, _, _ = await admit(url, r, "phone")
    parsed = urlparse(url)

    def raw(data):
        """Sends `data` on a fresh connection; returns the status line (or "" if none came)."""
        sock = socket.create_connection((parsed.hostname, parsed.port))
        sock.settimeout(5)
        try:
            sock.sendall(data)
            answer = sock.recv(4096)
        except OSError:
            answer = b""
        sock.close()
        return answer.split(b"\r\n")[0].decode(errors="replace")

    bad_http = {
        "garbage": b"\x00\xff\x13\x37 not http at all\r\n\r\n",
        "bad_request_line": b"GET\r\n\r\n",
        "no_host_http11": b"GET / HTTP/1.1\r\n\r\n",
        "huge_header": b"GET / HTTP/1.1\r\nHost: h\r\nX: " + b"a" * 20000 + b"\r\n\r\n",
        "both_lengths": b"POST /register HTTP/1.1\r\nHost: h\r\nx-relay-room: " + room().encode() +
                        b"\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}",
        "bad_chunk": b"POST /register HTTP/1.1\r\nHost: h\r\nx-relay-room: " + room().encode() +
                     b"\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "bad_json": b"POST /register HTTP/1.1\r\nHost: h\r\nx-relay-room: " + room().encode() +
                    b"\r\nContent-Length: 5\r\n\r\n{{{{{",
        "bad_key": b"GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   b"Sec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\nx-relay-room: " + room().encode() + b"\r\n\r\n",
        "bad_version": b"GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 99\r\nx-relay-room: " + room().encode() + b"\r\n\r\n",
    }
    out["http"] = {name: raw(data) for name, data in bad_http.items()}

    # Malformed WebSocket traffic in the same room as the pair, and in others.
    frames = {}
    for name, build in (
        ("unmasked", lambda s: s.sock.sendall(bytes([0x81, 0x02]) + b"{}")),
        ("reserved_bits", lambda s: s.send_frame(0x1, b"{}", first_byte=0x80 | 0x20 | 0x1)),
        ("unknown_opcode", lambda s: s.send_frame(0x3, b"x")),
        ("fragmented_ping", lambda s: s.send_frame(0x9, b"x", first_byte=0x09)),
        ("binary_hello", lambda s: s.send_frame(0x2, b"{}")),
        ("bad_utf8_hello", lambda s: s.send_frame(0x1, b"\xc3\x28")),
        ("huge_hello", lambda s: s.send_frame(0x1, b"{" + b" " * 9000 + b"}")),
        ("stray_continuation", lambda s: s.send_frame(0x0, b"x")),
    ):
        target = r if name in ("binary_hello", "bad_utf8_hello") else room()
        sock = await asyncio.to_thread(RawSocket, url, target)
        build(sock)
        frames[name] = await asyncio.to_thread(sock.close_received)
    out["websocket"] = frames

    await phone.send(b"still here")
    out["pair_intact"] = (await mac.recv()) == b"still here"
    await mac.send(b"both ways")
    out["pair_intact_back"] = (await phone.recv()) == b"both ways"
    await phone.close()
    await mac.close()
    return out


async def attest_flow(url, fixture_path):
    """(relay in attestation mode, trusting the fixture's test root) attest -> ticket -> phone
    admitted -> register with an assertion -> established, with the failures between."""
    import appattest_fixture as fx
    root = json.load(open(fixture_path))
    app_id, origin = root["app_id"], root["origin"]
    out = {}
    r = room()
    mac, _, out["mac"] = await admit(url, r, "mac")

    def challenge():
        return post(url, r, "/attest/challenge", None)[1]["challenge"]

    def attestation(c, variant="good"):
        return fx.attest({"root_pem": root["root_pem"], "root_key_pem": root["root_key_pem"], "app_id": app_id,
                          "challenge_b64": c, "origin": origin, "variant": variant})

    c = challenge()
    bad = attestation(c, "wrong_app")
    out["bad_attest"] = post(url, r, "/attest", {"challenge": c, "attestationObject": bad["attestation_b64"]})
    out["bad_attest_retry"] = post(url, r, "/attest", {"challenge": c, "attestationObject": bad["attestation_b64"]})
    c = challenge()
    good = attestation(c)
    out["attest"] = post(url, r, "/attest", {"challenge": c, "attestationObject": good["attestation_b64"]})
    out["attest_replay"] = post(url, r, "/attest", {"challenge": c, "attestationObject": good["attestation_b64"]})
    ticket = out["attest"][1].get("ticket", "")
    phone, _, phone_result = await admit_with(url, r, "phone", {"ticket": ticket})
    out["phone"] = {k: v for k, v in phone_result.items() if k != "registrationToken"}
    token = phone_result.get("registrationToken", "")
    second, _, out["ticket_reused"] = await admit_with(url, r, "phone", {"ticket": ticket})

    secret = os.urandom(32)
    key = join_key(secret)
    verifier = verifier_of(key)

    def assertion(c, variant="good", counter=1):
        return fx.assertion({"leaf_key_pem": good["leaf_key_pem"], "app_id": app_id, "challenge_b64": c, "origin": origin,
                             "counter": counter, "variant": variant})["assertion_b64"]

    out["no_assertion"] = post(url, r, "/register", {"registrationToken": token, "verifier": verifier})
    c = challenge()
    out["other_key"] = post(url, r, "/register", {"registrationToken": token, "verifier": verifier, "challenge": c,
                                                   "assertion": assertion(c, "other_key")})
    out["other_key_retry"] = post(url, r, "/register", {"registrationToken": token, "verifier": verifier, "challenge": c,
                                                         "assertion": assertion(c)})
    stranger, _, out["still_pairing"] = await admit(url, r, "mac")
    c = challenge()
    out["register"] = post(url, r, "/register", {"registrationToken": token, "verifier": verifier, "challenge": c,
                                                  "assertion": assertion(c, counter=5)})
    unsigned, _, out["after_unsigned"] = await admit(url, r, "mac")
    signed, _, out["after_signed"] = await admit(url, r, "mac", key, origin)
    await signed.close()
    return out


async def admit_with(url, room_name, role, proof):
    ws = await websockets.connect(url, additional_headers={"x-relay-room": room_name}, compression=None)
    await ws.send(json.dumps({"v": 1, "role": role}))
    await ws.recv()
    await ws.send(json.dumps(proof))
    return ws, None, json.loads(await ws.recv())


async def park(url, count):
    """`count` macs parked in fresh rooms (open mode), and one pair spliced; prints one line once
    they all are, then holds them until standard input closes."""
    sockets = [(await admit(url, room(), "mac"))[0] for _ in range(count)]
    r = room()
    sockets.append((await admit(url, r, "mac"))[0])
    sockets.append((await admit(url, r, "phone"))[0])
    print(json.dumps({"parked": count, "pairs": 1}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for ws in sockets:
        await ws.close()
    return {"closed": len(sockets)}


def fill(directory):
    """Fills the filesystem holding `directory` to the last byte; returns the filler's path."""
    path = os.path.join(directory, "filler")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    for size in (65536, 4096, 1):
        try:
            while True:
                os.write(fd, b"\0" * size)
        except OSError:
            pass
    os.close(fd)
    return path


def plain_get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return [response.status, response.read().decode()]
    except urllib.error.HTTPError as error:
        return [error.code, error.read().decode()]


async def round_trip(a, b, payload):
    await a.send(payload)
    return await asyncio.wait_for(b.recv(), 5) == payload


async def disk_full(url, directory, admin):
    """A spliced, registered pair; then the database's filesystem fills up: what needs a write is
    refused honestly while the pair keeps forwarding and established rooms still join; then the
    space returns and everything works again, with no restart."""
    out = {}
    origin = "http://" + urlparse(url).netloc
    r, secret, key, _, _, mac, phone, out["register"] = await pair_and_register(url)
    out["room"], out["secret"] = r, secret.hex()
    out["ready_before"] = plain_get(f"http://{admin}/readyz")
    filler = fill(directory)
    out["free_bytes"] = os.statvfs(directory).f_bavail * os.statvfs(directory).f_frsize
    # A fresh pairing: the Mac parks (a read), the phone's Result would carry a token that
    # cannot be written, so it is refused before any Result.
    fresh = room()
    fresh_mac, _, out["full_mac"] = await admit(url, fresh, "mac")
    try:
        _, _, out["full_phone"] = await admit(url, fresh, "phone")
    except ConnectionClosed as closed:
        out["full_phone_close"] = [closed.rcvd.code, closed.rcvd.reason] if closed.rcvd else None
    out["full_challenge"] = post(url, r, "/attest/challenge", None)
    # The established room joins again with signed joins (a read), and the live pair forwards.
    mac2, _, out["full_signed_mac"] = await admit(url, r, "mac", key, origin)
    phone2, _, phone2_result = await admit(url, r, "phone", key, origin)
    out["full_signed_phone_ok"] = phone2_result.get("ok")
    out["full_spliced"] = [await round_trip(phone2, mac2, os.urandom(1000)), await round_trip(mac2, phone2, b"back")]
    await asyncio.sleep(1.5)  # the 1 s probe writes and fails: still not ready
    out["full_ready"] = plain_get(f"http://{admin}/readyz")
    out["full_metrics"] = [line for line in plain_get(f"http://{admin}/metrics")[1].splitlines()
                           if line.startswith("relay_storage_")]
    os.remove(filler)
    await asyncio.sleep(1.5)  # the next probe's write succeeds
    out["freed_ready"] = plain_get(f"http://{admin}/readyz")
    _, _, freed_phone = await admit(url, fresh, "phone")
    out["freed_phone_ok"] = freed_phone.get("ok")
    secret2 = os.urandom(32)
    out["freed_register"] = post(url, fresh, "/register", {"registrationToken": freed_phone.get("registrationToken"),
                                                          "verifier": verifier_of(join_key(secret2))})
    out["freed_challenge_status"] = post(url, r, "/attest/challenge", None)[0]
    out["freed_spliced"] = await round_trip(phone2, mac2, b"after")
    for ws in (mac, phone, mac2, phone2, fresh_mac):
        await ws.close()
    return out


def slow_heads(url, count):
    """`count` connections from 127.0.0.1 that start a head and never finish it: those past the
    per-IP cap are answered at once, and a pair from another address (127.0.0.2) is admitted
    meanwhile; once the slow ones close, 127.0.0.1 pairs again."""
    import socket
    import time
    parsed = urlparse(url)
    host, port = parsed.hostname, parsed.port
    held, refused = [], []
    for _ in range(count):
        s = socket.create_connection((host, port))
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        held.append(s)
    time.sleep(0.5)
    for s in held:
        s.setblocking(False)
        try:
            data = s.recv(4096)
        except BlockingIOError:
            continue
        refused.append(data.split(b"\r\n")[0].decode() if data else "closed")
    out = {"refused": len(refused), "statuses": sorted(set(refused))}

    async def pair_from(source):
        started = time.monotonic()
        r = room()
        sockets = []
        for role in ("mac", "phone"):
            ws = await websockets.connect(url, additional_headers={"x-relay-room": r}, compression=None,
                                          user_agent_header="iTerm2Companion", origin=None,
                                          sock=socket.create_connection((host, port), source_address=(source, 0)))
            await ws.send(json.dumps({"v": 1, "role": role}))
            await ws.recv()
            await ws.send("{}")
            sockets.append((ws, json.loads(await ws.recv())))
        for ws, _ in sockets:
            await ws.close()
        return {"ok": [result.get("ok") for _, result in sockets], "seconds": time.monotonic() - started}

    out["other_address"] = asyncio.run(pair_from("127.0.0.2"))
    try:
        out["same_address_while_held"] = asyncio.run(pair_from("127.0.0.1"))
    except InvalidStatus as refusal:
        out["same_address_while_held"] = [refusal.response.status_code, refusal.response.body.decode()]
    for s in held:
        s.close()
    time.sleep(0.5)
    out["same_address_after"] = asyncio.run(pair_from("127.0.0.1"))
    return out


async def tls_park(url, cafile, hostname):
    """A Mac parked over TLS on 127.0.0.1 as `hostname` (verified against `cafile`); prints the
    served certificate's serial once parked, holds the socket until standard input closes, then
    proves it is still open (a ping answered)."""
    import socket
    import ssl
    context = ssl.create_default_context(cafile=cafile)
    sock = socket.create_connection(("127.0.0.1", urlparse(url).port))
    ws = await websockets.connect(url, ssl=context, sock=sock, server_hostname=hostname, compression=None,
                                  additional_headers={"x-relay-room": room()}, user_agent_header="iTerm2Companion", origin=None)
    await ws.send(json.dumps({"v": 1, "role": "mac"}))
    await ws.recv()
    await ws.send("{}")
    result = json.loads(await ws.recv())
    serial = ws.transport.get_extra_info("ssl_object").getpeercert()["serialNumber"]
    print(json.dumps({"parked": result.get("ok"), "serial": serial}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    pong = await ws.ping()
    await asyncio.wait_for(pong, 5)
    await ws.close()
    return {"still_open": True}


async def register_load(url, path, workers):
    """`workers` clients pair and register fresh rooms back to back until standard input closes;
    each registration answered 200 is appended to `path` (room and secret, one JSON line, flushed)
    before the next begins. Errors (a relay killed mid-request) are counted and retried."""
    stop = asyncio.Event()
    counts = {"registered": 0, "errors": 0}
    out = open(path, "a")

    async def worker():
        while not stop.is_set():
            try:
                r, secret, _, _, _, mac, phone, (status, _) = await asyncio.wait_for(pair_and_register(url), 10)
                if status == 200:
                    out.write(json.dumps({"room": r, "secret": secret.hex()}) + "\n")
                    out.flush()
                    counts["registered"] += 1
                for ws in (mac, phone):
                    await ws.close()
            except Exception:
                counts["errors"] += 1
                await asyncio.sleep(0.1)

    async def watch_stdin():
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        stop.set()

    await asyncio.gather(watch_stdin(), *[worker() for _ in range(workers)])
    out.close()
    return counts


async def rejoin_all(url, path):
    """Every room in `path` (from register_load) joins with a signed join: how many did."""
    origin = "http://" + urlparse(url).netloc
    rooms = [json.loads(line) for line in open(path) if line.strip()]
    admitted, refused = 0, []
    for entry in rooms:
        key = join_key(bytes.fromhex(entry["secret"]))
        mac, _, result = await admit(url, entry["room"], "mac", key, origin)
        if result.get("ok"):
            admitted += 1
        else:
            refused.append(result.get("error"))
        await mac.close()
    return {"rooms": len(rooms), "admitted": admitted, "refused": refused[:5]}


def read_answer(sock, head_only=False):
    """[status, headers (names lowercased), body] of the HTTP answer on `sock`, or None when the
    relay closes the connection without sending a byte."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None if not data else [data.decode(errors="replace")]
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    length = 0 if head_only else int(fields.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return [int(lines[0].split(" ")[1]), fields, rest[:length].decode()]


def http(url, method, path, headers=(), body=None):
    """One request written byte for byte on a fresh connection (each of `headers` a whole
    "Name: value" line, so empty values and duplicates go out as written); its answer as
    `read_answer` gives it. A body gets a Content-Length; so does any POST."""
    import socket
    parsed = urlparse(url)
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: %s" % parsed.netloc] + list(headers)
    if body is not None or method == "POST":
        lines.append("Content-Length: %d" % len(body or b""))
    sock = socket.create_connection((parsed.hostname, parsed.port))
    sock.settimeout(10)
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b""))
    try:
        return read_answer(sock, head_only=method == "HEAD")
    finally:
        sock.close()


UPGRADE = ["Upgrade: websocket", "Connection: Upgrade"]
KEY = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="


def error_of(answer):
    """[status, the JSON body's error] of a room endpoint's answer."""
    return [answer[0], json.loads(answer[2]).get("error")]


def series(url, prefix):
    """The /metrics sample lines starting with `prefix`."""
    return [line for line in scrape(url)[2].splitlines() if line.startswith(prefix)]


async def any_path(url):
    """An upgrade on a path other than / with a Host naming another site: served all the same."""
    raw = await asyncio.to_thread(RawSocket, url, room(), path="/any/path?x=1", host="other.example")
    return {"status": raw.status, "result": await asyncio.to_thread(raw.admit, "mac")}


async def http_counted(url):
    """(relay started with an /attest* limit of 1) which HTTP requests relay_http_requests_total
    counts: not those the gate refuses, nor /metrics; every one past the gate, refused later or not."""
    r = room()
    out = {"origin": http(url, "POST", "/attest/challenge", ["x-relay-room: " + r, "Origin: https://evil.example"])[::2],
           "bad_room": http(url, "POST", "/attest/challenge", ["x-relay-room: ABC"])[::2]}
    out["before"] = series(url, "relay_http_requests_total")
    out["attest"] = [http(url, "POST", "/attest/challenge", ["x-relay-room: " + r])[0] for _ in range(2)]
    out["unrouted"] = http(url, "POST", "/nothing", ["x-relay-room: " + r])[::2]
    out["after"] = series(url, "relay_http_requests_total")
    return out


async def unlimited_paths(url):
    """(relay started with an /attest* limit of 1) five /register and five /delete from one IP."""
    r = room()
    return {path: [error_of(http(url, "POST", path, ["x-relay-room: " + r], b"{}")) for _ in range(5)] for path in ("/register", "/delete")}


async def no_extensions(url):
    """An upgrade offering permessage-deflate and a subprotocol: the relay takes neither."""
    raw = await asyncio.to_thread(RawSocket, url, room(),
                                  "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\nSec-WebSocket-Protocol: x\r\n")
    raw.send_frame(0x1, json.dumps({"v": 1, "role": "mac"}).encode())
    first = raw._read(1)
    raw.buffer = first + raw.buffer
    frame = raw.recv_frame()
    return {"status": raw.status, "extensions": raw.headers.get("sec-websocket-extensions"),
            "protocol": raw.headers.get("sec-websocket-protocol"), "first_byte": first[0], "challenge": "nonce" in json.loads(frame[1])}


async def metrics_methods(url):
    """/metrics by POST and HEAD with no room header, and /metrics/ (not the exact path)."""
    post, head = http(url, "POST", "/metrics"), http(url, "HEAD", "/metrics")
    return {"post": [post[0], post[1].get("content-type")], "head": [head[0], head[1].get("content-type"), head[2]],
            "trailing_slash": http(url, "GET", "/metrics/")[::2]}


async def empty_origin(url):
    """An Origin header with an empty value, on a room request and on an upgrade."""
    r = room()
    return {"http": http(url, "POST", "/attest/challenge", ["x-relay-room: " + r, "Origin:"])[::2],
            "upgrade": http(url, "GET", "/", UPGRADE + [KEY, "Sec-WebSocket-Version: 13", "x-relay-room: " + r, "Origin:"])[::2]}


async def room_header_forms(url):
    """x-relay-room twice (the same valid room), wrapped in spaces and tabs, and missing."""
    r = room()
    return {"duplicate": http(url, "POST", "/attest/challenge", ["x-relay-room: " + r, "x-relay-room: " + r])[::2],
            "trimmed": http(url, "POST", "/attest/challenge", ["x-relay-room: \t " + r + " \t"])[0],
            "missing": http(url, "POST", "/attest/challenge")[::2]}


async def attest_prefix(url):
    """(relay started with an /attest* limit of 3) /attest, GET /attest/challenge and /attestX
    from one IP, then POST /attest/challenge."""
    h = ["x-relay-room: " + room()]
    return {"answers": [http(url, "POST", "/attest", h, b"{}")[0], http(url, "GET", "/attest/challenge", h)[0],
                        http(url, "POST", "/attestX", h, b"{}")[0], http(url, "POST", "/attest/challenge", h)[::2]]}


async def bodies(url):
    """A body declared as 1,000 bytes of which 10 arrive before the client stops sending; then a
    chunked body streamed past 64 KiB."""
    import socket
    parsed = urlparse(url)
    r = room()
    out = {}
    sock = socket.create_connection((parsed.hostname, parsed.port))
    sock.settimeout(10)
    sock.sendall(("POST /register HTTP/1.1\r\nHost: %s\r\nx-relay-room: %s\r\nContent-Length: 1000\r\n\r\n" % (parsed.netloc, r)).encode() + b"x" * 10)
    sock.shutdown(socket.SHUT_WR)
    received = read_to_end(sock)
    sock.close()
    out["aborted"] = received.decode()
    out["errors"] = series(url, "relay_http_errors_total")
    sock = socket.create_connection((parsed.hostname, parsed.port))
    sock.settimeout(10)
    chunk = b"%x\r\n%s\r\n" % (8192, b"x" * 8192)
    sock.sendall(("POST /register HTTP/1.1\r\nHost: %s\r\nx-relay-room: %s\r\nTransfer-Encoding: chunked\r\n\r\n" % (parsed.netloc, r)).encode()
                 + chunk * 9)
    out["streamed"] = read_answer(sock)[::2]
    sock.close()
    return out


async def unrouted(url):
    """GET /register (also with a body), POST /register/ and POST /REGISTER."""
    h = ["x-relay-room: " + room()]
    answers = {"get": http(url, "GET", "/register", h), "get_with_body": http(url, "GET", "/register", h, b"{}"),
               "slash": http(url, "POST", "/register/", h, b"{}"), "upper": http(url, "POST", "/REGISTER", h, b"{}")}
    return {name: [a[0], a[1].get("content-type"), a[2]] for name, a in answers.items()}


async def room_json(url):
    """The room endpoints' answers' content type, a /register body sent as text/plain, and a GET."""
    h = ["x-relay-room: " + room()]
    challenge, delete = http(url, "POST", "/attest/challenge", h), http(url, "POST", "/delete", h, b"{}")
    verifier = base64.b64encode(os.urandom(32)).decode()
    register = http(url, "POST", "/register", h + ["Content-Type: text/plain"], json.dumps({"verifier": verifier}).encode())
    return {"challenge": [challenge[0], challenge[1].get("content-type")],
            "delete": error_of(delete) + [delete[1].get("content-type")],
            "register_text_plain": error_of(register) + [register[1].get("content-type")],
            "get_register": http(url, "GET", "/register", h)[::2]}


async def gate_first(url):
    """Upgrades failing both the gate and the handshake: the gate's answer comes first."""
    r = room()
    bad_version = http(url, "GET", "/", UPGRADE + [KEY, "Sec-WebSocket-Version: 99", "x-relay-room: " + r])
    return {"origin_bad_version": http(url, "GET", "/", UPGRADE + [KEY, "Sec-WebSocket-Version: 99", "x-relay-room: " + r,
                                                                   "Origin: https://evil.example"])[::2],
            "bad_room_bad_key": http(url, "GET", "/", UPGRADE + ["Sec-WebSocket-Key: short", "Sec-WebSocket-Version: 13", "x-relay-room: ABC"])[::2],
            "bad_version": [bad_version[0], bad_version[1].get("sec-websocket-version")]}


async def early_hello(url):
    """A Hello written in the same send as the upgrade request, before the 101 arrives."""
    raw = await asyncio.to_thread(RawSocket, url, room(), early=masked_frame(0x1, json.dumps({"v": 1, "role": "mac"}).encode()))
    frame = await asyncio.to_thread(raw.recv_frame)
    return {"status": raw.status, "challenge": frame is not None and frame[0] == 0x1 and "nonce" in json.loads(frame[1])}


async def keepalive_admitted(url):
    """(relay started with a short keepalive) an admitted phone that stops answering pings, its
    mac (the `websockets` library, which answers them) parked in the same room."""
    import time
    r = room()
    mac, _, mac_result = await admit(url, r, "mac")
    phone = await asyncio.to_thread(RawSocket, url, r)
    phone_result = await asyncio.to_thread(phone.admit, "phone")
    started = time.monotonic()
    opcodes = await asyncio.to_thread(phone.drain_opcodes)
    out = {"mac_ok": mac_result.get("ok"), "phone_ok": phone_result.get("ok"), "phone_opcodes": opcodes, "seconds": time.monotonic() - started}
    try:
        await asyncio.wait_for(mac.recv(), 10)
    except ConnectionClosed as closed:
        out["mac_close"] = [closed.rcvd.code, closed.rcvd.reason] if closed.rcvd else None
    return out


async def data_not_liveness(url):
    """(relay started with a short keepalive) an admitted mac that sends a binary frame every
    100 ms but answers no ping."""
    import time

    def run():
        raw = RawSocket(url, room())
        admitted = raw.admit("mac").get("ok")
        raw.sock.settimeout(0.1)
        started, received, sent = time.monotonic(), b"", 0
        while time.monotonic() - started < 5:
            try:
                raw.sock.sendall(masked_frame(0x2, b"data"))
                sent += 1
            except OSError:
                break
            try:
                chunk = raw.sock.recv(65536)
                if not chunk:
                    break
                received += chunk
                time.sleep(0.1)
            except socket_timeout():
                pass
            except OSError:
                break
        seconds = time.monotonic() - started
        opcodes = []
        while len(received) >= 2:
            opcodes.append(received[0] & 0x0F)
            received = received[2 + (received[1] & 0x7F):]
        return {"admitted": admitted, "sent": sent, "opcodes": opcodes, "seconds": seconds}
    return await asyncio.to_thread(run)


def socket_timeout():
    import socket
    return socket.timeout


async def forwarding_headers(url):
    """Loopback /metrics scrapes carrying each forwarding header Tether counts as proxied, a
    plain one, and a POST."""
    out = {name: scrape(url, {name: value})[::2] for name, value in
           (("X-Real-IP", "127.0.0.1"), ("Forwarded", "for=127.0.0.1"), ("True-Client-IP", "127.0.0.1"), ("X-Client-IP", "127.0.0.1"))}
    out["plain"] = scrape(url)[0]
    out["post"] = http(url, "POST", "/metrics")[0]
    return out


if __name__ == "__main__":
    url, scenario = sys.argv[1], sys.argv[2]
    if scenario == "park":
        result = asyncio.run(park(url, int(sys.argv[3])))
    elif scenario == "rejoin":
        result = asyncio.run(rejoin(url, sys.argv[3], sys.argv[4]))
    elif scenario == "first_access":
        result = asyncio.run(first_access(url, sys.argv[3], sys.argv[4]))
    elif scenario == "abuse":
        result = asyncio.run(abuse(url, int(sys.argv[3])))
    elif scenario == "control_flood":
        result = asyncio.run(control_flood(url, int(sys.argv[3])))
    elif scenario == "flood":
        result = asyncio.run(flood(url, int(sys.argv[3])))
    elif scenario == "attest_flow":
        result = asyncio.run(attest_flow(url, sys.argv[3]))
    elif scenario == "slow_heads":
        result = slow_heads(url, int(sys.argv[3]))
    elif scenario == "tls_park":
        result = asyncio.run(tls_park(url, sys.argv[3], sys.argv[4]))
    elif scenario == "register_load":
        result = asyncio.run(register_load(url, sys.argv[3], int(sys.argv[4])))
    elif scenario == "rejoin_all":
        result = asyncio.run(rejoin_all(url, sys.argv[3]))
    elif scenario == "disk_full":
        result = asyncio.run(disk_full(url, sys.argv[3], sys.argv[4]))
    elif scenario == "shard":
        result = asyncio.run(shard(url, sys.argv[3], sys.argv[4]))
    else:
        result = asyncio.run({"pair": pair, "gate": gate, "lifecycle": lifecycle, "register": register, "metrics": metrics, "roomcap": roomcap, "oversize": oversize, "silent": silent,
                              "catalogue": catalogue, "limits": limits, "attested": attested,
                              "malformed": malformed, "admission_window": admission_window, "any_path": any_path,
                              "http_counted": http_counted, "unlimited_paths": unlimited_paths, "no_extensions": no_extensions,
                              "metrics_methods": metrics_methods, "empty_origin": empty_origin, "room_header_forms": room_header_forms,
                              "attest_prefix": attest_prefix, "bodies": bodies, "unrouted": unrouted, "room_json": room_json,
                              "gate_first": gate_first, "early_hello": early_hello, "keepalive_admitted": keepalive_admitted,
                              "data_not_liveness": data_not_liveness, "forwarding_headers": forwarding_headers}[scenario](url))
    print(json.dumps(result))

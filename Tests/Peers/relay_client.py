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
  lifecycle  pair, /register the verifier (derived from a roomSecret with the `cryptography`
         package, independently of Tether), signed rejoins, then a signed /delete
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


async def admit(url, room_name, role, key=None, origin=None):
    ws = await websockets.connect(url, additional_headers={"x-relay-room": room_name}, max_size=None,
                                  compression=None, origin=None, user_agent_header="iTerm2Companion")
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
        await mac.send(os.urandom(size))
        out[name] = await closes_of(mac, phone)
    return out


async def silent(url):
    import socket
    import time
    parsed = urlparse(url)
    sock = socket.create_connection((parsed.hostname, parsed.port))
    sock.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                  "x-relay-room: %s\r\n\r\n" % (parsed.netloc, room())).encode())
    sock.settimeout(10)
    received = b""
    started = time.monotonic()
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        received += chunk
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
    import socket
    parsed = urlparse(url)
    sock = socket.create_connection((parsed.hostname, parsed.port))
    sock.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                  "x-relay-room: %s\r\n\r\n" % (parsed.netloc, room_name)).encode())
    sock.settimeout(10)
    received = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
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


if __name__ == "__main__":
    url, scenario = sys.argv[1], sys.argv[2]
    if scenario == "rejoin":
        result = asyncio.run(rejoin(url, sys.argv[3], sys.argv[4]))
    elif scenario == "shard":
        result = asyncio.run(shard(url, sys.argv[3], sys.argv[4]))
    else:
        result = asyncio.run({"pair": pair, "gate": gate, "lifecycle": lifecycle, "register": register, "metrics": metrics, "roomcap": roomcap, "oversize": oversize, "silent": silent}[scenario](url))
    print(json.dumps(result))

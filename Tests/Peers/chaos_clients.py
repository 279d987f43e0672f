#!/usr/bin/env python3
"""Client side of bench/chaos.py: what the relay's, the push relay's and the signaling server's
clients do, each call bounded by a timeout and reported as a plain outcome instead of raised.

The chaos harness stops, kills and starves the servers on purpose, so any call may meet a server
that never answers; an outcome that hangs would hide exactly the fault the harness looks for. So
everything here is asyncio with one overall deadline per call (no threads left blocked in
urllib), and every failure comes back as data ({"error": ...}, a status, a close code) the harness
can classify.

Built on relay_client.py (join keys, verifiers, transcripts), relay_cluster.py (bucket → owner)
and signal_client.py (the signaling Peer), which it only imports.
"""
import asyncio
import base64
import hashlib
import hmac
import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import relay_client as rc  # noqa: E402
import relay_cluster  # noqa: E402
import signal_client as sig  # noqa: E402
import websockets  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402
from websockets.protocol import State  # noqa: E402

LOOPBACK = "127.0.0.1"


# ------------------------------------------------------------------------------------------------
# HTTP/1.1 over asyncio: one request per connection, one deadline for the whole exchange
# ------------------------------------------------------------------------------------------------

class Answer:
    def __init__(self, status, headers, body, seconds):
        self.status, self.headers, self.body, self.seconds = status, headers, body, seconds

    def text(self):
        return self.body.decode(errors="replace")

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None


async def _read_body(reader, headers):
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return body
            body += await reader.readexactly(size)
            await reader.readexactly(2)
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    return await reader.read()


async def http(port, method, path, headers=None, body=None, timeout=5.0):
    """One request to 127.0.0.1:port. Returns an Answer, or raises TimeoutError / OSError /
    ValueError; `timeout` bounds connect, send and the whole answer together."""
    started = time.monotonic()

    async def exchange():
        reader, writer = await asyncio.open_connection(LOOPBACK, port)
        try:
            data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else b"")
            lines = [f"{method} {path} HTTP/1.1", f"Host: {LOOPBACK}:{port}", "Connection: close", "User-Agent: iTerm2Companion"]
            lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
            if method in ("POST", "PUT") or data:
                lines.append(f"Content-Length: {len(data)}")
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
            await writer.drain()
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            status = int(head[0].split()[1])
            fields = {}
            for line in head[1:]:
                if ":" in line:
                    name, value = line.split(":", 1)
                    fields[name.strip().lower()] = value.strip()
            payload = b"" if method == "HEAD" else await _read_body(reader, fields)
            return Answer(status, fields, payload, time.monotonic() - started)
        finally:
            writer.close()

    return await asyncio.wait_for(exchange(), timeout)


async def try_http(port, method, path, headers=None, body=None, timeout=5.0):
    """Like http(), but a failure is an Answer with status None and the error's name as body."""
    started = time.monotonic()
    try:
        return await http(port, method, path, headers, body, timeout)
    except (asyncio.TimeoutError, TimeoutError):
        return Answer(None, {}, b"timeout", time.monotonic() - started)
    except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as error:
        return Answer(None, {}, type(error).__name__.encode(), time.monotonic() - started)


def port_of(host):
    return int(host.rsplit(":", 1)[1])


async def readyz(admin_port, timeout=1.0):
    """The admin /readyz: its status, or None when it did not answer in time."""
    answer = await try_http(admin_port, "GET", "/readyz", timeout=timeout)
    return answer.status, answer.text()[:200]


# ------------------------------------------------------------------------------------------------
# Relay (relay.md §3, §4, §8)
# ------------------------------------------------------------------------------------------------

async def shard_map(host, timeout=2.0):
    answer = await try_http(port_of(host), "GET", "/shardmap.json", timeout=timeout)
    if answer.status != 200:
        return None
    document = answer.json()
    return document if isinstance(document, dict) and "ranges" in document else None


def owner(shard, room):
    return relay_cluster.owner(shard, room)


def buckets_of(shard):
    """{host: set of buckets}: what each node owns, to compare before and after a fault."""
    owned = {}
    for r in shard["ranges"]:
        owned.setdefault(r["host"], set()).update(range(r["low"], r["high"] + 1))
    return owned


def room_of(shard, host):
    return relay_cluster.room_of(shard, host)


async def _close(ws):
    try:
        await asyncio.wait_for(ws.close(), 2)
    except Exception:
        pass


async def admit(host, room, role, key=None, timeout=5.0, hold=False):
    """One admission (Hello, challenge, proof, Result) at `host`, signed when `key` is given
    (origin http://host, as a node in --local mode expects). Returns {"ok", "result"} (and the
    open socket as "ws" when `hold`), or {"status", "owner"} for a refused upgrade (421 names the
    owner), {"close": [code, reason]}, or {"error": name} (a timeout included)."""
    url = f"ws://{host}/"
    ws = None

    async def go():
        nonlocal ws
        ws = await websockets.connect(url, additional_headers={"x-relay-room": room}, max_size=None, compression=None,
                                      origin=None, user_agent_header="iTerm2Companion", proxy=None,
                                      open_timeout=timeout, close_timeout=1, ping_interval=None)
        await ws.send(json.dumps({"v": 1, "role": role}))
        challenge = json.loads(await ws.recv())
        if key is None:
            await ws.send("{}")
        else:
            nonce = base64.b64decode(challenge["nonce"])
            role_byte = b"\x01" if role == "mac" else b"\x02"
            transcript = rc.canonical("iterm2-relay-join", [b"\x01", role_byte, nonce, room.encode(), f"http://{host}".encode()])
            await ws.send(json.dumps({"sig": base64.b64encode(key.sign(transcript)).decode()}))
        return json.loads(await ws.recv())

    started = time.monotonic()
    try:
        result = await asyncio.wait_for(go(), timeout)
        outcome = {"ok": result.get("ok") is True, "result": result}
    except ConnectionClosed as closed:
        outcome = {"ok": False, "close": [closed.rcvd.code, closed.rcvd.reason] if closed.rcvd else None}
    except InvalidStatus as refused:
        outcome = {"ok": False, "status": refused.response.status_code, "owner": refused.response.headers.get("x-relay-owner")}
    except (asyncio.TimeoutError, TimeoutError):
        outcome = {"ok": False, "error": "timeout"}
    except (OSError, ValueError, KeyError, websockets.exceptions.WebSocketException) as error:
        outcome = {"ok": False, "error": type(error).__name__}
    outcome["seconds"] = round(time.monotonic() - started, 3)
    if ws is not None:
        if hold and outcome["ok"]:
            outcome["ws"] = ws
        else:
            await _close(ws)
    return outcome


async def signed_join(host, room, secret, timeout=5.0):
    """A returning Mac's join: admitted where the room is served (in open mode also where its
    verifier was lost, which only established() tells apart)."""
    return await admit(host, room, "mac", rc.join_key(secret), timeout)


async def established(host, room, timeout=5.0):
    """Whether `host` still holds the room's registration. In open mode a room without a verifier
    admits anything, so an admitted signed join proves nothing about durability; an unsigned join
    refused `signature required` proves the verifier is stored (relay.md §3.4 step 3)."""
    outcome = await admit(host, room, "mac", None, timeout)
    if outcome.get("ok"):
        return False, outcome
    if outcome.get("result", {}).get("error") == "signature required":
        return True, outcome
    return None, outcome   # no verdict: refused for another reason, misdirected, or no answer


async def pair_and_register(host, room, secret, timeout=5.0):
    """Pairs a fresh room in open mode and registers the secret's verifier at `host`. Returns
    (acknowledged, detail): acknowledged only for a 200 from /register (relay.md §4.3)."""
    key = rc.join_key(secret)
    mac = await admit(host, room, "mac", timeout=timeout, hold=True)
    phone = await admit(host, room, "phone", timeout=timeout, hold=True) if mac.get("ok") else {"ok": False}
    try:
        token = phone.get("result", {}).get("registrationToken")
        if not token:
            return False, {"mac": {k: v for k, v in mac.items() if k != "ws"}, "phone": {k: v for k, v in phone.items() if k != "ws"}}
        answer = await try_http(port_of(host), "POST", "/register", {"x-relay-room": room, "Content-Type": "application/json"},
                                {"registrationToken": token, "verifier": rc.verifier_of(key)}, timeout)
        return answer.status == 200, {"register": answer.status, "body": answer.text()[:120]}
    finally:
        for leg in (phone, mac):
            if "ws" in leg:
                await _close(leg["ws"])


async def attest_challenge(host, room, timeout=5.0):
    return await try_http(port_of(host), "POST", "/attest/challenge", {"x-relay-room": room, "Content-Type": "application/json"}, {}, timeout)


async def misdirected(host, room, timeout=3.0):
    """What a node that should not serve `room` answers: (status, x-relay-owner)."""
    answer = await attest_challenge(host, room, timeout)
    return answer.status, answer.headers.get("x-relay-owner")


def new_room_entry(shard, host):
    return {"room": room_of(shard, host), "secret": os.urandom(32).hex()}


# ------------------------------------------------------------------------------------------------
# Push relay (push.md §2 Profile M, §3 Profile I)
# ------------------------------------------------------------------------------------------------

def device_token():
    return os.urandom(32).hex()


async def register_mytty(port, timeout=5.0):
    """POST /v1/register; ({"pushID", "relaySecret", "token"}, answer) when acknowledged (200)."""
    token = device_token()
    answer = await try_http(port, "POST", "/v1/register", {"Content-Type": "application/json"},
                            {"deviceToken": token, "environment": "production"}, timeout)
    document = answer.json() if answer.status == 200 else None
    if isinstance(document, dict) and document.get("pushID") and document.get("relaySecret"):
        return {"profile": "mytty", "pushID": document["pushID"], "relaySecret": document["relaySecret"], "token": token}, answer
    return None, answer


async def register_iterm2(port, timeout=5.0):
    token = device_token()
    secret = os.urandom(32)
    answer = await try_http(port, "POST", "/register", {"Content-Type": "application/json"},
                            {"token": token, "secretHash": hashlib.sha256(secret).hexdigest(), "sandbox": False}, timeout)
    if answer.status == 200:
        return {"profile": "iterm2", "token": token, "secret": secret.hex()}, answer
    return None, answer


async def push_registration_exists(port, registration, timeout=5.0):
    """Whether the push relay still holds an acknowledged registration, asked without delivering
    anything: True, False, or None (no verdict, with the answer).

    Profile I: a push with a wrong secret is 403 `bad secret` for a known token and 403
    `unknown device token` for a lost one, and never reaches APNs (push.md §3.7 check order).
    Profile M has no such read: a correctly signed push is 401 for an unknown push ID, and for a
    known one goes to APNs, which the harness points at a closed loopback port: 502 `apns
    unreachable`, the registration kept (push.md §2.5 step 7)."""
    if registration["profile"] == "iterm2":
        answer = await try_http(port, "POST", "/push", {"Content-Type": "application/json"},
                                {"token": registration["token"], "secret": "0" * 64, "title": "chaos", "body": "probe"}, timeout)
        error = (answer.json() or {}).get("error") if answer.status == 403 else None
        if error == "bad secret":
            return True, answer
        if error == "unknown device token":
            return False, answer
        return None, answer
    body = json.dumps({"macID": str(uuid.uuid4()).upper(), "ciphertext": base64.b64encode(os.urandom(16)).decode(),
                       "collapseID": str(uuid.uuid4()), "title": "Mytty", "placeholder": "chaos"}).encode()
    stamp = str(int(time.time()))
    signature = hmac.new(base64.b64decode(registration["relaySecret"]), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    answer = await try_http(port, "POST", "/v1/push", {"Content-Type": "application/json", "x-mytty-push-id": registration["pushID"],
                                                       "x-mytty-timestamp": stamp, "x-mytty-signature": signature}, body, timeout)
    if answer.status in (200, 502):
        return True, answer
    if answer.status == 401:
        return False, answer
    return None, answer


# ------------------------------------------------------------------------------------------------
# Signaling (signaling.md §5, §6): registered clients on both nodes of one registry
# ------------------------------------------------------------------------------------------------

class SignalClient:
    """One identity that stays registered at its home node (reconnecting when asked), so cross-node
    forwarding and the cluster-wide uniqueness of live IDs can be checked after each fault."""

    def __init__(self, name, port, timeout=5.0):
        self.name, self.port, self.timeout = name, port, timeout
        self.key = Ed25519PrivateKey.generate()
        self.peer = None

    @property
    def id(self):
        return sig.id_of(self.key)

    def connected(self):
        return self.peer is not None and self.peer.ws.state == State.OPEN

    async def drop(self):
        if self.peer is not None:
            await self.peer.close()
            self.peer = None

    async def connect(self):
        """(True, None) once registered at the home node, else (False, why)."""
        await self.drop()
        outcome, peer = await register_at(self.port, self.key, self.name, self.timeout)
        if outcome == "registered":
            self.peer = peer
            return True, None
        return False, outcome

    async def alive(self):
        """The connection is open and the node still reports this ID as online (§5.5)."""
        if not self.connected():
            return False
        try:
            await asyncio.wait_for(self.peer.kept(), self.timeout)
            return True
        except Exception:
            return False


async def register_at(port, key, name="probe", timeout=5.0):
    """Connects to the node at `port` and registers `key`'s ID: ("registered", peer), or (the
    error code, or "timeout" / a transport failure, None) with the connection closed."""
    net = sig.Net(f"ws://{LOOPBACK}:{port}/signal", spread="none", timeout=timeout)
    peer = None
    try:
        async def go():
            nonlocal peer
            peer = await sig.Peer.connect(net, key, name)
            await peer.send(peer.register_message())
            return await peer.recv(what="registered")
        message = await asyncio.wait_for(go(), timeout + 1)
        if message.get("type") == "registered":
            return "registered", peer
        outcome = message.get("code") or message.get("type") or "unexpected"
    except (asyncio.TimeoutError, TimeoutError):
        outcome = "timeout"
    except sig.Closed as closed:
        outcome = f"closed {closed.code} {closed.reason}"
    except InvalidStatus as refused:
        outcome = f"http {refused.response.status_code}"
    except sig.Fail as failure:
        outcome = "timeout" if " within " in str(failure) else str(failure)[:120]   # Peer's own waits
    except (OSError, ValueError, websockets.exceptions.WebSocketException) as error:
        outcome = type(error).__name__
    if peer is not None:
        await peer.close()
    return outcome, None


async def deliver(sender, receiver, timeout=5.0):
    """`sender` signals `receiver` (possibly on the other node); (True, None) when the exact signal
    arrives. Messages left over from an earlier round are skipped, not taken for the answer."""
    if not (sender.connected() and receiver.connected()):
        return False, "not connected"
    try:
        sent = await sender.peer.signal(receiver.id, kind="offer")
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False, "not delivered within %.1f s" % timeout
            got = await receiver.peer.recv(timeout=left, what="forwarded signal")
            if got.get("type") == "signal" and got.get("call") == sent["call"]:
                sig.check_forwarded(got, sent, receiver.name)
                return True, None
    except sig.Fail as failure:
        return False, str(failure)[:160]
    except (OSError, ConnectionClosed, websockets.exceptions.WebSocketException) as error:
        return False, type(error).__name__

#!/usr/bin/env python3
"""Slow and idle attackers (issue 18; `--attack slowloris`, the default), or attackers that never
read their replies (issue 29; `--attack unread`, below), against a release `tether relay`, `tether
push` or `tether signal` on loopback. `--service` picks the target (relay by default):

relay
- SLOW connections from ADDRESSES source addresses (127.0.0.2 up) that send their upgrade head
  one byte a second and never finish it: each must be answered 408 at the 30 s head deadline
  (the HTTP server's request timeout), and an address's heads past RELAY_MAX_SOCKETS_PER_IP are
  refused 429 at once;
- IDLE connections that upgrade and never send a Hello: each must be closed 1008 `admission
  timeout` at relay.md's 15 s admission deadline;
- meanwhile a fresh pair from 127.0.0.1 is admitted every half second: its admission latency
  (mac connect to phone Result), before and during the attack, shows whether they starve it.

push (Profile M enabled; a throwaway APNs key, APNs itself is never called)
- SLOW connections sending a `POST /v1/register` head a byte a second: 408 at the 30 s request
  deadline; an address's open connections are capped at PUSH_MAX_CONNECTIONS_PER_IP (256 by
  default, kept-alive ones included), past it 429 at accept (not reached with the default numbers:
  about 17 an address);
- IDLE here means slow bodies (`--bodies` is the same count): the head complete at once with a
  Content-Length of 200, the body a byte a second: 408 at the same 30 s deadline, which runs from
  the request's first byte to its complete body;
- meanwhile a `POST /v1/register` (push.md §2.2) from 127.0.0.1 every half second, on a fresh
  connection: its latency (connect to 200) before and during.

signal (`--local`: no TURN, so the 60 issuances a minute of §6.4 do not apply)
- SLOW connections sending an upgrade head for `/signal` a byte a second: 408 at the 30 s head
  deadline; an address's heads past signaling.md §6.4's 16 are refused 429 at accept;
- IDLE connections that upgrade, take the challenge and never register: each must get an
  `error` `challenge_expired` and the close 1008 `challenge_expired` 10 s after the challenge
  (§5.6, §6.1 step 3); past 16 sockets an address is refused 429 `too many connections`;
- meanwhile a fresh client registers every half second (challenge, signed `register`,
  `registered`): its latency, upgrade to `registered`, before and during. The fresh clients
  take turns over eight addresses of their own (127.0.3.1 up): one address would pass §6.4's 60
  upgrades a minute within the run.

For push and signal the idle connections (slow bodies) come from addresses of their own
(127.0.1.2 up), so the slow heads' per-address cap does not refuse them at accept; the relay's
share the slow heads' addresses, as they always have.

  bench/attack.py [--service relay|push|signal] [--slow 3000] [--idle 3000] [--addresses 60]
                  [--attack slowloris] [--tether PATH]

Prints one JSON line: how each kind of connection ended and when (min_s/max_s: seconds from the
attacker's TCP connection, so they read against the server's deadlines, which start no earlier,
and not against the attacker's own start-up; an asyncio client of thousands of sockets on a busy
machine reads what it is sent late, so a figure can exceed its deadline by that lag),
and the latency figures (the legitimate client's failures, counted as 10 s each in the figures,
are named under `failures`).

`--attack unread` (issue 29): replies never read. `--sockets N` (1) raw TCP sockets, each with
SO_RCVBUF 4096 set before connect, `--per-address` (16) to a source address (127.0.2.1 up; signal's
per-IP cap is 16, the relay's 64), write as fast as the kernel takes them (non-blocking, a partial
frame resumed where it stopped) for `--seconds` (60) and never read:
- relay, `--variant admitted` (default; `--local`, open mode): upgrade (a random room, no Origin),
  Hello `{"v":1,"role":"mac"}` and the empty Proof, whose Challenge and Result are read (to know the
  Mac was admitted) before the flood; then masked pings with 125-byte payloads;
- relay, `--variant preauth`: the relay in attestation mode (APP_ID set, RELAY_ORIGIN
  https://127.0.0.1:<port>, ATTEST_REQUIRED unset); the pings start right after the upgrade, no Hello;
- signal (`--local`), `--variant pings` (default) or `errors`: upgrade to /signal (the challenge is
  never read), then pings, or `{"type":"signal","v":2}` text frames (each earns an `error`
  `not_registered`, or `bad_message` with `--register`, where each attacker first registers: it
  then reads its challenge and `registered`);
- push (PUSH_REGISTER_RATE_LIMIT=0): `POST /v1/register` with a valid body, pipelined on one
  connection.
The 101 head is read (and checked) on every WebSocket; nothing after the flood starts. Meanwhile a
legitimate client in a process of its own, 5 s alone first (the baseline): relay, a spliced
mac/phone pair (open mode) echoing 64 bytes every 50 ms (preauth: attestation mode admits no phone
without a ticket, so a parked mac timing ping to pong every 50 ms); signal, six registered clients
taking turns at a `presence` query every 200 ms (each under §6.4's 10 queries per 10 s); push, a
`POST /v1/register` on a fresh connection every 500 ms. The server's VmRSS is read every 0.5 s
(`--rss-abort-mib`, 3072: past it the attackers stop and the run is marked aborted); each
attacker's close by the server (a FIN, after which it is written to no more, or a reset or
broken pipe on a send) is timed from its connect; after the flood what is left is read for
`--drain-seconds` (5; 32 MiB a socket at most) to find the server's close frame; the RSS is read
again 3 s after the attackers close.

  bench/attack.py --attack unread --service relay|push|signal [--variant V] [--sockets 1]
                  [--seconds 60] [--register] [--per-address 16] [--tether PATH]

It prints one JSON line: `baseline_<probe>`/`during_attack_<probe>` (n, p50_ms, p99_ms, max_ms,
failures), `rss_mib` (start, max, end, after_close_3s, growth_per_socket = (max - start) /
attacking sockets, a trace of [s, MiB]), `attacker_sent` (MiB, frames or requests), `refused`
(set-up failures), `closed_by_server` (count of attacking, how, min_s/max_s), `end_read`
(close_frames by "code reason", frames met by opcode), `aborted`, `exited_during_run`, and the
pass line: `pass`, `fail_reasons`, `notes`. It passes when the RSS grew at most 2 MiB per
attacking socket (and stayed under 2 GiB with 1000 sockets or more), every attacking socket was
closed by `close_due_s` (only checked when `--seconds` reaches it: 40 s for the error and push
floods, the relay pre-auth flood and unregistered signal sockets, 65 s for the other ping floods),
the legitimate client never failed and its p99 stayed within twice the baseline's (5 ms at least).
"""
import argparse
import asyncio
import base64
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TETHER = os.path.join(ROOT, ".build", "release", "tether")
PAD = b"X-Pad: " + b"a" * 200


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def slow_send(port, source, ends, trickle, prefix=b""):
    """Sends `prefix` at once, then `trickle` a byte a second; records how the connection ended
    and how long after the connection was made (the server's deadline runs from the first byte)."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    except OSError:
        ends.append(("connect failed", 0))
        return
    started = time.monotonic()
    try:
        if prefix:
            writer.write(prefix)
        for byte in trickle:
            writer.write(bytes([byte]))
            try:
                answer = await asyncio.wait_for(reader.read(64), 1)
            except asyncio.TimeoutError:
                continue
            status = answer.split(b"\r\n")[0].decode(errors="replace") if answer else "closed"
            ends.append((status, time.monotonic() - started))
            return
        ends.append(("head finished unanswered" if not prefix else "body finished unanswered", time.monotonic() - started))
    except (ConnectionError, OSError):
        ends.append(("reset", time.monotonic() - started))
    finally:
        writer.close()


def describe(message):
    """A signaling server message in a word: its type, and an error's code."""
    try:
        fields = json.loads(message)
    except ValueError:
        return "?"
    return f"error:{fields.get('code')}" if fields.get("type") == "error" else str(fields.get("type"))


async def idle_upgrade(port, source, ends, path="/", headers=None, silent=True):
    """Upgrades, then sends nothing; records the close and when it came. `silent`: the server is
    to send nothing first (the relay), so any message ends the wait; otherwise the messages that
    came before the close are named with it (the signaling server's challenge and error)."""
    import websockets
    started = time.monotonic()
    try:
        sock = socket.create_connection(("127.0.0.1", port), source_address=(source, 0))
        started = time.monotonic()
        ws = await websockets.connect(f"ws://127.0.0.1:{port}{path}", sock=sock, compression=None, ping_interval=None,
                                      additional_headers=headers or {}, open_timeout=30)
    except Exception as error:
        ends.append((f"refused: {str(error)[:60]}", time.monotonic() - started))
        return
    seen = []
    try:
        until = time.monotonic() + 60
        while True:
            message = await asyncio.wait_for(ws.recv(), max(0.1, until - time.monotonic()))
            if silent:
                ends.append(("message", time.monotonic() - started))
                return
            seen.append(describe(message))
    except websockets.exceptions.ConnectionClosed as closed:
        code = closed.rcvd.code if closed.rcvd else None
        reason = closed.rcvd.reason if closed.rcvd else ""
        ends.append((f"{code} {reason}" + (f" after {','.join(seen)}" if seen else ""), time.monotonic() - started))
    except asyncio.TimeoutError:
        ends.append(("never closed", time.monotonic() - started))


# The legitimate clients: each returns its latency in ms, or raises.

async def fresh_pair(port, n):
    import websockets
    started = time.monotonic()
    room = os.urandom(32).hex()
    sockets = []
    for role in ("mac", "phone"):
        ws = await websockets.connect(f"ws://127.0.0.1:{port}/", compression=None, additional_headers={"x-relay-room": room})
        await ws.send(json.dumps({"v": 1, "role": role}))
        await ws.recv()
        await ws.send("{}")
        result = json.loads(await ws.recv())
        assert result.get("ok"), result
        sockets.append(ws)
    elapsed = (time.monotonic() - started) * 1000
    for ws in sockets:
        await ws.close()
    return elapsed


async def push_register(port, n):
    started = time.monotonic()
    body = json.dumps({"deviceToken": os.urandom(32).hex(), "environment": "production"}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"POST /v1/register HTTP/1.1\r\nHost: push\r\nContent-Type: application/json\r\nConnection: close\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
        answer = await reader.read()
    finally:
        writer.close()
    status = answer.split(b"\r\n")[0]
    assert status.startswith(b"HTTP/1.1 200") and b"relaySecret" in answer, status.decode(errors="replace")
    return (time.monotonic() - started) * 1000


async def signal_register(port, n):
    import websockets
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    key = Ed25519PrivateKey.generate()
    ident = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex().upper()
    started = time.monotonic()
    async with websockets.connect(f"ws://127.0.0.1:{port}/signal", compression=None, ping_interval=None,
                                  local_addr=(f"127.0.3.{1 + n % 8}", 0)) as ws:
        challenge = json.loads(await ws.recv())
        assert challenge.get("type") == "challenge", challenge
        signature = key.sign(f"cryptext.register.v2\n{challenge['challenge']}\n{ident}".encode())
        await ws.send(json.dumps({"type": "register", "v": 2, "id": ident, "sig": base64.b64encode(signature).decode()}))
        registered = json.loads(await ws.recv())
        assert registered.get("type") == "registered", registered
        return (time.monotonic() - started) * 1000


async def measure(legit, port, seconds):
    latencies, failures = [], {}
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        try:
            latencies.append(await asyncio.wait_for(legit(port, len(latencies)), 10))
        except Exception as error:
            latencies.append(10_000.0)
            reason = (type(error).__name__ + ": " + str(error))[:80]
            failures[reason] = failures.get(reason, 0) + 1
        await asyncio.sleep(0.5)
    return latencies, failures


def figures(measured):
    latencies, failures = measured
    ordered = sorted(latencies)
    out = {"n": len(ordered), "p50_ms": round(statistics.median(ordered), 1),
           "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1), "max_ms": round(ordered[-1], 1)}
    if failures:
        out["failures"] = failures
    return out


def tally(ends):
    out = {}
    for status, after in ends:
        entry = out.setdefault(status, {"count": 0, "min_s": 1e9, "max_s": 0})
        entry["count"] += 1
        entry["min_s"] = round(min(entry["min_s"], after), 1)
        entry["max_s"] = round(max(entry["max_s"], after), 1)
    return out


def measure_apart(legit, port, seconds, results):
    """`measure` in a process of its own: the legitimate client never waits behind the
    attackers' coroutines in this interpreter."""
    results.put(asyncio.run(measure(legit, port, seconds)))


# What each service is attacked with: its legitimate client, the name of what it measures, and
# the two kinds of attacker as (name in the JSON, coroutine of (port, source, ends)).
SERVICES = {
    "relay": {
        "legit": fresh_pair, "measured": "admission",
        "slow": ("slow_heads", lambda port, source, ends: slow_send(
            port, source, ends, b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" + PAD)),
        "idle": ("idle_upgrades", lambda port, source, ends: idle_upgrade(
            port, source, ends, headers={"x-relay-room": os.urandom(32).hex()})),
        "idle_sources": "127.0.0",
    },
    "push": {
        "legit": push_register, "measured": "register",
        "slow": ("slow_heads", lambda port, source, ends: slow_send(
            port, source, ends, b"POST /v1/register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + PAD)),
        "idle": ("slow_bodies", lambda port, source, ends: slow_send(
            port, source, ends, b'{"deviceToken":"' + b"a" * 182 + b'"}',
            prefix=b"POST /v1/register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n")),
        "idle_sources": "127.0.1",
    },
    "signal": {
        "legit": signal_register, "measured": "registration",
        "slow": ("slow_heads", lambda port, source, ends: slow_send(
            port, source, ends, b"GET /signal HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" + PAD)),
        "idle": ("idle_upgrades", lambda port, source, ends: idle_upgrade(port, source, ends, path="/signal", silent=False)),
        "idle_sources": "127.0.1",
    },
}


async def attack(service, port, args):
    import multiprocessing
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    baseline = context.Process(target=measure_apart, args=(service["legit"], port, 5, results))
    baseline.start()
    baseline_latencies = results.get()
    baseline.join()
    slow_ends, idle_ends = [], []
    (slow_name, slow), (idle_name, idle) = service["slow"], service["idle"]
    sources = [f"127.0.0.{2 + i}" for i in range(args.addresses)]
    idle_sources = [f"{service['idle_sources']}.{2 + i}" for i in range(args.addresses)]
    during = context.Process(target=measure_apart, args=(service["legit"], port, 32, results))
    during.start()
    tasks = [asyncio.create_task(slow(port, sources[i % len(sources)], slow_ends)) for i in range(args.slow)]
    tasks += [asyncio.create_task(idle(port, idle_sources[i % len(idle_sources)], idle_ends)) for i in range(args.idle)]
    await asyncio.gather(*tasks)
    during_latencies = results.get()
    during.join()
    measured = service["measured"]
    return {f"baseline_{measured}": figures(baseline_latencies), f"during_attack_{measured}": figures(during_latencies),
            slow_name: tally(slow_ends), idle_name: tally(idle_ends)}


# `--attack unread` (issue 29): attackers that write as fast as the kernel takes and never read the
# replies. Raw non-blocking sockets, driven from one epoll loop in this process; the legitimate
# client runs in a process of its own (forked before any attacking socket exists, so it holds none).

MIB = 1024 * 1024
PING_PAYLOAD = b"p" * 125
SIGNAL_ERROR = b'{"type":"signal","v":2}'
PUSH_BODY = json.dumps({"deviceToken": "ab" * 32, "environment": "production"}).encode()
PUSH_REQUEST = (b"POST /v1/register HTTP/1.1\r\nHost: push\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(PUSH_BODY) + PUSH_BODY)

# What each (service, variant) floods, and by when (seconds from connect) the server must have
# closed the attacker; a run shorter than that records the closes without failing on them. The
# admitted ping floods are closed by the keepalive (30-60 s: the attacker never answers the
# server's pings); a pre-auth relay socket by the admission deadline (15-30 s, relay.md §3.9);
# replies that pile up past the output bound stall for 30 s and are closed; an unregistered signal
# socket gets `challenge_expired` at 10 s (see unread_attack).
UNREAD_VARIANTS = {
    ("relay", "admitted"): {"unit": "ping", "due": 65},
    ("relay", "preauth"): {"unit": "ping", "due": 40},
    ("signal", "pings"): {"unit": "ping", "due": 65},
    ("signal", "errors"): {"unit": "signal_error", "due": 40},
    ("push", "pipelined"): {"unit": "push_register", "due": 40},
}
DEFAULT_VARIANT = {"relay": "admitted", "signal": "pings", "push": "pipelined"}


def ws_frame(opcode, payload):
    """A masked client frame, FIN set."""
    mask = os.urandom(4)
    length = len(payload)
    if length < 126:
        head = bytes([0x80 | opcode, 0x80 | length])
    elif length < 65536:
        head = bytes([0x80 | opcode, 0x80 | 126]) + length.to_bytes(2, "big")
    else:
        head = bytes([0x80 | opcode, 0x80 | 127]) + length.to_bytes(8, "big")
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def flood_unit(kind):
    """About 64 KiB of whole frames (or requests), sent again and again: an offset into it that
    wraps is always a frame boundary plus the part of a frame already sent."""
    one = {"ping": lambda: ws_frame(0x9, PING_PAYLOAD), "signal_error": lambda: ws_frame(0x1, SIGNAL_ERROR),
           "push_register": lambda: PUSH_REQUEST}[kind]
    frames = []
    size = 0
    while size < 65536:
        frames.append(one())
        size += len(frames[-1])
    return b"".join(frames), len(frames)


def parse_frame(buf, pos):
    """(opcode, payload, next position) of the whole server frame at `pos`, or None."""
    if len(buf) - pos < 2:
        return None
    b0, b1 = buf[pos], buf[pos + 1]
    length, at = b1 & 0x7F, pos + 2
    if length == 126:
        if len(buf) - at < 2:
            return None
        length, at = int.from_bytes(buf[at:at + 2], "big"), at + 2
    elif length == 127:
        if len(buf) - at < 8:
            return None
        length, at = int.from_bytes(buf[at:at + 8], "big"), at + 8
    mask = None
    if b1 & 0x80:
        if len(buf) - at < 4:
            return None
        mask, at = bytes(buf[at:at + 4]), at + 4
    if len(buf) - at < length:
        return None
    opcode = b0 & 0x0F
    payload = b""
    if opcode >= 0x8 or opcode == 0x1:  # control frames and text are small; pongs' payloads unused
        payload = bytes(buf[at:at + length])
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return opcode, payload, at + length


def read_frame(sock, buf, deadline):
    """A whole frame read blocking (the set-up only), and what is left after it."""
    while True:
        parsed = parse_frame(buf, 0)
        if parsed:
            return parsed[0], parsed[1], buf[parsed[2]:]
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed during set-up")
        buf += chunk


class Attacker:
    """One attacking socket: where its flood stands and how it ended."""

    def __init__(self, index, source):
        self.index, self.source = index, source
        self.sock = None
        self.connected_at = None
        self.refused = None        # why set-up failed, or None
        self.leftover = b""        # server bytes read during set-up past what set-up consumed
        self.offset = 0            # where the next send starts in the flood unit
        self.sent = 0
        self.closed_at = None      # seconds from connect when the server's close was first seen
        self.closed_how = None     # "reset", "pipe", "fin", ...
        self.fin_at = None
        self.dead = False          # a send failed: nothing more can go
        self.close_frame = None    # "code reason" of a WebSocket close frame found at the end
        self.drained = 0           # bytes read at the end

    def seen_closed(self, how, now):
        if self.closed_at is None:
            self.closed_at, self.closed_how = now - self.connected_at, how


def upgrade_head(port, path, headers):
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def set_up_attacker(attacker, service, variant, port, register):
    """Connects from the attacker's own address with a 4 KiB receive buffer, upgrades (not push)
    and does what the variant does before its flood; blocking, 10 s at most."""
    deadline = time.monotonic() + 10
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    attacker.sock = sock
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.bind((attacker.source, 0))
    sock.settimeout(10)
    try:
        sock.connect(("127.0.0.1", port))
        attacker.connected_at = time.monotonic()
        if service == "push":
            return
        if service == "relay":
            sock.sendall(upgrade_head(port, "/", {"x-relay-room": os.urandom(32).hex()}))
        else:
            sock.sendall(upgrade_head(port, "/signal", {}))
        buf = b""
        while b"\r\n\r\n" not in buf:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed before the upgrade answer")
            buf += chunk
        head, buf = buf.split(b"\r\n\r\n", 1)
        status = head.split(b"\r\n")[0].decode(errors="replace")
        if " 101 " not in status + " ":
            attacker.refused = status[:60]
            return
        if service == "relay" and variant == "admitted":
            # Open mode: Hello, its Challenge, the empty Proof, its Result. Both replies are read
            # (to know the Mac was admitted); nothing is read after this.
            sock.sendall(ws_frame(0x1, b'{"v":1,"role":"mac"}'))
            opcode, payload, buf = read_frame(sock, buf, deadline)
            sock.sendall(ws_frame(0x1, b"{}"))
            opcode, payload, buf = read_frame(sock, buf, deadline)
            if opcode != 0x1 or not json.loads(payload).get("ok"):
                attacker.refused = f"not admitted: {opcode} {payload[:60]!r}"
                return
        elif service == "signal" and register:
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
            key = Ed25519PrivateKey.generate()
            ident = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex().upper()
            opcode, payload, buf = read_frame(sock, buf, deadline)
            challenge = json.loads(payload)["challenge"]
            signature = base64.b64encode(key.sign(f"cryptext.register.v2\n{challenge}\n{ident}".encode())).decode()
            sock.sendall(ws_frame(0x1, json.dumps({"type": "register", "v": 2, "id": ident, "sig": signature}).encode()))
            opcode, payload, buf = read_frame(sock, buf, deadline)
            if json.loads(payload).get("type") != "registered":
                attacker.refused = f"not registered: {payload[:60]!r}"
                return
        attacker.leftover = buf
    except (OSError, ValueError, KeyError) as error:
        attacker.refused = (type(error).__name__ + ": " + str(error))[:60]


def attacker_addresses(count):
    """127.0.2.1-254, then 127.0.4.x, 127.0.5.x, ... (127.0.3.x is the legitimate signal clients')."""
    blocks = [2] + list(range(4, 256))
    return [f"127.0.{blocks[i // 254]}.{1 + i % 254}" for i in range(count)]


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


# The legitimate clients of the unread mode: each keeps its connection(s) between probes; `probe`
# returns a latency in ms or raises, after which `close` and a fresh `open` follow.

class RelayEcho:
    """A spliced mac/phone pair in open mode; the phone echoes, the mac times 64 bytes there and back."""
    name, interval = "echo_rtt", 0.05

    async def open(self, port):
        import websockets
        room = os.urandom(32).hex()
        self.sockets = []
        for role in ("mac", "phone"):
            ws = await websockets.connect(f"ws://127.0.0.1:{port}/", compression=None, ping_interval=None,
                                          additional_headers={"x-relay-room": room})
            self.sockets.append(ws)
            await ws.send(json.dumps({"v": 1, "role": role}))
            await ws.recv()
            await ws.send("{}")
            result = json.loads(await ws.recv())
            assert result.get("ok"), result
        self.mac, self.phone = self.sockets
        self.echo = asyncio.create_task(self.echoing())

    async def echoing(self):
        async for message in self.phone:
            await self.phone.send(message)

    async def probe(self):
        payload = os.urandom(64)
        started = time.monotonic()
        await self.mac.send(payload)
        answer = await self.mac.recv()
        assert answer == payload, f"echo mismatch: {answer[:16]!r}"
        return (time.monotonic() - started) * 1000

    async def close(self):
        if getattr(self, "echo", None):
            self.echo.cancel()
        for ws in getattr(self, "sockets", []):
            await ws.close()


class RelayMacPing:
    """Attestation mode admits no phone without a ticket, so the preauth run's legitimate client is
    a parked mac timing WebSocket ping to pong."""
    name, interval = "mac_ping_rtt", 0.05

    async def open(self, port):
        import websockets
        self.ws = await websockets.connect(f"ws://127.0.0.1:{port}/", compression=None, ping_interval=None,
                                           additional_headers={"x-relay-room": os.urandom(32).hex()})
        await self.ws.send(json.dumps({"v": 1, "role": "mac"}))
        await self.ws.recv()
        await self.ws.send("{}")
        result = json.loads(await self.ws.recv())
        assert result.get("ok"), result

    async def probe(self):
        started = time.monotonic()
        waiter = await self.ws.ping(os.urandom(8))
        await waiter
        return (time.monotonic() - started) * 1000

    async def close(self):
        if getattr(self, "ws", None):
            await self.ws.close()


class SignalPresence:
    """Registered clients asking `presence` (signaling.md §5.5) in turn: one query every 200 ms in
    all, spread over six connections so each stays under §6.4's 10 queries per 10 s."""
    name, interval, pool = "presence_rtt", 0.2, 6

    async def open(self, port):
        import websockets
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        self.clients, self.ids, self.turn = [], [], 0
        for n in range(self.pool):
            key = Ed25519PrivateKey.generate()
            ident = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex().upper()
            ws = await websockets.connect(f"ws://127.0.0.1:{port}/signal", compression=None, ping_interval=None,
                                          local_addr=(f"127.0.3.{1 + n}", 0))
            self.clients.append(ws)
            challenge = json.loads(await ws.recv())
            signature = key.sign(f"cryptext.register.v2\n{challenge['challenge']}\n{ident}".encode())
            await ws.send(json.dumps({"type": "register", "v": 2, "id": ident, "sig": base64.b64encode(signature).decode()}))
            registered = json.loads(await ws.recv())
            assert registered.get("type") == "registered", registered
            self.ids.append(ident)

    async def probe(self):
        ws = self.clients[self.turn % self.pool]
        self.turn += 1
        started = time.monotonic()
        await ws.send(json.dumps({"type": "presence", "v": 2, "ids": self.ids}))
        answer = json.loads(await ws.recv())
        assert answer.get("type") == "presence" and all(answer["online"].values()), describe(json.dumps(answer))
        return (time.monotonic() - started) * 1000

    async def close(self):
        for ws in getattr(self, "clients", []):
            await ws.close()


class PushFresh:
    """`POST /v1/register` on a fresh connection (as `push_register`)."""
    name, interval = "register", 0.5

    async def open(self, port):
        self.port, self.n = port, 0

    async def probe(self):
        self.n += 1
        return await push_register(self.port, self.n)

    async def close(self):
        pass


def legit_client(service, variant):
    if service == "relay":
        return RelayMacPing if variant == "preauth" else RelayEcho
    return SignalPresence if service == "signal" else PushFresh


async def measure_steady(kind, port, seconds, stop):
    """Probes every `kind.interval` for `seconds` (or until `stop`), reopening after a failure;
    a failure counts as 10 s in the figures."""
    latencies, failures = [], {}
    client, opened = kind(), False

    def fail(error):
        latencies.append(10_000.0)
        reason = (type(error).__name__ + ": " + str(error))[:80]
        failures[reason] = failures.get(reason, 0) + 1

    until = time.monotonic() + seconds
    while time.monotonic() < until and not (stop and stop.is_set()):
        try:
            if not opened:
                await asyncio.wait_for(client.open(port), 10)
                opened = True
            latencies.append(await asyncio.wait_for(client.probe(), 10))
        except Exception as error:
            fail(error)
            try:
                await asyncio.wait_for(client.close(), 2)
            except Exception:
                pass
            client, opened = kind(), False
        await asyncio.sleep(kind.interval)
    try:
        await asyncio.wait_for(client.close(), 2)
    except Exception:
        pass
    return latencies, failures


def measure_steady_apart(kind, port, seconds, results, go=None, stop=None):
    """`measure_steady` in a process of its own; with `go`, it waits for it first."""
    if go is not None:
        go.wait()
    results.put(asyncio.run(measure_steady(kind, port, seconds, stop)))


def flood(attackers, unit, server, seconds, abort_mib, samples):
    """Writes `unit` over and over on every attacking socket for `seconds`, never reading; records
    the server's closes, and its RSS every 0.5 s. Returns the abort reason, if any."""
    import errno
    import select
    epoll = select.epoll()
    by_fd = {}
    for attacker in attackers:
        attacker.sock.setblocking(False)
        epoll.register(attacker.sock.fileno(), select.EPOLLOUT | select.EPOLLRDHUP)
        by_fd[attacker.sock.fileno()] = attacker
    view = memoryview(unit)
    started = time.monotonic()
    until, next_sample = started + seconds, started
    aborted = None
    try:
        while True:
            now = time.monotonic()
            if now >= next_sample:
                rss = rss_mib(server.pid)
                samples.append((round(now - started, 2), rss))
                next_sample += 0.5
                if rss is None:
                    aborted = "server gone"
                    break
                if rss > abort_mib:
                    aborted = f"server RSS {rss:.0f} MiB over the {abort_mib:.0f} MiB guard"
                    break
            if now >= until:
                break
            for fd, events in epoll.poll(0.05):
                attacker = by_fd[fd]
                now = time.monotonic()
                if events & select.EPOLLRDHUP and not events & select.EPOLLERR:
                    # The server closed: written to no more (that would only earn a reset and lose
                    # what it sent before its FIN, its close frame included, to the end read).
                    attacker.fin_at = now - attacker.connected_at
                    attacker.seen_closed("fin", now)
                    epoll.unregister(fd)
                    del by_fd[fd]
                    continue
                if events & select.EPOLLOUT and not events & select.EPOLLERR:
                    try:
                        n = attacker.sock.send(view[attacker.offset:])
                        attacker.sent += n
                        attacker.offset = (attacker.offset + n) % len(unit)
                    except BlockingIOError:
                        pass
                    except OSError as error:
                        attacker.seen_closed({errno.ECONNRESET: "reset", errno.EPIPE: "pipe"}.get(error.errno, errno.errorcode.get(error.errno, "error")), now)
                        attacker.dead = True
                elif events & select.EPOLLERR:
                    code = attacker.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    attacker.seen_closed({errno.ECONNRESET: "reset", errno.EPIPE: "pipe"}.get(code, "error"), now)
                    attacker.dead = True
                if attacker.dead:
                    epoll.unregister(fd)
                    del by_fd[fd]
    finally:
        epoll.close()
    return aborted


def drain(attackers, websocket, seconds, cap=32 * MIB):
    """After the flood: reads what each socket still can (for `seconds` in all, `cap` bytes a
    socket) to find the server's WebSocket close frame; counts the frames met on the way."""
    import select
    epoll = select.epoll()
    state = {}
    frames = {}
    names = {0x1: "text", 0x2: "binary", 0x8: "close", 0x9: "ping", 0xA: "pong"}
    for attacker in attackers:
        if attacker.refused:
            continue
        try:
            # A reset socket too: Linux still gives what was queued before the reset.
            epoll.register(attacker.sock.fileno(), select.EPOLLIN | select.EPOLLRDHUP)
        except OSError:
            continue
        state[attacker.sock.fileno()] = (attacker, bytearray(attacker.leftover))
    until = time.monotonic() + seconds
    while state and time.monotonic() < until:
        for fd, _ in epoll.poll(0.05):
            attacker, buf = state[fd]
            done = False
            try:
                chunk = attacker.sock.recv(262144)
            except BlockingIOError:
                continue
            except OSError:
                chunk, done = b"", True
            if not chunk:
                done = True
            attacker.drained += len(chunk)
            if websocket:
                buf += chunk
                pos = 0
                while True:
                    parsed = parse_frame(buf, pos)
                    if not parsed:
                        break
                    opcode, payload, pos = parsed
                    frames[names.get(opcode, str(opcode))] = frames.get(names.get(opcode, str(opcode)), 0) + 1
                    if opcode == 0x8:
                        code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else None
                        attacker.close_frame = f"{code} {payload[2:].decode(errors='replace')}".strip()
                        done = True
                        break
                del buf[:pos]
            if done or attacker.drained >= cap:
                epoll.unregister(fd)
                del state[fd]
    epoll.close()
    return frames, len(state)


def unread_attack(args, port, server):
    import multiprocessing
    service, variant = args.service, args.variant
    spec = UNREAD_VARIANTS[(service, variant)]
    kind = legit_client(service, variant)
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    baseline = context.Process(target=measure_steady_apart, args=(kind, port, 5, results))
    baseline.start()
    baseline_latencies = results.get(timeout=60)
    baseline.join()
    # Forked before any attacking socket exists, so it holds none of them open.
    go, stop = context.Event(), context.Event()
    during = context.Process(target=measure_steady_apart, args=(kind, port, args.seconds, results, go, stop))
    during.start()

    rss_start = rss_mib(server.pid)
    sources = attacker_addresses((args.sockets + args.per_address - 1) // args.per_address)
    attackers = [Attacker(i, sources[i // args.per_address]) for i in range(args.sockets)]
    set_up_started = time.monotonic()
    for attacker in attackers:
        set_up_attacker(attacker, service, variant, port, args.register)
    set_up_s = time.monotonic() - set_up_started
    live = [a for a in attackers if not a.refused]
    unit, per_unit = flood_unit(spec["unit"])
    samples = []
    go.set()
    flood_started = time.monotonic()
    aborted = flood(live, unit, server, args.seconds, args.rss_abort_mib, samples)
    flood_s = time.monotonic() - flood_started
    if aborted:
        stop.set()
    rss_end = rss_mib(server.pid)
    crashed = server.poll()
    frames, undrained = ({}, 0)
    if not aborted:
        frames, undrained = drain(live, service != "push", args.drain_seconds)
    for attacker in attackers:
        attacker.sock.close()
    closed_at = time.monotonic()
    try:
        during_latencies = results.get(timeout=args.seconds + 60)
    except Exception:
        during_latencies = ([10_000.0], {"the legitimate client's process gave no figures": 1})
    during.join(timeout=10)
    if during.is_alive():
        during.kill()
    time.sleep(max(0.0, 3 - (time.monotonic() - closed_at)))
    rss_after = rss_mib(server.pid)

    # Figures.
    measured = kind.name
    # An abort in the first probe leaves no latency at all.
    baseline_figures, during_figures = [figures(m) if m[0] else {"n": 0, "p99_ms": 0.0, **({"failures": m[1]} if m[1] else {})}
                                        for m in (baseline_latencies, during_latencies)]
    rss_values = [rss for _, rss in samples if rss is not None]
    rss_max = max(rss_values + [rss_start or 0])
    growth = (rss_max - rss_start) / max(1, len(live)) if rss_start is not None else None
    refused = {}
    for attacker in attackers:
        if attacker.refused:
            refused[attacker.refused] = refused.get(attacker.refused, 0) + 1
    closed = [a for a in live if a.closed_at is not None]
    how = {}
    for attacker in closed:
        how[attacker.closed_how] = how.get(attacker.closed_how, 0) + 1
    close_frames = {}
    for attacker in live:
        if attacker.close_frame:
            close_frames[attacker.close_frame] = close_frames.get(attacker.close_frame, 0) + 1
    sent = sum(a.sent for a in live)
    result = {
        "attack": "unread", "service": service, "variant": variant, "sockets": args.sockets, "seconds": args.seconds,
        "per_address": args.per_address, "addresses": len(sources), "tether": TETHER,
        "attacking": len(live), "refused": refused, "set_up_s": round(set_up_s, 1), "flood_s": round(flood_s, 1),
        f"baseline_{measured}": baseline_figures, f"during_attack_{measured}": during_figures,
        "rss_mib": {"start": round(rss_start, 1) if rss_start else None, "max": round(rss_max, 1),
                    "end": round(rss_end, 1) if rss_end else None,
                    "after_close_3s": round(rss_after, 1) if rss_after else None,
                    "growth_per_socket": round(growth, 2) if growth is not None else None,
                    "samples": len(samples),
                    "trace": [[t, round(r)] for t, r in samples[::max(1, len(samples) // 20)] if r is not None]},
        "attacker_sent": {"mib": round(sent / MIB, 1), "units": int(sent / len(unit) * per_unit),
                          "unit": spec["unit"], "max_socket_mib": round(max([a.sent for a in live] + [0]) / MIB, 1)},
        "closed_by_server": {"count": len(closed), "of": len(live), "how": how,
                             "min_s": round(min(a.closed_at for a in closed), 1) if closed else None,
                             "max_s": round(max(a.closed_at for a in closed), 1) if closed else None},
        "end_read": {"close_frames": close_frames, "frames": frames, "mib": round(sum(a.drained for a in live) / MIB, 1),
                     "sockets_unfinished": undrained},
        "exited_during_run": crashed, "aborted": aborted,
    }

    # The pass line.
    reasons, notes = [], []
    if aborted:
        reasons.append(f"aborted: {aborted}")
    if crashed is not None:
        reasons.append(f"server exited ({crashed})")
    if not live:
        reasons.append("no attacking socket was set up")
    if refused:
        notes.append(f"{sum(refused.values())} attacking sockets refused at set-up")
    if growth is not None and growth > 2:
        reasons.append(f"RSS grew {growth:.1f} MiB per attacking socket (> 2)")
    if args.sockets >= 1000 and rss_max >= 2048:
        reasons.append(f"RSS reached {rss_max:.0f} MiB with {args.sockets} sockets (>= 2 GiB)")
    floor = max(baseline_figures["p99_ms"], 5.0)
    if during_figures["p99_ms"] > 2 * floor:
        reasons.append(f"legitimate p99 {during_figures['p99_ms']} ms > 2 x {floor} ms (baseline p99, floor 5 ms)")
    if during_figures.get("failures"):
        reasons.append(f"legitimate client failed {sum(during_figures['failures'].values())} times")
    due = spec["due"]
    if service == "signal" and not args.register:
        due = 40  # challenge_expired at 10 s, whatever the flood
    open_left = len(live) - len(closed)
    if open_left:
        if args.seconds >= due:
            reasons.append(f"{open_left} of {len(live)} attacking sockets still open after {args.seconds} s (due by {due} s)")
        else:
            notes.append(f"{open_left} still open, not failed: the run ({args.seconds} s) is shorter than the {due} s the server has")
    result["close_due_s"] = due
    result["pass"] = not reasons
    result["fail_reasons"] = reasons
    result["notes"] = notes
    return result


def unread_main(args):
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    args.variant = args.variant or DEFAULT_VARIANT[args.service]
    if (args.service, args.variant) not in UNREAD_VARIANTS:
        sys.exit(f"attack: no variant {args.variant} for {args.service} (one of "
                 f"{', '.join(v for s, v in UNREAD_VARIANTS if s == args.service)})")
    if args.per_address is None:
        args.per_address = 16
    cap = {"relay": 64, "signal": 16, "push": 256}[args.service]
    if args.per_address > cap:
        sys.exit(f"attack: --per-address {args.per_address} is over the {args.service}'s per-IP cap of {cap}")
    port = free_port()
    work = tempfile.mkdtemp(prefix="tether-attack-")
    server = start(args.service, port, work, unread=True, variant=args.variant)
    try:
        result = unread_attack(args, port, server)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    print(json.dumps(result))


def start(name, port, work, unread=False, variant=None):
    """The service on `port` with its defaults, but for what a loopback run must change. `unread`:
    push without the per-IP register limit; `variant` preauth: the relay in attestation mode."""
    if name == "relay" and variant == "preauth":
        # App Attest required (no attestation is ever made: the attackers never send a Hello).
        env = {k: v for k, v in os.environ.items() if k != "ATTEST_REQUIRED"}
        # Outside --local the origin must be https (it is only bound into transcripts, never dialled).
        env.update(RELAY_WS_RATE_LIMIT="0", APP_ID="ABCDE12345.com.example.app", RELAY_ORIGIN=f"https://127.0.0.1:{port}")
        command = [TETHER, "relay", "--relay-port", str(port), "--relay-db", os.path.join(work, "relay.db")]
    elif name == "relay":
        # The relay's own defaults, but for the upgrade rate (every idle connection is an upgrade).
        env = dict(os.environ, RELAY_WS_RATE_LIMIT="0")
        command = [TETHER, "relay", "--local", "--relay-port", str(port), "--relay-db", os.path.join(work, "relay.db")]
    elif name == "push":
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        key = ec.generate_private_key(ec.SECP256R1()).private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                                     serialization.NoEncryption())
        with open(os.path.join(work, "AuthKey.p8"), "wb") as f:
            f.write(key)
        # APNs is never reached (/v1/register does not call it): its URLs point at a closed port.
        env = dict(os.environ, PUSH_PORT=str(port), PUSH_DB=os.path.join(work, "push.db"), PUSH_PROFILES="mytty",
                   APNS_TEAM_ID="ABCDE12345", APNS_KEY_ID="FGHIJ67890", APNS_PRIVATE_KEY_FILE=os.path.join(work, "AuthKey.p8"),
                   APNS_PRODUCTION_URL="https://127.0.0.1:9", APNS_SANDBOX_URL="https://127.0.0.1:9",
                   # Every register is to do its work: the legitimate client alone registers twice a
                   # second from one address (an older binary ignores the variable).
                   PUSH_REGISTER_RATE_LIMIT="0")
        command = [TETHER, "push"]
    else:
        env = dict(os.environ)
        command = [TETHER, "signal", "--local", "--signal-port", str(port)]
    errors = open(os.path.join(work, "stderr.log"), "w") if unread else subprocess.DEVNULL
    process = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=errors, text=True)
    if not process.stdout.readline().startswith(f"{name}: listening on"):
        said = ""
        if unread:
            process.wait(timeout=10)
            with open(os.path.join(work, "stderr.log")) as f:
                said = ": " + f.read().strip()[-300:]
        sys.exit(f"attack: the {name} service did not start{said}")
    return process


def main():
    global TETHER
    parser = argparse.ArgumentParser()
    parser.add_argument("--service", choices=sorted(SERVICES), default="relay")
    parser.add_argument("--slow", type=int, default=3000)
    parser.add_argument("--idle", "--bodies", dest="idle", type=int, default=3000,
                        help="idle upgrades (relay, signal) or slow bodies (push)")
    parser.add_argument("--addresses", type=int, default=60)
    parser.add_argument("--attack", choices=["slowloris", "unread"], default="slowloris",
                        help="slowloris: the slow and idle attackers above (the default); unread: replies never read (issue 29)")
    parser.add_argument("--tether", default=TETHER, help="the tether binary (default .build/release/tether)")
    unread = parser.add_argument_group("--attack unread")
    unread.add_argument("--sockets", type=int, default=1, help="attacking sockets")
    unread.add_argument("--seconds", type=int, default=60, help="how long they flood")
    unread.add_argument("--variant", help="relay: admitted (default) or preauth; signal: pings (default) or errors; push: pipelined")
    unread.add_argument("--register", action="store_true", help="signal: the attackers register before their flood")
    unread.add_argument("--per-address", type=int, help="attacking sockets per source address (default 16)")
    unread.add_argument("--rss-abort-mib", type=float, default=3072, help="stop the attackers when the server's RSS passes this")
    unread.add_argument("--drain-seconds", type=float, default=5,
                        help="after the flood, read what is left for this long to find the close frames")
    args = parser.parse_args()
    TETHER = os.path.abspath(args.tether)
    if args.attack == "unread":
        return unread_main(args)
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    port = free_port()
    work = tempfile.mkdtemp(prefix="tether-attack-")
    server = start(args.service, port, work)
    try:
        result = asyncio.run(attack(SERVICES[args.service], port, args))
        crashed = server.poll()
    finally:
        server.terminate()
        server.wait(timeout=30)
    result.update({"slow": args.slow, "idle": args.idle, "addresses": args.addresses})
    if args.service != "relay":
        # Whether the service was still up when the attack ended (else how it had exited).
        result.update({"service": args.service, "exited_during_run": crashed})
    print(json.dumps(result))


if __name__ == "__main__":
    main()

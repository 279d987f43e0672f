#!/usr/bin/env python3
"""Slow and idle attackers against a release `tether relay`, `tether push` or `tether signal`
(issue 18), on loopback. `--service` picks the target (relay by default):

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

Prints one JSON line: how each kind of connection ended and when (min_s/max_s: seconds from the
attacker's TCP connection, so they read against the server's deadlines, which start no earlier,
and not against the attacker's own start-up; an asyncio client of thousands of sockets on a busy
machine reads what it is sent late, so a figure can exceed its deadline by that lag),
and the latency figures (the legitimate client's failures, counted as 10 s each in the figures,
are named under `failures`).
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


def start(name, port, work):
    """The service on `port` with its defaults, but for what a loopback run must change."""
    if name == "relay":
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
                   APNS_PRODUCTION_URL="https://127.0.0.1:9", APNS_SANDBOX_URL="https://127.0.0.1:9")
        command = [TETHER, "push"]
    else:
        env = dict(os.environ)
        command = [TETHER, "signal", "--local", "--signal-port", str(port)]
    process = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if not process.stdout.readline().startswith(f"{name}: listening on"):
        sys.exit(f"attack: the {name} service did not start")
    return process


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--service", choices=sorted(SERVICES), default="relay")
    parser.add_argument("--slow", type=int, default=3000)
    parser.add_argument("--idle", "--bodies", dest="idle", type=int, default=3000,
                        help="idle upgrades (relay, signal) or slow bodies (push)")
    parser.add_argument("--addresses", type=int, default=60)
    args = parser.parse_args()
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

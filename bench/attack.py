#!/usr/bin/env python3
"""Slow and idle attackers against a release `tether relay` (issue 18), on loopback:

- SLOW connections from ADDRESSES source addresses (127.0.0.2 up) that send their upgrade head
  one byte a second and never finish it: each must be answered 408 at the 30 s head deadline
  (the HTTP server's request timeout), and an address's heads past RELAY_MAX_SOCKETS_PER_IP are
  refused 429 at once;
- IDLE connections that upgrade and never send a Hello: each must be closed 1008 `admission
  timeout` at relay.md's 15 s admission deadline;
- meanwhile a fresh pair from 127.0.0.1 is admitted every half second: its admission latency
  (mac connect to phone Result), before and during the attack, shows whether they starve it.

  bench/attack.py [--slow 3000] [--idle 3000] [--addresses 60]

Prints one JSON line: how each kind of connection ended and when, and the latency figures.
"""
import argparse
import asyncio
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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def slow_head(port, source, ends):
    """Sends a head a byte a second; records how the connection ended and after how long."""
    started = time.monotonic()
    head = b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" + b"X-Pad: " + b"a" * 200
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    except OSError:
        ends.append(("connect failed", 0))
        return
    try:
        for byte in head:
            writer.write(bytes([byte]))
            try:
                answer = await asyncio.wait_for(reader.read(64), 1)
            except asyncio.TimeoutError:
                continue
            status = answer.split(b"\r\n")[0].decode(errors="replace") if answer else "closed"
            ends.append((status, time.monotonic() - started))
            return
        ends.append(("head finished unanswered", time.monotonic() - started))
    except (ConnectionError, OSError):
        ends.append(("reset", time.monotonic() - started))
    finally:
        writer.close()


async def idle_upgrade(port, source, ends):
    """Upgrades, then sends nothing; records the close and when it came."""
    import websockets
    started = time.monotonic()
    try:
        sock = socket.create_connection(("127.0.0.1", port), source_address=(source, 0))
        ws = await websockets.connect(f"ws://127.0.0.1:{port}/", sock=sock, compression=None, ping_interval=None,
                                      additional_headers={"x-relay-room": os.urandom(32).hex()}, open_timeout=30)
    except Exception as error:
        ends.append((f"refused: {str(error)[:60]}", time.monotonic() - started))
        return
    try:
        await asyncio.wait_for(ws.recv(), 60)
        ends.append(("message", time.monotonic() - started))
    except websockets.exceptions.ConnectionClosed as closed:
        code = closed.rcvd.code if closed.rcvd else None
        reason = closed.rcvd.reason if closed.rcvd else ""
        ends.append((f"{code} {reason}", time.monotonic() - started))
    except asyncio.TimeoutError:
        ends.append(("never closed", time.monotonic() - started))


async def fresh_pair(port):
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


async def measure(port, seconds):
    latencies = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        try:
            latencies.append(await asyncio.wait_for(fresh_pair(port), 10))
        except Exception:
            latencies.append(10_000.0)
        await asyncio.sleep(0.5)
    return latencies


def figures(latencies):
    ordered = sorted(latencies)
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered), 1),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1), "max_ms": round(ordered[-1], 1)}


def tally(ends):
    out = {}
    for status, after in ends:
        entry = out.setdefault(status, {"count": 0, "min_s": 1e9, "max_s": 0})
        entry["count"] += 1
        entry["min_s"] = round(min(entry["min_s"], after), 1)
        entry["max_s"] = round(max(entry["max_s"], after), 1)
    return out


def measure_apart(port, seconds, results):
    """`measure` in a process of its own: the legitimate pair never waits behind the attackers'
    coroutines in this interpreter."""
    results.put(asyncio.run(measure(port, seconds)))


async def attack(port, args):
    import multiprocessing
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    baseline = context.Process(target=measure_apart, args=(port, 5, results))
    baseline.start()
    baseline_latencies = results.get()
    baseline.join()
    slow_ends, idle_ends = [], []
    sources = [f"127.0.0.{2 + i}" for i in range(args.addresses)]
    during = context.Process(target=measure_apart, args=(port, 32, results))
    during.start()
    tasks = [asyncio.create_task(slow_head(port, sources[i % len(sources)], slow_ends)) for i in range(args.slow)]
    tasks += [asyncio.create_task(idle_upgrade(port, sources[i % len(sources)], idle_ends)) for i in range(args.idle)]
    await asyncio.gather(*tasks)
    during_latencies = results.get()
    during.join()
    return {"baseline_admission": figures(baseline_latencies), "during_attack_admission": figures(during_latencies),
            "slow_heads": tally(slow_ends), "idle_upgrades": tally(idle_ends)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--slow", type=int, default=3000)
    parser.add_argument("--idle", type=int, default=3000)
    parser.add_argument("--addresses", type=int, default=60)
    args = parser.parse_args()
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    port = free_port()
    work = tempfile.mkdtemp(prefix="tether-attack-")
    # The relay's own defaults, but for the upgrade rate (every idle connection is an upgrade).
    env = dict(os.environ, RELAY_WS_RATE_LIMIT="0")
    relay = subprocess.Popen([TETHER, "relay", "--local", "--relay-port", str(port), "--relay-db", os.path.join(work, "relay.db")],
                             cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if not relay.stdout.readline().startswith("relay: listening on"):
        sys.exit("attack: the relay did not start")
    try:
        result = asyncio.run(attack(port, args))
    finally:
        relay.terminate()
        relay.wait(timeout=30)
    result.update({"slow": args.slow, "idle": args.idle, "addresses": args.addresses})
    print(json.dumps(result))


if __name__ == "__main__":
    main()

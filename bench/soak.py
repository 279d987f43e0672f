#!/usr/bin/env python3
"""The relay's soak (issue 18): a release `tether relay` for MINUTES (30 by default) holding
19,000 parked macs and 500 spliced pairs echoing frames, with 50 fresh connections a second of
churn (connect, admit, close); the relay's RSS and open descriptors are sampled every minute.

  bench/soak.py [--minutes 30] [--parked 19000] [--pairs 500] [--rate 10] [--churn 50] [--out FILE]

Prints one JSON line: the samples, the RSS and descriptor slopes (least squares over the samples
after the first minute, per hour), and every error seen (parked macs closed during the hold,
pairs lost or failed, sequence errors, churn failures). Targets: slopes flat within noise, no
descriptor growth, 0 errors.

The load comes from ../shared/bench/wsload (parked macs, pairs) and from this script's own
asyncio client (churn, paced). Everything runs on loopback; the relay's limits are lifted as for
`make bench-relay`, since all the load comes from 127.0.0.x.

  bench/soak.py --service signal [--minutes 30] [--clients 2000] [--churn 10] [--out FILE]

The signaling server's soak: a release `tether signal --local` holding CLIENTS registered idle
clients (challenge, signed `register`, `registered`, then nothing but the answers to the server's
pings) with CHURN fresh clients a second registering and closing; RSS and descriptors every
minute, as above. The clients are this script's own (asyncio `websockets`, Ed25519 from
`cryptography`); signaling.md §6.4's per-IP limits are constants, so the held clients come 16 to
an address (127.1.x.y) and the churn takes turns over enough addresses (127.2.x.y) to stay under
60 upgrades a minute each. Errors: held clients closed during the hold (with their close codes),
churn refused or failed, the server's exit.
"""
import argparse
import asyncio
import base64
import json
import math
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WSLOAD = os.path.join(ROOT, "..", "shared", "bench", "wsload")
TETHER = os.path.join(ROOT, ".build", "release", "tether")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sample(pid):
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return {"t": round(time.monotonic(), 1), "rss_kib": rss, "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def slope_per_hour(points, key):
    """Least-squares slope of `key` against time, per hour (0 with fewer than two points)."""
    if len(points) < 2:
        return 0.0
    xs = [p["t"] for p in points]
    ys = [p[key] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 0.0 if den == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den * 3600


async def churn(port, per_second, until, counts):
    """`per_second` fresh macs a second, each in its own room: upgrade, Hello, Proof, close."""
    import websockets

    async def one():
        try:
            ws = await asyncio.wait_for(websockets.connect(f"ws://127.0.0.1:{port}/", compression=None,
                                                           additional_headers={"x-relay-room": os.urandom(32).hex()}), 10)
            await ws.send('{"v":1,"role":"mac"}')
            await asyncio.wait_for(ws.recv(), 10)
            await ws.send("{}")
            result = json.loads(await asyncio.wait_for(ws.recv(), 10))
            await ws.close()
            counts["ok" if result.get("ok") else "refused"] += 1
        except Exception as error:
            counts["failed"] += 1
            counts.setdefault("first_failure", repr(error)[:200])

    tasks = set()
    next_at = time.monotonic()
    while time.monotonic() < until:
        task = asyncio.create_task(one())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        next_at += 1 / per_second
        await asyncio.sleep(max(0, next_at - time.monotonic()))
    await asyncio.gather(*tasks)


async def signal_client(port, source, counts, hold=None):
    """Registers a fresh ID from `source`; with `hold`, stays until it is set and counts a close
    that came first, else closes at once. Counts `ok`, `refused` (an error or an HTTP refusal)
    or `failed`."""
    import websockets
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    key = Ed25519PrivateKey.generate()
    ident = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex().upper()
    try:
        ws = await asyncio.wait_for(websockets.connect(f"ws://127.0.0.1:{port}/signal", compression=None, ping_interval=None,
                                                       local_addr=(source, 0)), 10)
    except websockets.exceptions.InvalidStatus as refused:
        counts["refused"] += 1
        counts.setdefault("first_refusal", str(refused)[:200])
        return
    except Exception as error:
        counts["failed"] += 1
        counts.setdefault("first_failure", repr(error)[:200])
        return
    try:
        challenge = json.loads(await asyncio.wait_for(ws.recv(), 10))["challenge"]
        signature = key.sign(f"cryptext.register.v2\n{challenge}\n{ident}".encode())
        await ws.send(json.dumps({"type": "register", "v": 2, "id": ident, "sig": base64.b64encode(signature).decode()}))
        answer = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if answer.get("type") != "registered":
            counts["refused"] += 1
            counts.setdefault("first_refusal", str(answer)[:200])
            return
        counts["ok"] += 1
        if hold is None:
            return
        closed = asyncio.ensure_future(ws.wait_closed())
        await asyncio.wait([closed, asyncio.ensure_future(hold.wait())], return_when=asyncio.FIRST_COMPLETED)
        if closed.done():
            code = ws.close_code
            counts["closed_during_hold"][str(code)] = counts["closed_during_hold"].get(str(code), 0) + 1
    except Exception as error:
        counts["failed"] += 1
        counts.setdefault("first_failure", repr(error)[:200])
    finally:
        await ws.close()


def address(block, n):
    """The n-th loopback address of a /16 block (127.block.x.1-250)."""
    return f"127.{block}.{n // 250}.{1 + n % 250}"


async def signal_load(port, args, until):
    """The held clients (16 an address, 200 a second), then paced churn until `until`; the held
    clients close once the churn has stopped."""
    held = {"ok": 0, "refused": 0, "failed": 0, "closed_during_hold": {}}
    churned = {"ok": 0, "refused": 0, "failed": 0}
    release = asyncio.Event()
    holders = []
    for i in range(args.clients):
        holders.append(asyncio.create_task(signal_client(port, address(1, i // 16), held, hold=release)))
        if i % 200 == 199:
            await asyncio.sleep(1)
    # §6.4: 60 upgrades a minute an address; each churn address takes at most 40.
    churn_addresses = max(1, math.ceil(args.churn * 60 / 40))
    tasks = set()
    next_at = time.monotonic()
    n = 0
    while time.monotonic() < until:
        task = asyncio.create_task(signal_client(port, address(2, n % churn_addresses), churned))
        n += 1
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        next_at += 1 / args.churn
        await asyncio.sleep(max(0, next_at - time.monotonic()))
    await asyncio.gather(*tasks)
    release.set()
    await asyncio.gather(*holders)
    return held, churned


def signal_soak(args):
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    seconds = int(args.minutes * 60)
    port = free_port()
    work = tempfile.mkdtemp(prefix="tether-soak-")
    server = subprocess.Popen([TETHER, "signal", "--local", "--signal-port", str(port)], cwd=work, stdout=subprocess.PIPE,
                              stderr=open(os.path.join(work, "signal.log"), "w"), text=True)
    first = server.stdout.readline()
    if not first.startswith("signal: listening on"):
        sys.exit(f"soak: the signaling server did not start: {first}")
    started = time.monotonic()
    samples = [sample(server.pid)]
    stop = threading.Event()

    def sampler():
        while not stop.wait(60) and time.monotonic() < started + seconds:
            samples.append(sample(server.pid))
            print(f"soak: {len(samples) - 1} min: rss {samples[-1]['rss_kib']} KiB, fds {samples[-1]['fds']}", file=sys.stderr, flush=True)

    threading.Thread(target=sampler, daemon=True).start()
    held, churned = asyncio.run(signal_load(port, args, started + seconds))
    stop.set()
    time.sleep(2)
    after = sample(server.pid)
    alive = server.poll() is None
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=60)
    steady = [s for s in samples if s["t"] - samples[0]["t"] >= 60] or samples
    errors = {
        "held_not_registered": args.clients - held["ok"], "held_closed_during_hold": held["closed_during_hold"],
        "held_failed": held["failed"], "churn_failed": churned["failed"], "churn_refused": churned["refused"],
        "server_exited_during_run": not alive, "server_exit": server.returncode,
    }
    summary = {
        "service": "signal", "minutes": args.minutes, "clients": held["ok"], "churn_registered": churned["ok"],
        "churn_per_s": round(churned["ok"] / seconds, 1),
        "rss_slope_kib_per_hour": round(slope_per_hour(steady, "rss_kib")), "fd_slope_per_hour": round(slope_per_hour(steady, "fds"), 1),
        "rss_kib_first": steady[0]["rss_kib"], "rss_kib_last": steady[-1]["rss_kib"],
        "fds_first": steady[0]["fds"], "fds_last": steady[-1]["fds"],
        "after_disconnect": after, "errors": errors,
        "first_failure": held.get("first_failure") or churned.get("first_failure"),
        "first_refusal": held.get("first_refusal") or churned.get("first_refusal"), "samples": samples,
    }
    return json.dumps(summary)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--service", choices=["relay", "signal"], default="relay")
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--parked", type=int, default=19000)
    parser.add_argument("--pairs", type=int, default=500)
    parser.add_argument("--rate", type=int, default=10, help="frames per second per pair")
    parser.add_argument("--clients", type=int, default=2000, help="signal: registered idle clients")
    parser.add_argument("--churn", type=int, help="connections per second (relay 50, signal 10)")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.service == "signal":
        args.churn = args.churn or 10
        line = signal_soak(args)
        print(line)
        if args.out:
            with open(args.out, "w") as f:
                f.write(line + "\n")
        return
    args.churn = args.churn or 50

    # The relay holds every socket of the run; a machine whose hard descriptor limit cannot hold
    # them all (20,000 here, without CAP_SYS_RESOURCE) parks fewer macs, and says so.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    headroom = 2 * args.pairs + 4 * args.churn + 200
    if hard != resource.RLIM_INFINITY and args.parked + headroom > hard:
        print(f"soak: the descriptor limit is {hard}: parking {hard - headroom} macs instead of {args.parked}", file=sys.stderr)
        args.parked = hard - headroom
    seconds = int(args.minutes * 60)
    port = free_port()
    work = tempfile.mkdtemp(prefix="tether-soak-")
    env = dict(os.environ, RELAY_WS_RATE_LIMIT="0", RELAY_MAX_FRAMES_PER_SEC="0", RELAY_MAX_SOCKETS_PER_IP="1000000",
               RELAY_MAX_TOTAL_SOCKETS="1000000", RELAY_MAX_ROOMS="1000000", RELAY_DAILY_BYTE_QUOTA="1000000000000000")
    relay = subprocess.Popen([TETHER, "relay", "--local", "--relay-port", str(port), "--relay-db", os.path.join(work, "relay.db")],
                             cwd=work, env=env, stdout=subprocess.PIPE, stderr=open(os.path.join(work, "relay.log"), "w"), text=True)
    first = relay.stdout.readline()
    if not first.startswith("relay: listening on"):
        sys.exit(f"soak: the relay did not start: {first}")
    target = f"127.0.0.1:{port}"
    started = time.monotonic()
    # The generators hold for the whole run, after their ramp-up.
    park = subprocess.Popen([WSLOAD, "park", "-n", str(args.parked), "-t", str(seconds), "--src-count", "16", target],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    pairs = subprocess.Popen([WSLOAD, "pairs", "-n", str(args.pairs), "-s", "512", "-w", "1", "--rate", str(args.rate), "-t", str(seconds),
                              "--src-count", "16", target], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    samples = []
    stop = threading.Event()

    def sampler():
        while not stop.wait(60) and time.monotonic() < started + seconds:
            samples.append(sample(relay.pid))
            print(f"soak: {len(samples) - 1} min: rss {samples[-1]['rss_kib']} KiB, fds {samples[-1]['fds']}", file=sys.stderr, flush=True)

    samples.append(sample(relay.pid))
    threading.Thread(target=sampler, daemon=True).start()
    counts = {"ok": 0, "refused": 0, "failed": 0}
    asyncio.run(churn(port, args.churn, started + seconds, counts))
    park_result = json.loads(park.communicate()[0].strip().splitlines()[-1])
    pairs_result = json.loads(pairs.communicate()[0].strip().splitlines()[-1])
    stop.set()
    # Once every generator has disconnected: what the relay still holds.
    time.sleep(2)
    after = sample(relay.pid)
    relay.send_signal(signal.SIGTERM)
    relay.wait(timeout=60)

    steady = [s for s in samples if s["t"] - samples[0]["t"] >= 60] or samples
    errors = {
        "parked_closed_during_hold": park_result.get("closed_during_hold"),
        "parked_not_alive_at_end": park_result.get("parked", 0) - park_result.get("alive_at_end", 0),
        "pairs_failed": pairs_result.get("pairs_failed"),
        "pairs_lost": pairs_result.get("pairs_lost"),
        "seq_errors": pairs_result.get("seq_errors"),
        "churn_failed": counts["failed"],
        "churn_refused": counts["refused"],
        "relay_exit": relay.returncode,
    }
    summary = {
        "minutes": args.minutes, "parked": park_result.get("parked"), "pairs_ready": pairs_result.get("pairs_ready"),
        "churn_admitted": counts["ok"], "churn_per_s": round(counts["ok"] / seconds, 1),
        "relayed_frames_per_s": pairs_result.get("relayed_frames_per_s"), "latency_rtt_us": pairs_result.get("latency_rtt_us"),
        "rss_slope_kib_per_hour": round(slope_per_hour(steady, "rss_kib")), "fd_slope_per_hour": round(slope_per_hour(steady, "fds"), 1),
        "rss_kib_first": steady[0]["rss_kib"], "rss_kib_last": steady[-1]["rss_kib"],
        "fds_first": steady[0]["fds"], "fds_last": steady[-1]["fds"],
        "after_disconnect": after, "errors": errors, "first_churn_failure": counts.get("first_failure"), "samples": samples,
    }
    line = json.dumps(summary)
    print(line)
    if args.out:
        with open(args.out, "w") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()

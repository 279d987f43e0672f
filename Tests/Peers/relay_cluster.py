#!/usr/bin/env python3
"""Client side of the three-node relay cluster tests (RelayClusterEndToEndTests), built on
relay_client.py's independent helpers (websockets + cryptography; Ed25519 joins, /register).

The test owns every process (PostgreSQL, the nodes, nginx) and kills or stops them; this driver
only speaks to them as clients would and reports what it saw as JSON on stdout.

Usage: relay_cluster.py SCENARIO ARGS...
  register ROOMS_FILE COUNT URL...    COUNT rooms dealt round-robin over the nodes' hosts, each
         paired and registered at its owner per the shard map, then rejoined with a signed join;
         ROOMS_FILE gets [{room, secret, host}]
  chat SECONDS URL...                  one open-mode pair per node, in a room that node owns;
         prints {"ready": true} once all are spliced, then round trips for SECONDS and reports
         every pair's round-trip times (wall clock) and how it ended
  recover ROOMS_FILE DEAD_HOST KILLED_AT SECONDS URL...   (DEAD_HOST was just killed at wall
         time KILLED_AT) polls the survivors' maps until each of the dead host's rooms has a new
         owner and a signed join there succeeds; reports each room's seconds since the kill
  placement ROOMS_FILE URL...         for every room and node: the owner per that node's map
         admits a signed join, every other node answers 421 naming the owner; unreachable nodes
         are listed as down
  probe NODES_JSON ROOMS_FILE MODE SECONDS   NODES_JSON = [{"url", "admin"}]; per node, a signed
         join of a registered room it owns, an open join in a fresh room, POST /attest/challenge
         and the admin /readyz; MODE once, or until_ok (repeat until every admission and request
         succeeds, or SECONDS pass)
  v1 URL ORIGIN NODE_URL...            (nginx in front of nodes with one origin) rooms spread over
         the nodes; one room paired, chatted, registered and reconnected 3 times, with each node's
         relay_ws_upgrades_total before and after (which node served it)
  v1_again URL ORIGIN ROOM SECRET NODE_URL...   the same room rejoined (signed, both roles) twice
  v1_parked URL ORIGIN COUNT NODE_URL...   (a round-robin proxy in front of a v1 cluster) COUNT rooms
         paired and registered; each room's Mac then stays parked as iTerm2's does, rejoining
         with a signed join 0.5 s after its socket ends and echoing every frame. Prints
         {"ready": ...} once all are parked, then reads commands on stdin:
         `check SECONDS`: every room's phone joins (signed) and exchanges a frame with its Mac,
         retrying until SECONDS pass; prints {"reached", "rooms", "seconds", "last_refusals",
         "mac_rejoins"}. `quit` (or end of input) stops and reports each node's sockets passed on
         (relay_forwarded_total, scraped directly).
"""
import asyncio
import base64
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import urlparse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import relay_client as rc  # noqa: E402
import websockets  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402


def http_base(url):
    parsed = urlparse(url)
    return ("https://" if parsed.scheme == "wss" else "http://") + parsed.netloc


def ssl_context(url):
    return rc.tls_context(url) if url.startswith("wss://") else None


def request(url, path, room_name=None, body=None, method=None, timeout=10):
    """[status, body text, x-relay-owner] of one HTTP request (ws(s):// URLs map to http(s)://)."""
    headers = {"User-Agent": "iTerm2Companion"}
    if room_name:
        headers["x-relay-room"] = room_name
    data = json.dumps(body).encode() if body is not None else (b"{}" if method == "POST" else None)
    req = urllib.request.Request(http_base(url) + path, data=data, headers=headers, method=method or ("POST" if data else "GET"))
    context = ssl_context(url)
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as response:
            return [response.status, response.read().decode(), response.headers.get("x-relay-owner")]
    except urllib.error.HTTPError as error:
        return [error.code, error.read().decode(), error.headers.get("x-relay-owner")]


def shard_map(url):
    status, body, _ = request(url, "/shardmap.json", timeout=3)
    return json.loads(body) if status == 200 else None


def owner(shard, room_name):
    bucket = int(room_name[-4:], 16)
    return next(r["host"] for r in shard["ranges"] if r["low"] <= bucket <= r["high"])


def room_of(shard, host):
    """A fresh room whose bucket the map gives to `host`."""
    while True:
        r = rc.room()
        if owner(shard, r) == host:
            return r


def node_url(host):
    return "ws://" + host + "/"


async def join(url, room_name, role, key=None, origin=None):
    """A whole admission: {"result": ...} with the open socket, or {"close": [code, reason]} /
    {"status": http status, "owner": x-relay-owner} / {"error": text} when it was refused."""
    try:
        ws, _, result = await asyncio.wait_for(rc.admit(url, room_name, role, key, origin), 10)
        return {"result": result, "ws": ws}
    except ConnectionClosed as closed:
        return {"close": [closed.rcvd.code, closed.rcvd.reason] if closed.rcvd else None}
    except InvalidStatus as refused:
        return {"status": refused.response.status_code, "owner": refused.response.headers.get("x-relay-owner")}
    except (OSError, asyncio.TimeoutError) as error:
        return {"error": type(error).__name__}


async def signed_join(url, room_name, secret, role="mac", origin=None):
    origin = origin or http_base(url)
    outcome = await join(url, room_name, role, rc.join_key(secret), origin)
    ok = outcome.get("result", {}).get("ok") is True
    if "ws" in outcome:
        await outcome.pop("ws").close()
    return ok, outcome


def load_rooms(path):
    with open(path) as handle:
        return json.load(handle)


async def register(rooms_file, count, urls):
    shard = shard_map(urls[0])
    hosts = [urlparse(u).netloc for u in urls]
    rooms, statuses, rejoined = [], [], 0
    for index in range(count):
        host = hosts[index % len(hosts)]
        url = node_url(host)
        r = room_of(shard, host)
        secret = os.urandom(32)
        key = rc.join_key(secret)
        mac = await join(url, r, "mac")
        phone = await join(url, r, "phone")
        token = phone.get("result", {}).get("registrationToken", "")
        status, _, _ = request(url, "/register", r, {"registrationToken": token, "verifier": rc.verifier_of(key)})
        statuses.append(status)
        for leg in (phone, mac):
            if "ws" in leg:
                await leg["ws"].close()
        ok, _ = await signed_join(url, r, secret)
        rejoined += ok
        rooms.append({"room": r, "secret": secret.hex(), "host": host})
    with open(rooms_file, "w") as handle:
        json.dump(rooms, handle)
    per_host = {h: sum(1 for r in rooms if r["host"] == h) for h in hosts}
    return {"statuses": statuses, "rejoined": rejoined, "per_host": per_host, "map_version": shard["version"]}


async def chat_pair(url, seconds, ready, go):
    host = urlparse(url).netloc
    r = room_of(shard_map(url), host)
    mac = (await join(url, r, "mac"))["ws"]
    phone = (await join(url, r, "phone"))["ws"]
    ready.set_result(True) if not ready.done() else None
    await go.wait()
    times, ended, sequence = [], None, 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            sequence += 1
            payload = sequence.to_bytes(8, "big") + os.urandom(56)
            await mac.send(payload)
            got = await asyncio.wait_for(phone.recv(), 5)
            if got != payload:
                ended = "mismatch"
                break
            await phone.send(got[::-1])
            back = await asyncio.wait_for(mac.recv(), 5)
            if back != payload[::-1]:
                ended = "mismatch"
                break
            times.append(time.time())
            await asyncio.sleep(0.05)
    except ConnectionClosed as closed:
        ended = [closed.rcvd.code, closed.rcvd.reason] if closed.rcvd else "closed"
    except asyncio.TimeoutError:
        ended = "timeout"
    await mac.close()
    await phone.close()
    gaps = [b - a for a, b in zip(times, times[1:])]
    return {"host": host, "round_trips": len(times), "times": times, "max_gap": max(gaps) if gaps else None, "ended": ended}


async def chat(seconds, urls):
    loop = asyncio.get_running_loop()
    readies = [loop.create_future() for _ in urls]
    go = asyncio.Event()
    tasks = [asyncio.create_task(chat_pair(url, seconds, ready, go)) for url, ready in zip(urls, readies)]
    await asyncio.gather(*readies)
    print(json.dumps({"ready": True}), flush=True)
    go.set()
    return {"pairs": await asyncio.gather(*tasks)}


async def recover(rooms_file, dead_host, killed_at, seconds, urls):
    rooms = [r for r in load_rooms(rooms_file) if r["host"] == dead_host]
    refusals = []

    async def one(entry, index):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            shard = await asyncio.to_thread(shard_map, urls[index % len(urls)])
            index += 1
            heir = owner(shard, entry["room"]) if shard else dead_host
            if heir != dead_host:
                ok, outcome = await signed_join(node_url(heir), entry["room"], bytes.fromhex(entry["secret"]))
                if ok:
                    return {"room": entry["room"], "owner": heir, "seconds": time.time() - killed_at, "version": shard["version"]}
                refusals.append(outcome)
            await asyncio.sleep(0.1)
        return {"room": entry["room"], "owner": None, "seconds": None}

    results = await asyncio.gather(*(one(entry, i) for i, entry in enumerate(rooms)))
    return {"rooms": results, "refusals_meanwhile": refusals[:10], "refusal_count": len(refusals)}


async def placement(rooms_file, urls):
    rooms = load_rooms(rooms_file)
    maps, down = {}, []
    for url in urls:
        try:
            maps[urlparse(url).netloc] = shard_map(url)
        except OSError:
            down.append(urlparse(url).netloc)
    served, violations = {}, []
    for entry in rooms:
        r, secret = entry["room"], bytes.fromhex(entry["secret"])
        owners = {owner(m, r) for m in maps.values()}
        if len(owners) != 1:
            violations.append({"room": r, "owners": sorted(owners)})
            continue
        heir = owners.pop()
        for host in maps:
            if host == heir:
                ok, outcome = await signed_join(node_url(host), r, secret)
                for _ in range(6):
                    if ok or outcome.get("status") != 503:
                        break
                    await asyncio.sleep(0.5)
                    ok, outcome = await signed_join(node_url(host), r, secret)
                if ok:
                    served[r] = host
                else:
                    violations.append({"room": r, "node": host, "owner": heir, "outcome": outcome})
            else:
                refused = await join(node_url(host), r, "mac")
                # 503 with Retry-After is a node fencing itself while its renewals lag (a loaded
                # test machine): a client retries it, and so does this check, for up to 3 s.
                for _ in range(6):
                    if refused.get("status") != 503:
                        break
                    await asyncio.sleep(0.5)
                    refused = await join(node_url(host), r, "mac")
                if refused.get("status") != 421 or refused.get("owner") != heir:
                    if "ws" in refused:
                        await refused.pop("ws").close()
                    violations.append({"room": r, "node": host, "owner": heir, "outcome": refused})
        if heir in down:
            violations.append({"room": r, "owner": heir, "outcome": "owner down"})
    per_host = {h: sum(1 for v in served.values() if v == h) for h in maps}
    return {"versions": {h: m["version"] for h, m in maps.items()}, "down": down, "served": len(served),
            "per_host": per_host, "violations": violations[:10]}


async def probe_node(node, rooms):
    url = node["url"]
    host = urlparse(url).netloc
    mine = next(r for r in rooms if r["host"] == host)
    shard = shard_map(url)
    out = {"host": host}
    ok, outcome = await signed_join(url, mine["room"], bytes.fromhex(mine["secret"]))
    out["signed"] = outcome
    fresh = await join(url, room_of(shard, host), "mac")
    if "ws" in fresh:
        await fresh.pop("ws").close()
    out["open"] = fresh
    out["http"] = request(url, "/attest/challenge", room_of(shard, host), method="POST")[:2]
    status, body, _ = request("http://127.0.0.1:%d" % node["admin"], "/readyz")
    out["readyz"] = [status, body]
    metrics = request("http://127.0.0.1:%d" % node["admin"], "/metrics")[1]
    out["metrics"] = {line.split()[0]: float(line.split()[1]) for line in metrics.splitlines()
                      if line.startswith(("relay_storage_available ", "relay_storage_errors_total ", "relay_shard_map_version "))}
    out["ok"] = ok and fresh.get("result", {}).get("ok") is True and out["http"][0] == 200 and status == 200
    return out


async def probe(nodes, rooms_file, mode, seconds):
    rooms = load_rooms(rooms_file)
    started = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        results = [await probe_node(node, rooms) for node in nodes]
        if mode == "once" or all(r["ok"] for r in results) or time.monotonic() - started > seconds:
            return {"nodes": results, "attempts": attempts, "seconds": time.monotonic() - started}
        await asyncio.sleep(0.2)


def upgrades(node_urls):
    """Each node's relay_ws_upgrades_total (a direct loopback scrape of the node, not via nginx)."""
    counts = []
    for url in node_urls:
        try:
            text = rc.scrape(url)[2]
            # Absent until the node's first upgrade (as the reference writes it): a node none of
            # the random rooms hashed to (about 2% of runs with 12 rooms over 3 nodes) has 0.
            counts.append(int(float(next((line.split()[1] for line in text.splitlines() if line.startswith("relay_ws_upgrades_total ")), "0"))))
        except OSError:
            counts.append(None)
    return counts


async def exchange(mac, phone, count=20):
    frames = [os.urandom(n) for n in (1, 125, 126, 4000, 65536)] * (count // 5)
    for frame in frames:
        await mac.send(frame)
        if await asyncio.wait_for(phone.recv(), 5) != frame:
            return False
        await phone.send(frame[::-1])
        if await asyncio.wait_for(mac.recv(), 5) != frame[::-1]:
            return False
    return True


async def v1_cycle(url, origin, r, secret):
    """Both legs rejoin with signed joins and chat; closes them."""
    key = rc.join_key(secret)
    mac = await join(url, r, "mac", key, origin)
    phone = await join(url, r, "phone", key, origin)
    out = {"mac": mac.get("result"), "phone": phone.get("result")}
    if "ws" in mac and "ws" in phone:
        out["chat"] = await exchange(mac["ws"], phone["ws"])
    for leg in (phone, mac):
        if "ws" in leg:
            await leg["ws"].close()
    out["refused"] = {k: v for k, v in list(mac.items()) + list(phone.items()) if k not in ("ws", "result")}
    return out


async def v1(url, origin, node_urls):
    out = {}
    # Spread: rooms through nginx land on several nodes (each node's live rooms, scraped directly).
    parked = [await join(url, rc.room(), "mac") for _ in range(12)]
    out["parked_ok"] = sum(1 for p in parked if p.get("result", {}).get("ok") is True)
    await asyncio.sleep(0.3)
    live = []
    for node in node_urls:
        text = rc.scrape(node)[2]
        live.append(int(float(next(line.split()[1] for line in text.splitlines() if line.startswith("relay_rooms_live ")))))
    out["rooms_live"] = live
    for p in parked:
        if "ws" in p:
            await p["ws"].close()
    await asyncio.sleep(0.3)

    # One room: paired, chatted, registered, then reconnected three times with signed joins.
    before = upgrades(node_urls)
    r = rc.room()
    secret = os.urandom(32)
    key = rc.join_key(secret)
    mac = await join(url, r, "mac")
    phone = await join(url, r, "phone")
    out["paired"] = [mac.get("result", {}).get("ok"), phone.get("result", {}).get("ok")]
    out["chat"] = await exchange(mac["ws"], phone["ws"])
    token = phone["result"]["registrationToken"]
    out["register"] = request(url, "/register", r, {"registrationToken": token, "verifier": rc.verifier_of(key)})[:2]
    await phone["ws"].close()
    await mac["ws"].close()
    out["cycles"] = [await v1_cycle(url, origin, r, secret) for _ in range(3)]
    out["upgrades"] = [None if a is None else b - a for a, b in zip(before, upgrades(node_urls))]
    out["room"], out["secret"] = r, secret.hex()
    return out


async def v1_again(url, origin, r, secret_hex, node_urls):
    before = upgrades(node_urls)
    cycles = [await v1_cycle(url, origin, r, bytes.fromhex(secret_hex)) for _ in range(2)]
    after = upgrades(node_urls)
    return {"cycles": cycles, "upgrades": [None if a is None or b is None else b - a for a, b in zip(before, after)]}


def refusal_of(outcome):
    """A refused join in a few words, for the report."""
    if "close" in outcome:
        return "close %s" % (outcome["close"],)
    if "status" in outcome:
        return "status %s" % outcome["status"]
    if "error" in outcome:
        return outcome["error"]
    return "result %s" % (outcome.get("result"),)


async def parked_mac(url, origin, r, secret, stats):
    """A Mac that stays parked: rejoins 0.5 s after its socket ends, echoes every frame."""
    key = rc.join_key(secret)
    while True:
        outcome = await join(url, r, "mac", key, origin)
        ws = outcome.get("ws")
        if ws is not None and outcome["result"].get("ok") is True:
            stats["parked"].add(r)
            try:
                async for message in ws:
                    await ws.send(message)
            except ConnectionClosed:
                pass
            stats["parked"].discard(r)
        elif ws is not None:
            await ws.close()
        stats["rejoins"] += 1
        await asyncio.sleep(0.5)


async def reach(url, origin, r, secret, seconds):
    """The room's phone joins (signed) and gets a frame echoed by its Mac; retried every 0.3 s.
    Returns (seconds taken or None, last refusal)."""
    key = rc.join_key(secret)
    started = time.monotonic()
    last = None
    while time.monotonic() - started < seconds:
        outcome = await join(url, r, "phone", key, origin)
        ws = outcome.get("ws")
        if ws is not None:
            if outcome["result"].get("ok") is True:
                payload = os.urandom(32)
                try:
                    await ws.send(payload)
                    echoed = await asyncio.wait_for(ws.recv(), 3)
                except (ConnectionClosed, asyncio.TimeoutError) as error:
                    echoed, last = None, type(error).__name__
                await ws.close()
                if echoed == payload:
                    return time.monotonic() - started, last
            else:
                last = refusal_of(outcome)
                await ws.close()
        else:
            last = refusal_of(outcome)
        await asyncio.sleep(0.3)
    return None, last


def forwarded_sockets(node_urls):
    """Each node's relay_forwarded_total{kind="socket",outcome="passed"} (0 before the first)."""
    counts = []
    for node in node_urls:
        text = rc.scrape(node)[2]
        prefix = 'relay_forwarded_total{kind="socket",outcome="passed"} '
        counts.append(sum(int(float(line[len(prefix):])) for line in text.splitlines() if line.startswith(prefix)))
    return counts


async def v1_parked(url, origin, count, node_urls):
    rooms = []
    for _ in range(count):
        r, secret = rc.room(), os.urandom(32)
        mac = await join(url, r, "mac")
        phone = await join(url, r, "phone")
        token = phone.get("result", {}).get("registrationToken", "")
        status = request(url, "/register", r, {"registrationToken": token, "verifier": rc.verifier_of(rc.join_key(secret))})[0]
        for leg in (phone, mac):
            if "ws" in leg:
                await leg["ws"].close()
        rooms.append((r, secret, status))
    stats = {"parked": set(), "rejoins": 0}
    macs = [asyncio.create_task(parked_mac(url, origin, r, secret, stats)) for r, secret, _ in rooms]
    deadline = time.monotonic() + 20
    while len(stats["parked"]) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    print(json.dumps({"ready": len(stats["parked"]), "registered": [status for _, _, status in rooms]}), flush=True)
    reader = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    checks = 0
    while True:
        line = (await reader.readline()).decode().split()
        if not line or line[0] == "quit":
            break
        if line[0] == "check":
            results = await asyncio.gather(*(reach(url, origin, r, secret, float(line[1])) for r, secret, _ in rooms))
            taken = [t for t, _ in results]
            print(json.dumps({"reached": sum(1 for t in taken if t is not None), "rooms": count, "seconds": taken,
                              "last_refusals": [last for t, last in results if t is None], "mac_rejoins": stats["rejoins"]}), flush=True)
            checks += 1
    for task in macs:
        task.cancel()
    return {"checks": checks, "forwarded": forwarded_sockets(node_urls)}


if __name__ == "__main__":
    scenario, args = sys.argv[1], sys.argv[2:]
    if scenario == "register":
        result = asyncio.run(register(args[0], int(args[1]), args[2:]))
    elif scenario == "chat":
        result = asyncio.run(chat(float(args[0]), args[1:]))
    elif scenario == "recover":
        result = asyncio.run(recover(args[0], args[1], float(args[2]), float(args[3]), args[4:]))
    elif scenario == "placement":
        result = asyncio.run(placement(args[0], args[1:]))
    elif scenario == "probe":
        result = asyncio.run(probe(json.loads(args[0]), args[1], args[2], float(args[3])))
    elif scenario == "v1":
        result = asyncio.run(v1(args[0], args[1], args[2:]))
    elif scenario == "v1_parked":
        result = asyncio.run(v1_parked(args[0], args[1], int(args[2]), args[3:]))
    elif scenario == "v1_again":
        result = asyncio.run(v1_again(args[0], args[1], args[2], args[3], args[4:]))
    else:
        sys.exit("unknown scenario " + scenario)
    print(json.dumps(result), flush=True)

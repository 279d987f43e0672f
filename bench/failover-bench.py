#!/usr/bin/env python3
"""Shard failover time (relay.md §8 with a postgres:// RELAY_DB), over repeated runs: a node is
killed with -9 and the clock runs until every room it owned is admitted again (a signed join) on
the survivor the new map names. Each run starts from nothing: a fresh database on a PostgreSQL
server of this program's own (initdb, loopback, default settings), three `tether relay` nodes
with a map dealt evenly over them, 30 registered rooms by default (10 per node, `--rooms-per-node`); then the kill, measured by
Tests/Peers/relay_cluster.py's `recover` (the clients poll the survivors' maps every 0.1 s, as a
re-resolving client would). Prints one JSON line per run and a summary with the median and max.
The killed node last renewed its lease up to a second before the kill, so the lease lapses
between TTL − 1 s and TTL after it; the survivors' rounds run each second after that.

Usage: bench/failover-bench.py [--runs 10] [--lease-ms 10000] [--rooms-per-node 10] [--tether .build/release/tether]
(`make bench-failover`)
"""
import argparse
import asyncio
import glob
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "Tests", "Peers"))
import relay_cluster  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    def __init__(self, work):
        self.bin = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))[-1]
        self.port = free_port()
        self.data = os.path.join(work, "pg")
        # The server's tools start in its own directory: the caller's may be one the postgres user
        # cannot enter (a clone in root's 0700 home), where they fail.
        self.as_pg = (["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []) + ["env", "--chdir", work]
        if os.getuid() == 0:
            shutil.chown(work, "postgres", "postgres")
        self.run("initdb", "-D", self.data, "-U", "tether", "--auth=trust", "-E", "UTF8")
        with open(os.path.join(self.data, "postgresql.conf"), "a") as conf:
            conf.write(f"listen_addresses = '127.0.0.1'\nport = {self.port}\nunix_socket_directories = '{work}'\nmax_connections = 100\n")
        self.run("pg_ctl", "-D", self.data, "-l", os.path.join(work, "pg.log"), "-w", "start")
        self.databases = 0

    def run(self, tool, *args):
        subprocess.run(self.as_pg + [os.path.join(self.bin, tool), *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def create(self):
        self.databases += 1
        name = f"failover_{self.databases}"
        subprocess.run([os.path.join(self.bin, "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "tether", name], check=True)
        return f"postgres://tether@127.0.0.1:{self.port}/{name}"

    def stop(self):
        subprocess.run(self.as_pg + [os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "immediate", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_node(tether, port, database, lease_ms, work, extra=()):
    log = open(os.path.join(work, f"node-{port}.log"), "a")
    process = subprocess.Popen([tether, "relay", "--local", "--relay-port", str(port), "--relay-db", database,
                                "--relay-lease-ttl-ms", str(lease_ms), "--relay-ws-rate-limit", "0", *extra],
                               stdout=subprocess.PIPE, stderr=log, text=True)
    line = process.stdout.readline()
    if not line.startswith("relay: listening on"):
        raise RuntimeError(f"node {port} did not start: {line!r}")
    return process


def one_run(tether, pg, lease_ms, work, rooms_per_node=10):
    database = pg.create()
    ports = [free_port() for _ in range(3)]
    hosts = [f"127.0.0.1:{p}" for p in ports]
    third = 65536 // 3
    shard = {"version": 1, "ranges": [{"low": 0, "high": third - 1, "host": hosts[0]},
                                      {"low": third, "high": 2 * third - 1, "host": hosts[1]},
                                      {"low": 2 * third, "high": 65535, "host": hosts[2]}]}
    map_path = os.path.join(work, f"map-{pg.databases}.json")
    with open(map_path, "w") as f:
        json.dump(shard, f)
    nodes = [start_node(tether, ports[0], database, lease_ms, work, ["--relay-shard-map", map_path])]
    nodes += [start_node(tether, p, database, lease_ms, work) for p in ports[1:]]
    urls = [relay_cluster.node_url(h) for h in hosts]
    try:
        time.sleep(1.5)  # every node adopts the map, and renews its lease for a whole TTL before it may elect
        rooms_file = os.path.join(work, f"rooms-{pg.databases}.json")
        registered = asyncio.run(relay_cluster.register(rooms_file, rooms_per_node * 3, urls))
        if registered["rejoined"] != rooms_per_node * 3:
            raise RuntimeError(f"registration failed: {registered}")
        # Survivors must have been healthy for a whole lease and the 5 s reconnect grace before
        # they may fail a node over.
        time.sleep(max(0.0, lease_ms / 1000 + 5 - 1.5))
        killed_at = time.time()
        nodes[0].kill()
        nodes[0].wait()
        recovered = asyncio.run(relay_cluster.recover(rooms_file, hosts[0], killed_at, lease_ms / 1000 + 30, urls[1:]))
        seconds = [r["seconds"] for r in recovered["rooms"]]
        if None in seconds:
            raise RuntimeError(f"rooms never came back: {recovered}")
        return {"rooms": len(seconds), "first_s": round(min(seconds), 3), "all_back_s": round(max(seconds), 3),
                "heirs": sorted({r["owner"] for r in recovered["rooms"]})}
    finally:
        for node in nodes:
            if node.poll() is None:
                node.terminate()
                node.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--lease-ms", type=int, default=10_000)
    parser.add_argument("--tether", default=os.path.join(HERE, "..", ".build", "release", "tether"))
    parser.add_argument("--rooms-per-node", type=int, default=10, help="registered rooms each node owns (the killed node's are measured)")
    opts = parser.parse_args()
    work = tempfile.mkdtemp(prefix="failover-bench-")
    pg = Postgres(work)
    try:
        results = []
        for run in range(opts.runs):
            result = one_run(os.path.abspath(opts.tether), pg, opts.lease_ms, work, rooms_per_node=opts.rooms_per_node)
            result["run"] = run + 1
            print(json.dumps(result), flush=True)
            results.append(result["all_back_s"])
        lease = opts.lease_ms / 1000
        summary = {"failover": True, "runs": len(results), "lease_ttl_s": lease,
                   "median_s": round(statistics.median(results), 3), "max_s": round(max(results), 3)}
        print(json.dumps(summary), flush=True)
    finally:
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

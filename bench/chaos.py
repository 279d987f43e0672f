#!/usr/bin/env python3
"""Chaos harness for a Tether cluster on PostgreSQL (relay.md §8, push.md, signaling.md).

Starts a PostgreSQL server of its own (initdb, loopback, as bench/failover-bench.py does), three
`tether relay` nodes sharing a shard map, two `tether signal` nodes sharing a registry and two
`tether push` nodes sharing a registration store, each with an admin listener, and keeps live
clients busy against them: registered relay rooms rejoining with signed joins, new rooms and push
registrations being acknowledged, signaling clients on both nodes signalling across them. Then,
until --minutes pass (or --trials faults ran), it injects one fault at a time:

  node-kill   kill -9 of one node (relay, push or signal); it is restarted on the same port once
              the fault has been measured (for a relay node: once its rooms were failed over)
  node-stop   SIGSTOP of one node for longer than the lease, then SIGCONT
  pg-stall    SIGSTOP of every PostgreSQL process for --stall-s, then SIGCONT
  pg-restart  PostgreSQL stopped (fast), down for --pg-down-s, started again

and after each one checks the invariants the issue states:

  registrations_kept     no acknowledged registration lost: every relay room acknowledged by a
                         200 from /register is still established (an unsigned join is refused
                         `signature required`) and admits a signed join at its owner; every push
                         registration acknowledged with a 200 still exists; every signaling
                         client registers again at its node and reaches the other node
  single_owner           no room served by two nodes at once: all nodes publish the same map,
                         every node but the owner answers 421 naming it, and a relay node that
                         was frozen or killed admits none of the rooms that moved away meanwhile
                         when it resumes (signed joins queued at it before SIGCONT); a
                         signaling ID is never live on both nodes (registering a live client's
                         ID at the other node is refused; a frozen node whose clients' IDs were
                         taken over at the other node no longer forwards for their old sockets)
  buckets_kept           no bucket moved away from a node that stayed alive and reachable: the
                         map before the fault against the map a lease and the reconnect grace
                         after it (a spurious failover needs that long to happen), and again
                         before the next fault
  served_within_bound    every room is admitted again within --recover-bound-s of the fault's
                         end (of the kill, for a killed relay node: failover), every push and
                         signal node serves again within it
  readyz_truthful        during a PostgreSQL stall (or outage) longer than --readyz-bound-s each
                         node's /readyz answers non-200 within that bound and never 200 again
                         until the database is back; after the fault every node is ready again
                         within --recover-bound-s
  answered_within_bound  requests sent while PostgreSQL is stalled or down (a signed join and
                         POST /attest/challenge per relay node, registrations at each push and
                         signal node, each second) are answered, whatever the answer, within
                         --answer-bound-s
  capacity_restored      a relay node that lost its buckets to a failover (killed, stopped past
                         its lease) owns an even share again by itself within two leases plus the
                         reconnect grace (and 5 s) of settling; the operator's `tether shardmap
                         rebalance` is run only as the fallback, and needing it counts

A node that exits without being killed is reported as a crash (and restarted). Prints one JSON
line per fault (stdout; progress goes to stderr) and a summary line: faults of each kind,
violations per invariant, crashes. Exits 1 when an invariant was violated or a node crashed, 2
when the harness itself could not run a step (a node that would not start, a failed setup) or was
interrupted. Every process it started (and PostgreSQL) is resumed, stopped and its directory
removed on exit, Ctrl-C included; --keep keeps the directory with every node's log.

Usage: bench/chaos.py [--minutes 30] [--seed N] [--lease-ms 10000] [--rooms 60]
                      [--fault KIND --trials N] [--stall-s S] [--tether .build/release/tether]
  e.g. bench/chaos.py --fault pg-stall --trials 20 --stall-s 30      (`make chaos CHAOS_ARGS=...`)
"""
import argparse
import asyncio
import collections
import ctypes
import glob
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "Tests", "Peers"))
import chaos_clients as cc  # noqa: E402

FAULTS = ("node-kill", "node-stop", "pg-stall", "pg-restart")
INVARIANTS = ("registrations_kept", "single_owner", "buckets_kept", "served_within_bound", "readyz_truthful", "answered_within_bound",
              "capacity_restored")
# relay.md §8 / RelayServer+Leases: a node fails others over only after renewing for a whole lease
# plus the database pool's longest reconnect back-off (5 s); a spurious failover after a database
# fault therefore shows up no sooner than that after the fault ends.
RECONNECT_GRACE_S = 5.0
SIGNAL_SECRET = "chaos-cluster-secret-" + os.urandom(16).hex()


def mono():
    return time.monotonic()


def log(*parts):
    print("chaos:", *parts, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent():
    """Runs in each child before exec: if the harness dies without cleaning up (kill -9), the
    kernel kills its nodes too instead of leaving them bound to their ports."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG


def tail(path, lines):
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 4000))
            return f.read().decode(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def examples(items, n=5):
    return list(items)[:n]


# ------------------------------------------------------------------------------------------------
# Processes: PostgreSQL and the nodes
# ------------------------------------------------------------------------------------------------

class Postgres:
    """A PostgreSQL server of the harness's own, as in bench/failover-bench.py, plus the faults:
    every server process frozen and resumed, and a restart."""

    def __init__(self, work):
        self.bin = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))[-1]
        self.port = free_port()
        self.work = work
        self.data = os.path.join(work, "pg")
        self.frozen = []
        # The server's tools start in its own directory: the caller's may be one the postgres user
        # cannot enter (a clone in root's 0700 home), where they fail.
        self.as_pg = (["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []) + ["env", "--chdir", work]
        if os.getuid() == 0:
            shutil.chown(work, "postgres", "postgres")
        self.run("initdb", "-D", self.data, "-U", "tether", "--auth=trust", "-E", "UTF8")
        with open(os.path.join(self.data, "postgresql.conf"), "a") as conf:
            conf.write(f"listen_addresses = '127.0.0.1'\nport = {self.port}\nunix_socket_directories = '{work}'\nmax_connections = 200\n")
        self.run("pg_ctl", "-D", self.data, "-l", os.path.join(work, "pg.log"), "-w", "start")

    def tool(self, name, *args):
        return self.as_pg + [os.path.join(self.bin, name), *args]

    def run(self, name, *args):
        subprocess.run(self.tool(name, *args), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)

    def create(self, name):
        subprocess.run([os.path.join(self.bin, "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "tether", name], check=True, timeout=60)
        return f"postgres://tether@127.0.0.1:{self.port}/{name}"

    def pids(self):
        """The postmaster first, then its children (backends, checkpointer, walwriter, ...):
        freezing only the postmaster would leave the nodes' open connections working."""
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                master = int(f.readline())
        except (OSError, ValueError):
            return []
        children = []
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                with open(stat) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == master:
                    children.append(int(stat.split("/")[2]))
            except (OSError, IndexError, ValueError):
                continue
        return [master] + children

    def freeze(self):
        # The postmaster first, so it forks no new backend that would escape the freeze.
        self.frozen = self.pids()
        for pid in self.frozen:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        return len(self.frozen)

    def thaw(self):
        for pid in reversed(self.frozen):
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.frozen = []

    async def ctl(self, *args, timeout=90):
        process = await asyncio.create_subprocess_exec(*self.tool("pg_ctl", "-D", self.data, *args),
                                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        try:
            return await asyncio.wait_for(process.wait(), timeout)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
            return None

    async def stop(self):
        return await self.ctl("-m", "fast", "-w", "stop")

    async def start(self):
        return await self.ctl("-l", os.path.join(self.work, "pg.log"), "-w", "start")

    def diagnose(self):
        """What the server looks like when the cluster will not settle: its processes' states (a
        T is a frozen one) and the end of its log, since the directory is removed at exit."""
        states = collections.Counter()
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    states[f.read().rsplit(")", 1)[1].split()[0]] += 1
            except OSError:
                states["gone"] += 1
        return {"process_states": dict(states), "log": tail(os.path.join(self.work, "pg.log"), 6)}

    def shutdown(self):
        self.thaw()
        for pid in self.pids():   # anything frozen by a run that was interrupted mid-fault
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        subprocess.run(self.tool("pg_ctl", "-D", self.data, "-m", "immediate", "stop"),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)


class Node:
    """One `tether relay|push|signal` process, restartable on the same ports (a relay node's
    host string in the shard map is its identity, so a restarted node must keep it)."""

    def __init__(self, kind, index, argv, work):
        self.kind, self.index = kind, index
        self.name = f"{kind}{index}"
        self.argv = argv
        self.work = work
        self.port = int(argv[argv.index(f"--{kind}-port") + 1])
        self.admin = int(argv[argv.index(f"--{kind}-admin-port") + 1])
        self.log_path = os.path.join(work, f"{self.name}.log")
        self.process = None
        self.stopped = False
        self.starts = 0
        self.killed = False   # down because the harness killed it, not because it died

    @property
    def host(self):
        return f"127.0.0.1:{self.port}"

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def serving(self):
        return self.alive() and not self.stopped

    async def start(self, extra=(), timeout=30.0):
        """Starts the process and waits for its `<kind>: listening on` line. Output goes to a log
        file rather than a pipe nobody reads, which would block the node once full."""
        with open(self.log_path, "ab") as out:
            offset = out.tell()
            out.write(f"=== chaos: start {self.starts + 1} at {time.strftime('%H:%M:%S')}\n".encode())
            out.flush()
            self.process = subprocess.Popen(list(self.argv) + list(extra), stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                            cwd=self.work, start_new_session=True, preexec_fn=die_with_parent)
        self.starts += 1
        self.stopped = False
        self.killed = False
        marker = f"{self.kind}: listening on".encode()
        deadline = mono() + timeout
        while mono() < deadline:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                if marker in f.read():
                    return
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.process.returncode} at start (see {self.log_path})")
            await asyncio.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start within {timeout} s")

    def kill(self):
        if self.alive():
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait()
        self.stopped = False
        self.killed = True

    def crashed(self):
        """Exited although nobody killed it: (exit status, the log's last lines), else None."""
        if self.process is None or self.alive() or self.killed:
            return None
        return {"node": self.name, "status": self.process.returncode, "log": tail(self.log_path, 4)}

    def freeze(self):
        self.process.send_signal(signal.SIGSTOP)
        self.stopped = True

    def thaw(self):
        if self.alive():
            self.process.send_signal(signal.SIGCONT)
        self.stopped = False

    def shutdown(self):
        if not self.alive():
            return
        self.process.send_signal(signal.SIGCONT)   # a stopped process would never act on SIGTERM
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# ------------------------------------------------------------------------------------------------
# Observers used during a database fault
# ------------------------------------------------------------------------------------------------

class ReadyWatch:
    """Polls every node's admin /readyz every 0.25 s (each poll its own task, so a hung /readyz
    does not slow the sampling) and keeps (sent, answered, status) for each poll."""

    def __init__(self, nodes, interval=0.25, timeout=1.0):
        self.nodes = nodes
        self.interval, self.timeout = interval, timeout
        self.samples = {n.name: [] for n in nodes}
        self.tasks = []
        self.done = asyncio.Event()

    async def poll(self, node):
        sent = mono()
        status, _ = await cc.readyz(node.admin, self.timeout)
        self.samples[node.name].append((sent, mono(), status))

    async def run(self):
        while not self.done.is_set():
            self.tasks += [asyncio.create_task(self.poll(n)) for n in self.nodes]
            try:
                await asyncio.wait_for(self.done.wait(), self.interval)
            except asyncio.TimeoutError:
                pass
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def ready_again(self, node, since):
        return any(sent >= since and status == 200 for sent, _, status in self.samples[node.name])

    def analyse(self, node, t0, t_end, bound):
        """Not-ready latency from the start of the outage, 200s answered while it lasted (after
        the bound), polls that got no answer, and when it was ready again after the end."""
        samples = self.samples[node.name]
        not_ready = [answered - t0 for sent, answered, status in samples if sent >= t0 and answered <= t_end and status not in (None, 200)]
        first = min(not_ready) if not_ready else None
        # A 200 sent after the node said not ready, while the database is still down, is a node
        # that forgot the outage (a check that passes on a cached or unrelated success).
        flapped = [round(answered - t0, 2) for sent, answered, status in samples
                   if first is not None and sent >= t0 + first and answered <= t_end and status == 200]
        again = [answered - t_end for sent, answered, status in samples if sent >= t_end and status == 200]
        return {"not_ready_after_s": round(first, 2) if first is not None else None,
                "ready_again_while_down": len(flapped), "ready_again_while_down_at_s": examples(flapped, 3),
                "ready_after_bound": sum(1 for sent, answered, status in samples if sent >= t0 + bound and answered <= t_end and status == 200),
                "unanswered_polls": sum(1 for sent, _, status in samples if t0 <= sent <= t_end and status is None),
                "ready_again_after_s": round(min(again), 2) if again else None}


class Prober:
    """Requests sent while the database is stalled or down, a round each second: per relay node a
    signed join of a room it owns and POST /attest/challenge, per push node a registration
    (profiles alternating), per signal node a registration every other second. Each waits up to
    the answer bound + 2 s, so a late answer is told apart from none."""

    def __init__(self, harness, shard):
        self.h = harness
        self.shard = shard
        self.timeout = harness.opts.answer_bound_s + 2
        self.results = []
        self.tasks = []
        self.done = asyncio.Event()

    async def probe(self, node, what, call):
        sent = mono()
        try:
            answered = await call()
        except Exception as error:   # a client bug must not stop the fault; it is reported as such
            answered = f"harness error {type(error).__name__}: {error}"
        latency = mono() - sent
        self.results.append({"node": node.name, "what": what, "sent": sent, "seconds": round(latency, 2),
                             "answered": answered is True, "outcome": None if answered is True else answered})

    def relay_calls(self, node):
        mine = [r for r in self.h.ledger.rooms if cc.owner(self.shard, r["room"]) == node.host]
        fresh = cc.room_of(self.shard, node.host) if node.host in cc.buckets_of(self.shard) else cc.rc.room()

        async def challenge():
            answer = await cc.attest_challenge(node.host, fresh, self.timeout)
            return True if answer.status is not None else answer.text()

        async def join():
            if not mine:
                return "no room"
            entry = self.h.rng.choice(mine)
            out = await cc.signed_join(node.host, entry["room"], bytes.fromhex(entry["secret"]), self.timeout)
            # Any answer counts, a refusal or a closed connection included; only silence does not.
            return True if out.get("error") != "timeout" else "timeout"
        return [("attest/challenge", challenge), ("signed join", join)]

    def push_call(self, node, turn):
        async def register():
            registration, answer = await (cc.register_mytty if turn % 2 == 0 else cc.register_iterm2)(node.port, self.timeout)
            if registration:
                self.h.ledger.add_push(registration, node.name)
            return True if answer.status is not None else answer.text()
        return ("register " + ("mytty" if turn % 2 == 0 else "iterm2"), register)

    def signal_call(self, node):
        async def register():
            outcome, peer = await cc.register_at(node.port, cc.Ed25519PrivateKey.generate(), "probe", self.timeout)
            if peer is not None:
                await peer.close()
            return True if outcome != "timeout" else outcome
        return ("register", register)

    async def run(self):
        turn = 0
        while not self.done.is_set():
            for node in self.h.nodes:
                if not node.serving():
                    continue
                calls = []
                if node.kind == "relay":
                    calls = self.relay_calls(node)
                elif node.kind == "push":
                    calls = [self.push_call(node, turn)]
                elif turn % 2 == 0:
                    calls = [self.signal_call(node)]
                self.tasks += [asyncio.create_task(self.probe(node, what, call)) for what, call in calls]
            turn += 1
            try:
                await asyncio.wait_for(self.done.wait(), 1.0)
            except asyncio.TimeoutError:
                pass
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def analyse(self, bound):
        late = [r for r in self.results if r["answered"] and r["seconds"] > bound]
        unanswered = [r for r in self.results if not r["answered"]]
        per = collections.Counter()
        for r in late + unanswered:
            per[f"{r['node']} {r['what']}"] += 1
        answered = [r["seconds"] for r in self.results if r["answered"]]
        return {"sent": len(self.results), "answered_within": len(self.results) - len(late) - len(unanswered),
                "late": len(late), "unanswered": len(unanswered), "max_answer_s": max(answered) if answered else None,
                "by_request": dict(per), "unanswered_examples": [{k: r[k] for k in ("node", "what", "outcome")} for r in unanswered[:4]]}


# ------------------------------------------------------------------------------------------------
# What the clients were told was durable
# ------------------------------------------------------------------------------------------------

class Ledger:
    """Every registration a server acknowledged, so none may be missing after a fault."""

    def __init__(self):
        self.rooms = []   # {"room", "secret", "node"}: /register answered 200
        self.push = []    # chaos_clients registrations: answered 200 with their identifiers

    def add_room(self, entry, node):
        self.rooms.append(dict(entry, node=node))

    def add_push(self, registration, node):
        self.push.append(dict(registration, node=node))


# ------------------------------------------------------------------------------------------------
# The harness
# ------------------------------------------------------------------------------------------------

class Harness:
    def __init__(self, opts, work):
        self.opts = opts
        self.work = work
        self.lease_s = opts.lease_ms / 1000
        self.rng = random.Random(opts.seed)
        self.ledger = Ledger()
        self.nodes = []
        self.records = []
        self.harness_errors = []
        self.crashes = []               # nodes that exited without being killed
        self.current_fault = 0
        self.load = collections.Counter()
        self.map_cache = (0.0, None)
        self.last_map = None            # the map after the previous fault's checks (and any rebalance)
        self.last_disruption = mono()
        self.signal_lock = asyncio.Lock()
        self.signal_pairs = []
        self.background = []

    # --- cluster ----------------------------------------------------------------------------

    def relays(self):
        return [n for n in self.nodes if n.kind == "relay"]

    def by_kind(self, kind):
        return [n for n in self.nodes if n.kind == kind]

    def setup_processes(self):
        self.pg = Postgres(self.work)
        self.relay_db = self.pg.create("chaos_relay")
        push_db = self.pg.create("chaos_push")
        signal_db = self.pg.create("chaos_signal")
        # APNs is never reached: a bound socket that does not listen refuses every connection at
        # once, so a Profile M push answers 502 `apns unreachable` and keeps its registration.
        self.apns_hole = socket.socket()
        self.apns_hole.bind(("127.0.0.1", 0))
        apns = f"https://127.0.0.1:{self.apns_hole.getsockname()[1]}"
        key = os.path.join(self.work, "AuthKey.p8")
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        tether = self.opts.tether
        for i in range(3):
            self.nodes.append(Node("relay", i, [tether, "relay", "--local", "--relay-port", str(free_port()), "--relay-db", self.relay_db,
                                                "--relay-lease-ttl-ms", str(self.opts.lease_ms), "--relay-ws-rate-limit", "0",
                                                "--relay-attest-rate-limit", "0", "--relay-max-sockets-per-ip", "100000",
                                                "--relay-admin-port", str(free_port())], self.work))
        for i in range(2):
            cluster = free_port()
            self.nodes.append(Node("signal", i, [tether, "signal", "--local", "--signal-port", str(free_port()),
                                                 "--signal-admin-port", str(free_port()), "--signal-db", signal_db,
                                                 "--signal-node-url", f"ws://127.0.0.1:{cluster}/cluster", "--signal-cluster-port", str(cluster),
                                                 "--signal-cluster-secret", SIGNAL_SECRET, "--signal-lease-ttl-ms", str(self.opts.lease_ms)], self.work))
        for i in range(2):
            self.nodes.append(Node("push", i, [tether, "push", "--push-port", str(free_port()), "--push-admin-port", str(free_port()),
                                               "--push-db", push_db, "--push-profiles", "mytty,iterm2",
                                               "--apns-team-id", "ABCDE12345", "--apns-key-id", "FGHIJ67890", "--apns-private-key-file", key,
                                               "--apns-production-url", apns, "--apns-sandbox-url", apns,
                                               "--push-register-limit", "0", "--push-register-rate-limit", "0"], self.work))

    async def start_nodes(self):
        relays = self.relays()
        third = 65536 // 3
        shard = {"version": 1, "ranges": [{"low": 0, "high": third - 1, "host": relays[0].host},
                                          {"low": third, "high": 2 * third - 1, "host": relays[1].host},
                                          {"low": 2 * third, "high": 65535, "host": relays[2].host}]}
        map_path = os.path.join(self.work, "map.json")
        with open(map_path, "w") as f:
            json.dump(shard, f)
        # The first node publishes the map before the others start, so none of them starts
        # without one.
        await relays[0].start(["--relay-shard-map", map_path])
        for node in self.nodes[1:]:
            await node.start()

    def shutdown(self):
        for task in self.background:
            task.cancel()
        for node in self.nodes:
            try:
                node.shutdown()
            except Exception as error:
                log(f"stopping {node.name}: {error}")
        if getattr(self, "pg", None):
            try:
                self.pg.shutdown()
            except Exception as error:
                log(f"stopping PostgreSQL: {error}")
        if getattr(self, "apns_hole", None):
            self.apns_hole.close()

    async def rebalance(self):
        """`tether shardmap rebalance`: how an operator gives a node that came back after a
        failover its share again (it reads the leases, so the node must have renewed first)."""
        process = await asyncio.create_subprocess_exec(self.opts.tether, "shardmap", "rebalance", "--relay-db", self.relay_db,
                                                       cwd=self.work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            out, _ = await asyncio.wait_for(process.communicate(), 30)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
            return None, "timeout"
        return process.returncode, out.decode(errors="replace").strip()[-300:]

    # --- reading the cluster -------------------------------------------------------------------

    async def maps(self):
        hosts = [n.host for n in self.relays() if n.serving()]
        got = await asyncio.gather(*(cc.shard_map(h) for h in hosts))
        return dict(zip(hosts, got))

    async def latest_map(self, max_age=0.5):
        """The highest-version map any serving node publishes (what a re-resolving client would
        adopt), cached briefly so hundreds of room pollers do not each fetch it."""
        stamp, shard = self.map_cache
        if shard is not None and mono() - stamp < max_age:
            return shard
        found = [m for m in (await self.maps()).values() if m]
        if found:
            shard = max(found, key=lambda m: m["version"])
            self.map_cache = (mono(), shard)
        return shard

    async def settle(self, timeout):
        """Waits until the cluster is whole again: every node up and /readyz 200, every relay node
        publishing the same map, and every relay node owning buckets (rebalancing once one came
        back with none). Returns (map, detail)."""
        deadline = mono() + timeout
        rebalanced = None
        why = None
        # A node that lost its buckets to a failover gets an even share back by itself once it has
        # renewed for two leases plus the reconnect grace (LeaseRules.restoreAfterMs); the
        # operator's rebalance is only the fallback, and needing it is a violation.
        restore_wait = 2 * self.lease_s + RECONNECT_GRACE_S + 5
        empty_since = None
        restored = {}
        while mono() < deadline:
            for node in self.nodes:
                crash = node.crashed()
                if crash:
                    log(f"{node.name} exited on its own: {crash}")
                    self.crashes.append(dict(crash, at=time.strftime("%H:%M:%S"), fault=self.current_fault))
                    node.killed = True   # reported once; restarted below like a killed node
                if not node.alive():
                    try:
                        await node.start()
                    except RuntimeError as error:
                        why = str(error)
                        await asyncio.sleep(1)
                        continue
            maps = await self.maps()
            versions = {h: (m or {}).get("version") for h, m in maps.items()}
            if None in versions.values() or len({json.dumps(m, sort_keys=True) for m in maps.values()}) != 1:
                why = {"maps": versions}
                await asyncio.sleep(0.5)
                continue
            shard = next(iter(maps.values()))
            owners = cc.buckets_of(shard)
            empty = [n.host for n in self.relays() if n.host not in owners]
            if empty_since is not None and not empty and not restored.get("by_operator"):
                restored = {"by_node_after_s": round(mono() - empty_since, 2)}
                rebalanced = rebalanced or mono()
                self.last_disruption = mono()
            if empty:
                why = {"without_buckets": empty}
                if empty_since is None:
                    empty_since = mono()
                if mono() - empty_since < restore_wait:
                    await asyncio.sleep(0.5)
                    continue
                restored = {"by_operator": True, "missed_after_s": round(mono() - empty_since, 2), "hosts": empty}
                if rebalanced is None or mono() - rebalanced > 3:
                    await asyncio.sleep(1.5)   # the node renews its lease at start; rebalance reads the leases
                    rebalanced = mono()
                    code, out = await self.rebalance()
                    log(f"rebalance ({', '.join(empty)} without buckets): exit {code}: {out}")
                    self.last_disruption = mono()
                await asyncio.sleep(0.5)
                continue
            ready = await asyncio.gather(*(cc.readyz(n.admin) for n in self.nodes))
            not_ready = {n.name: status for n, (status, _) in zip(self.nodes, ready) if status != 200}
            if not_ready:
                why = {"not_ready": not_ready}
                await asyncio.sleep(0.5)
                continue
            self.map_cache = (mono(), shard)
            return shard, {"rebalanced": rebalanced is not None, "version": shard["version"], **({"restored": restored} if restored else {})}
        return await self.latest_map(0), {"unsettled": why}

    # --- live clients ----------------------------------------------------------------------------

    async def register_room(self, host, timeout=5.0):
        shard = await self.latest_map()
        if not shard or host not in cc.buckets_of(shard):
            return False
        entry = cc.new_room_entry(shard, host)
        ok, _ = await cc.pair_and_register(host, entry["room"], bytes.fromhex(entry["secret"]), timeout)
        if ok:
            self.ledger.add_room(entry, host)
        return ok

    async def register_push(self, node, profile, timeout=5.0):
        registration, _ = await (cc.register_mytty if profile == "mytty" else cc.register_iterm2)(node.port, timeout)
        if registration:
            self.ledger.add_push(registration, node.name)
        return registration is not None

    async def setup_clients(self):
        shard, detail = await self.settle(30)
        if "unsettled" in detail:
            raise RuntimeError(f"the cluster did not settle: {detail}")
        hosts = [n.host for n in self.relays()]
        sem = asyncio.Semaphore(8)

        async def one(i):
            async with sem:
                for _ in range(3):
                    if await self.register_room(hosts[i % len(hosts)]):
                        return True
                return False
        registered = sum(await asyncio.gather(*(one(i) for i in range(self.opts.rooms))))
        if registered != self.opts.rooms:
            raise RuntimeError(f"only {registered} of {self.opts.rooms} rooms registered")
        pushes = self.by_kind("push")
        for i in range(self.opts.push_registrations):
            if not await self.register_push(pushes[i % 2], ("mytty", "iterm2")[(i // 2) % 2]):
                raise RuntimeError("a push registration was refused at setup")
        s0, s1 = self.by_kind("signal")
        self.signal_pairs = [(cc.SignalClient("A1", s0.port), cc.SignalClient("B1", s1.port)),
                             (cc.SignalClient("A2", s1.port), cc.SignalClient("B2", s0.port))]
        for a, b in self.signal_pairs:
            for client in (a, b):
                ok, why = await client.connect()
                if not ok:
                    raise RuntimeError(f"signal client {client.name} did not register: {why}")
            for x, y in ((a, b), (b, a)):
                ok, why = await cc.deliver(x, y)
                if not ok:
                    raise RuntimeError(f"signal {x.name} -> {y.name} across nodes: {why}")
        return {"rooms": len(self.ledger.rooms), "per_node": dict(collections.Counter(r["node"] for r in self.ledger.rooms)),
                "push_registrations": len(self.ledger.push), "signal_clients": 4, "map_version": shard["version"]}

    async def run_load(self):
        """The live clients between and during faults. Each call is its own task under a small
        cap, so a hung server leaves at most a few calls waiting instead of stopping the load."""
        sem = asyncio.Semaphore(6)
        turn = 0

        async def bounded(name, call):
            if sem.locked():
                self.load[name + "_skipped"] += 1
                return
            async with sem:
                try:
                    ok = await call()
                except Exception as error:
                    ok = False
                    self.load[f"{name}_error_{type(error).__name__}"] += 1
            self.load[name + ("_ok" if ok else "_failed")] += 1

        async def rejoin():
            shard = await self.latest_map()
            if not shard or not self.ledger.rooms:
                return False
            entry = self.rng.choice(self.ledger.rooms)
            return (await cc.signed_join(cc.owner(shard, entry["room"]), entry["room"], bytes.fromhex(entry["secret"]), 3))["ok"]

        async def new_room():
            shard = await self.latest_map()
            if not shard or len(self.ledger.rooms) >= self.opts.max_rooms:
                return True
            return await self.register_room(self.rng.choice(sorted(cc.buckets_of(shard))), 4)

        async def new_push():
            if len(self.ledger.push) >= self.opts.max_push:
                return True
            node = self.rng.choice(self.by_kind("push"))
            return await self.register_push(node, self.rng.choice(("mytty", "iterm2")), 4)

        async def signal():
            if self.signal_lock.locked():
                return True
            async with self.signal_lock:
                a, b = self.rng.choice(self.signal_pairs)
                return (await cc.deliver(a, b, 3))[0]

        while True:
            tasks = [("rejoin", rejoin)]
            if turn % 4 == 0:
                tasks.append(("register_room", new_room))
            if turn % 4 == 2:
                tasks.append(("register_push", new_push))
            if turn % 6 == 3:
                tasks.append(("signal", signal))
            for name, call in tasks:
                asyncio.create_task(bounded(name, call))
            turn += 1
            await asyncio.sleep(self.opts.load_interval_s)

    # --- checks ----------------------------------------------------------------------------------

    async def check_rooms(self, t_ref, bound):
        """Every acknowledged room admitted again (signed) at the owner the newest map names,
        within `bound` of t_ref; then its registration proven kept. Polls each room every 0.5 s,
        and keeps polling 15 s past the bound so a late room is told apart from a lost one."""
        rooms = list(self.ledger.rooms)
        give_up = t_ref + bound + 15
        sem = asyncio.Semaphore(16)

        async def one(entry):
            secret = bytes.fromhex(entry["secret"])
            last = None
            while True:
                async with sem:
                    shard = await self.latest_map()
                    host = cc.owner(shard, entry["room"]) if shard else None
                    if host:
                        out = await cc.signed_join(host, entry["room"], secret, 3)
                        if out["ok"]:
                            seconds = mono() - t_ref
                            verdict = None
                            for attempt in range(4):
                                verdict, proof = await cc.established(host, entry["room"], 3)
                                if verdict is not None:
                                    break
                                # The bucket may have moved between the two joins: ask the owner
                                # the newest map names.
                                await asyncio.sleep(0.5)
                                host = cc.owner(await self.latest_map(0) or shard, entry["room"])
                            return {"room": entry["room"], "host": host, "seconds": seconds, "established": verdict,
                                    "proof": None if verdict else {k: v for k, v in proof.items() if k != "seconds"}}
                        last = {k: v for k, v in out.items() if k not in ("seconds",)}
                if mono() > give_up:
                    return {"room": entry["room"], "host": host, "seconds": None, "last": last}
                await asyncio.sleep(0.5)

        results = await asyncio.gather(*(one(e) for e in rooms))
        served = [r for r in results if r["seconds"] is not None]
        late = [r for r in served if r["seconds"] > bound]
        never = [r for r in results if r["seconds"] is None]
        lost = [r for r in served if r["established"] is False]
        unproven = [r for r in served if r["established"] is None]
        return {"rooms": len(rooms), "served_within_bound": len(served) - len(late),
                "max_s": round(max(r["seconds"] for r in served), 2) if served else None,
                "late": [{"room": r["room"][-8:], "s": round(r["seconds"], 2), "host": r["host"]} for r in late[:5]], "late_count": len(late),
                "never": [{"room": r["room"][-8:], "host": r["host"], "last": r["last"]} for r in never[:5]], "never_count": len(never),
                "lost": [{"room": r["room"][-8:], "host": r["host"], "proof": r["proof"]} for r in lost[:5]], "lost_count": len(lost),
                "unproven_count": len(unproven)}

    async def check_placement(self):
        """All serving relay nodes publish one map, and for every room each node but the owner
        answers 421 naming it; a 200 from a non-owner means two nodes serve the room."""
        deadline = mono() + 5
        while True:
            maps = await self.maps()
            if None not in maps.values() and len({json.dumps(m, sort_keys=True) for m in maps.values()}) == 1:
                break
            if mono() > deadline:
                return {"maps_agree": False, "versions": {h: (m or {}).get("version") for h, m in maps.items()}}, 1
            await asyncio.sleep(0.5)
        shard = next(iter(maps.values()))
        sem = asyncio.Semaphore(16)
        doubles, odd = [], collections.Counter()

        async def one(entry, host):
            owner = cc.owner(shard, entry["room"])
            if host == owner:
                return
            async with sem:
                status, hint = await cc.misdirected(host, entry["room"])
            if status == 421 and hint == owner:
                return
            if status == 200:
                doubles.append({"room": entry["room"][-8:], "owner": owner, "also": host})
            else:
                odd[f"{host} answered {status} owner={hint}"] += 1

        await asyncio.gather(*(one(e, h) for e in list(self.ledger.rooms) for h in maps))
        return {"maps_agree": True, "version": shard["version"], "served_by_two": doubles[:5], "served_by_two_count": len(doubles),
                "other_answers": dict(odd)}, len(doubles)

    async def stale_probe(self, node, moved):
        """Signed joins sent to a relay node the moment it resumes (or restarts) for rooms whose
        buckets moved away while it was gone: admitting one serves a room its new owner serves."""
        async def one(entry):
            out = await cc.signed_join(node.host, entry["room"], bytes.fromhex(entry["secret"]), 5)
            return entry, out
        results = await asyncio.gather(*(one(e) for e in moved[:20]))
        admitted = [{"room": e["room"][-8:], "seconds": out["seconds"]} for e, out in results if out["ok"]]
        answers = collections.Counter("admitted" if out["ok"] else str(out.get("status") or out.get("close") or out.get("error") or out.get("result"))
                                      for _, out in results)
        return {"probed": len(results), "admitted": admitted, "answers": dict(answers)}, len(admitted)

    def check_buckets(self, before, after, exempt):
        """Buckets each node that stayed alive and reachable owned before and no longer owns."""
        owned_before, owned_after = cc.buckets_of(before), cc.buckets_of(after)
        moved = {}
        for host, buckets in owned_before.items():
            if host in exempt:
                continue
            gone = buckets - owned_after.get(host, set())
            if gone:
                moved[host] = {"buckets": len(gone), "to": sorted({h for h, b in owned_after.items() if b & gone})}
        # One violation per node robbed, however many buckets: the detail says how many.
        return {"version_before": before["version"], "version_after": after["version"], "moved_from_live": moved,
                "exempt": sorted(exempt)}, len(moved)

    async def check_push(self, t_ref, bound):
        """Each push node acknowledges a fresh registration within `bound` of t_ref, and every
        acknowledged registration still exists (a "lost" verdict is confirmed at the other node)."""
        nodes = self.by_kind("push")
        serving = {}
        for node in nodes:
            while True:
                answer_ok = await self.register_push(node, "mytty" if node.index == 0 else "iterm2", 3)
                if answer_ok:
                    serving[node.name] = round(mono() - t_ref, 2)
                    break
                if mono() > t_ref + bound:
                    serving[node.name] = None
                    break
                await asyncio.sleep(0.5)
        sem = asyncio.Semaphore(16)

        async def one(i, registration):
            verdicts = []
            for attempt in range(6):
                node = nodes[(i + attempt) % 2]
                async with sem:
                    exists, answer = await cc.push_registration_exists(node.port, registration, 5)
                verdicts.append((node.name, answer.status, answer.text()[:60]))
                if exists is True:
                    return True, verdicts
                if exists is False and sum(1 for v in verdicts if v[1] in (401, 403)) >= 2:
                    return False, verdicts   # both nodes say so: not a transient answer
                await asyncio.sleep(0.5)
            return None, verdicts

        results = await asyncio.gather(*(one(i, r) for i, r in enumerate(list(self.ledger.push))))
        lost = [v for ok, v in results if ok is False]
        unknown = [v for ok, v in results if ok is None]
        late = [n for n, s in serving.items() if s is None or s > bound]
        return {"registrations": len(results), "lost_count": len(lost), "lost": lost[:3], "no_verdict": len(unknown),
                "no_verdict_examples": unknown[:2], "serving_again_s": serving}, len(lost), len(late)

    async def check_signal(self, t_ref, bound):
        """Every signaling client registered at its node again within `bound`, signals crossing
        between the nodes both ways, and no ID live on both nodes: registering a live client's ID
        at the other node must be refused duplicate_id while the client's socket stays open."""
        async with self.signal_lock:
            deadline = t_ref + bound
            reconnect, unregistered, undelivered, doubles = {}, [], [], []
            troubled = set()   # clients whose state this fault left broken
            for a, b in self.signal_pairs:
                for client in (a, b):
                    if await client.alive():
                        continue
                    while True:   # at least one attempt, even when an earlier client used up the bound
                        ok, why = await client.connect()
                        if ok:
                            reconnect[client.name] = round(mono() - t_ref, 2)
                            break
                        if mono() > deadline:
                            unregistered.append(f"{client.name} not registered again: {why}")
                            troubled.add(client)
                            break
                        await asyncio.sleep(0.5)
            for a, b in self.signal_pairs:
                for x, y in ((a, b), (b, a)):
                    while True:
                        ok, why = await cc.deliver(x, y, 3)
                        if ok or mono() > deadline:
                            break
                        for client in (x, y):
                            if not client.connected():
                                await client.connect()
                        await asyncio.sleep(0.5)
                    if not ok:
                        undelivered.append(f"{x.name} -> {y.name}: {why}")
                        troubled.update((x, y))
            for a, b in self.signal_pairs:
                for client in (a, b):
                    if not client.connected():
                        continue
                    other = next(n for n in self.by_kind("signal") if n.port != client.port)
                    outcome, peer = await cc.register_at(other.port, client.key, "duplicate-probe", 5)
                    if peer is not None:
                        await asyncio.sleep(0.5)
                        if client.connected():
                            doubles.append(f"{client.name} live at port {client.port} and registered again at {other.name}")
                            troubled.add(client)
                        await peer.close()
            # A client left unroutable or doubled would fail every later fault's check too and
            # blame it on the wrong fault: it starts the next one with a fresh connection.
            for client in troubled:
                await client.connect()
            return ({"reconnected_s": reconnect, "failures": (unregistered + undelivered)[:5], "id_live_on_two_nodes": doubles,
                     "reconnected_after_check": sorted(c.name for c in troubled)},
                    len(unregistered), len(undelivered), len(doubles))

    async def signal_takeover(self, frozen):
        """While `frozen` is stopped past its lease, its clients' IDs register at the other node,
        as clients that gave up on it would (retried for 4 s: the other node frees the IDs only
        once the lease has lapsed by the database's clock)."""
        other = next(n for n in self.by_kind("signal") if n is not frozen)
        held = [c for pair in self.signal_pairs for c in pair if c.port == frozen.port and c.connected()]
        takeovers = []
        for client in held:
            deadline = mono() + 4
            while True:
                outcome, peer = await cc.register_at(other.port, client.key, "takeover-" + client.name, 3)
                if peer is not None or mono() > deadline:
                    break
                await asyncio.sleep(0.5)
            takeovers.append((client, outcome, peer))
        return takeovers

    async def signal_after_resume(self, takeovers):
        """Once the frozen node runs again, an ID taken over at the other node must no longer be
        served by it: a signal its old socket sends is not forwarded. If it is, both nodes serve
        one live ID."""
        await asyncio.sleep(1.0)
        partners = {x.name: y for a, b in self.signal_pairs for x, y in ((a, b), (b, a))}
        results, doubles = {}, 0
        for client, outcome, peer in takeovers:
            if peer is None:
                results[client.name] = {"takeover": outcome}
                continue
            still, why = await cc.deliver(client, partners[client.name], 3)
            results[client.name] = {"takeover": "registered", "old_socket_still_served": still}
            doubles += still
            await peer.close()
        return results, doubles

    async def check_readyz_back(self, t_ref, bound, watch=None):
        """Every node answers /readyz 200 within `bound` of t_ref."""
        back = {}
        while True:
            for node in self.nodes:
                if node.name in back:
                    continue
                if watch is not None and watch.ready_again(node, t_ref):
                    back[node.name] = True
                    continue
                status, _ = await cc.readyz(node.admin)
                if status == 200:
                    back[node.name] = True
            missing = [n.name for n in self.nodes if n.name not in back]
            if not missing or mono() > t_ref + bound:
                return {"not_ready_after_bound": missing}, len(missing)
            await asyncio.sleep(0.25)

    # --- faults ------------------------------------------------------------------------------------

    def diagnose(self):
        return {"postgres": self.pg.diagnose(), "nodes": {n.name: tail(n.log_path, 2) for n in self.nodes}}

    async def restart(self, node):
        """A node that will not start again is the harness's problem to report, not a reason to
        stop the run: the next settle tries again."""
        try:
            await node.start()
        except RuntimeError as error:
            self.harness_errors.append(f"fault {self.current_fault}: {error}")
            log(str(error))

    async def during_database_fault(self, shard, hold):
        """Runs `hold` (the stall or the outage) while /readyz is polled and requests are sent."""
        watch = ReadyWatch([n for n in self.nodes if n.kind in self.opts.readyz_services])
        prober = Prober(self, shard)
        watcher = asyncio.create_task(watch.run())
        probing = asyncio.create_task(prober.run())
        t0 = mono()
        try:
            extra = await hold()
        finally:
            t_end = mono()
            prober.done.set()
        return watch, watcher, prober, probing, t0, t_end, extra

    async def fault(self, number, kind, target):
        opts = self.opts
        bound = opts.recover_bound_s
        self.current_fault = number
        record = {"fault": number, "kind": kind, "target": target.name if target else "postgres", "at": time.strftime("%H:%M:%S")}
        checks = {name: {"ok": None} for name in INVARIANTS}

        def verdict(name, violations, detail):
            entry = checks[name]
            entry["violations"] = entry.get("violations", 0) + violations
            entry["ok"] = entry["violations"] == 0
            entry.setdefault("detail", {}).update(detail)

        # A whole cluster to start from, quiet long enough that the survivors of a node fault are
        # allowed to fail it over (a lease and the reconnect grace of healthy renewals).
        shard, settled = await self.settle(bound + 30)
        record["settle"] = settled
        if "unsettled" in settled:
            self.harness_errors.append(f"fault {number}: cluster unsettled before the fault: {settled['unsettled']}")
            record["diagnosis"] = self.diagnose()
        if settled.get("restored", {}).get("by_operator"):
            verdict("capacity_restored", 1, {"missed": settled["restored"]})
        elif "restored" in settled:
            verdict("capacity_restored", 0, settled["restored"])
        if self.last_map is not None and shard is not None and not settled.get("rebalanced"):
            # Nothing was injected since the last fault's checks: no node may have lost a bucket.
            detail, moved = self.check_buckets(self.last_map, shard, exempt=set())
            if moved:
                verdict("buckets_kept", moved, {"between_faults": detail})
        quiet = self.last_disruption + self.lease_s + RECONNECT_GRACE_S + 1 - mono()
        if quiet > 0:
            await asyncio.sleep(quiet)
            shard = await self.latest_map(0) or shard
        before = shard
        self.load.clear()
        log(f"fault {number}: {kind} {record['target']} (map v{before['version']}, {len(self.ledger.rooms)} rooms, {len(self.ledger.push)} push)")

        exempt = set()
        t_fault = mono()
        durations = {}
        db_fault = kind in ("pg-stall", "pg-restart")
        if kind == "node-kill":
            target.kill()
            durations["killed_at_s"] = 0
            if target.kind == "relay":
                exempt = {target.host}
                # The fault's end is the kill itself: failover must bring the dead node's rooms
                # back, while it stays dead.
                rooms = await self.check_rooms(t_fault, bound)
                t_end = t_fault
                durations["down_s"] = round(mono() - t_fault, 2)
                now_map = await self.latest_map(0) or before
                moved = [e for e in self.ledger.rooms if cc.owner(before, e["room"]) == target.host
                         and cc.owner(now_map, e["room"]) != target.host]
                await self.restart(target)
                stale, doubles = await self.stale_probe(target, moved)
                verdict("single_owner", doubles, {"restarted_node": stale})
            else:
                await asyncio.sleep(opts.node_down_s)
                await self.restart(target)
                t_end = mono()
                durations["down_s"] = round(t_end - t_fault, 2)
                rooms = None
        elif kind == "node-stop":
            target.freeze()
            await asyncio.sleep(opts.node_stop_s)
            if target.kind == "relay":
                exempt = {target.host}
                self.map_cache = (0.0, None)
                now_map = await self.latest_map(0) or before
                moved = [e for e in self.ledger.rooms if cc.owner(before, e["room"]) == target.host
                         and cc.owner(now_map, e["room"]) != target.host]
                # The joins are on the wire, queued in the frozen node's socket backlog, when it
                # resumes: what it does first is what a client racing the resume would see.
                probing = asyncio.create_task(self.stale_probe(target, moved))
                await asyncio.sleep(0.2)
                target.thaw()
                t_end = mono()
                stale, doubles = await probing
                stale["moved_while_stopped"] = len(moved)
                verdict("single_owner", doubles, {"resumed_node": stale})
            elif target.kind == "signal":
                async with self.signal_lock:
                    takeovers = await self.signal_takeover(target)
                    target.thaw()
                    t_end = mono()
                    taken, doubles = await self.signal_after_resume(takeovers)
                verdict("single_owner", doubles, {"resumed_signal_node": taken})
            else:
                target.thaw()
                t_end = mono()
            durations["stopped_s"] = round(t_end - t_fault, 2)
            rooms = None
        elif kind == "pg-stall":
            async def hold():
                frozen = self.pg.freeze()
                try:
                    await asyncio.sleep(opts.stall_s)
                finally:
                    self.pg.thaw()
                return {"processes_frozen": frozen}
        else:
            async def hold():
                stopped = await self.pg.stop()
                await asyncio.sleep(opts.pg_down_s)
                started = await self.pg.start()
                if started != 0:
                    self.harness_errors.append(f"fault {number}: pg_ctl start answered {started}")
                return {"pg_ctl_stop": stopped, "pg_ctl_start": started}
        if db_fault:
            watch, watcher, prober, probing, t0, t_end, extra = await self.during_database_fault(before, hold)
            durations["database_s"] = round(t_end - t0, 2)
            record.update(extra)
            rooms = None

        # Recovery, measured from the end of the fault.
        if rooms is None:
            rooms = await self.check_rooms(t_end, bound)
        verdict("served_within_bound", rooms["late_count"] + rooms["never_count"],
                {"rooms": {k: rooms[k] for k in ("rooms", "served_within_bound", "max_s", "late", "late_count", "never", "never_count")}})
        verdict("registrations_kept", rooms["lost_count"], {"rooms": {k: rooms[k] for k in ("lost", "lost_count", "unproven_count")}})
        # After a relay kill the fault "ends" at the kill (failover is what is timed), but push
        # and signal are only looked at once that is measured: their clock starts now.
        t_services = mono() if kind == "node-kill" and target.kind == "relay" else t_end
        push, push_lost, push_late = await self.check_push(t_services, bound)
        verdict("registrations_kept", push_lost, {"push": push})
        verdict("served_within_bound", push_late, {"push_serving_again_s": push["serving_again_s"]})
        signal_detail, signal_unregistered, signal_failures, signal_doubles = await self.check_signal(t_services, bound)
        verdict("registrations_kept", signal_unregistered, {"signal": signal_detail})
        verdict("served_within_bound", signal_failures, {"signal_failures": signal_detail["failures"]})
        verdict("single_owner", signal_doubles, {"signal_ids_live_twice": signal_detail["id_live_on_two_nodes"]})

        if db_fault:
            back, missing = await self.check_readyz_back(t_end, bound, watch)
            watch.done.set()
            await watcher
            await probing
            per_node = {n.name: watch.analyse(n, t0, t_end, opts.readyz_bound_s) for n in watch.nodes}
            if t_end - t0 > opts.readyz_bound_s:
                # One violation per node: not ready too late (or never), or ready again too soon.
                slow = {name: a["not_ready_after_s"] for name, a in per_node.items()
                        if a["not_ready_after_s"] is None or a["not_ready_after_s"] > opts.readyz_bound_s}
                flapped = {name: a["ready_again_while_down"] for name, a in per_node.items() if a["ready_again_while_down"]}
                verdict("readyz_truthful", len(set(slow) | set(flapped)),
                        {"not_ready_late_or_never": slow, "ready_again_while_database_down": flapped})
            verdict("readyz_truthful", missing, back)
            checks["readyz_truthful"]["detail"]["per_node"] = per_node
            answered = prober.analyse(opts.answer_bound_s)
            verdict("answered_within_bound", answered["late"] + answered["unanswered"], answered)
        else:
            back, missing = await self.check_readyz_back(t_end, bound)
            verdict("readyz_truthful", missing, back)

        placement, doubles = await self.check_placement()
        verdict("single_owner", doubles, {"placement": placement})

        # A spurious failover needs a lease and the reconnect grace of healthy renewals after the
        # fault, so the map is compared only once that much time has passed.
        wait = t_end + opts.observe_s - mono()
        if wait > 0:
            await asyncio.sleep(wait)
        after = await self.latest_map(0)
        if after is not None:
            detail, moved = self.check_buckets(before, after, exempt)
            verdict("buckets_kept", moved, detail)
        # Whole again before the next fault: a node that lost its buckets gets a share back
        # (rebalance), and that map is the one the next fault's start is compared with.
        self.last_map, settled = await self.settle(bound + 30)
        record["resettled"] = settled
        if "unsettled" in settled:
            record["diagnosis"] = self.diagnose()
        self.last_disruption = mono()

        record["durations"] = dict(durations, fault_to_checked_s=round(mono() - t_fault, 2))
        record["checks"] = checks
        record["violations"] = sum(c.get("violations", 0) for c in checks.values())
        record["node_crashes"] = [c for c in self.crashes if c["fault"] == number]
        record["load"] = dict(self.load)
        return record

    async def run(self):
        start = mono()
        self.setup_processes()
        await self.start_nodes()
        setup = await self.setup_clients()
        print(json.dumps({"setup": setup, "seed": self.opts.seed, "lease_s": self.lease_s, "recover_bound_s": self.opts.recover_bound_s,
                          "nodes": {n.name: {"port": n.port, "admin": n.admin} for n in self.nodes}, "work": self.work}), flush=True)
        self.background.append(asyncio.create_task(self.run_load()))
        self.last_disruption = mono()
        kinds = [self.opts.fault] if self.opts.fault != "all" else list(FAULTS)
        targets = []
        deadline = start + self.opts.minutes * 60 if self.opts.minutes else None
        number = 0
        while True:
            if self.opts.trials is not None and number >= self.opts.trials:
                break
            if deadline is not None and mono() >= deadline:
                break
            kind = kinds[number % len(kinds)] if self.opts.order == "roundrobin" else self.rng.choice(kinds)
            target = None
            if kind.startswith("node-"):
                if not targets:   # every node in turn, in a seeded order
                    targets = [n for n in self.nodes if n.kind in self.opts.node_kinds]
                    self.rng.shuffle(targets)
                target = targets.pop()
            number += 1
            record = await self.fault(number, kind, target)
            self.records.append(record)
            print(json.dumps(record), flush=True)

    def summary(self, interrupted=False):
        violations = {name: sum(r["checks"][name].get("violations", 0) for r in self.records) for name in INVARIANTS}
        failed = {name: [r["fault"] for r in self.records if r["checks"][name].get("violations")] for name in INVARIANTS}
        return {"summary": True, "interrupted": interrupted, "seed": self.opts.seed, "faults": len(self.records),
                "injected": dict(collections.Counter(r["kind"] + ("" if r["target"] == "postgres" else f" {r['target'][:-1]}") for r in self.records)),
                "violations": violations, "faults_with_violations": {k: v for k, v in failed.items() if v},
                "node_crashes": self.crashes[:10], "rooms": len(self.ledger.rooms), "push_registrations": len(self.ledger.push),
                "harness_errors": self.harness_errors[:10],
                "ok": not any(violations.values()) and not self.crashes and not self.harness_errors}


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, help="inject faults until this much time has passed (default 30, or unlimited with --trials)")
    parser.add_argument("--fault", choices=("all",) + FAULTS, default="all", help="inject only this kind")
    parser.add_argument("--trials", type=int, help="stop after this many faults")
    parser.add_argument("--order", choices=("roundrobin", "random"), default="roundrobin", help="how fault kinds follow each other")
    parser.add_argument("--seed", type=int, help="seeds the choice of targets and of kinds with --order random (default: random, printed)")
    parser.add_argument("--lease-ms", type=int, default=10_000, help="RELAY_LEASE_TTL_MS and SIGNAL_LEASE_TTL_MS")
    parser.add_argument("--rooms", type=int, default=60, help="registered relay rooms at the start, dealt over the nodes")
    parser.add_argument("--max-rooms", type=int, default=300, help="the live clients register rooms until there are this many")
    parser.add_argument("--push-registrations", type=int, default=12, help="push registrations at the start")
    parser.add_argument("--max-push", type=int, default=300, help="the live clients register with the push relay until this many")
    parser.add_argument("--load-interval-s", type=float, default=0.5, help="the live clients' pace (a rejoin each interval)")
    parser.add_argument("--stall-s", type=float, default=15, help="how long PostgreSQL stays SIGSTOPped")
    parser.add_argument("--pg-down-s", type=float, default=3, help="how long PostgreSQL stays down in a restart")
    parser.add_argument("--node-stop-s", type=float, help="how long a node stays SIGSTOPped (default: the lease + 3 s)")
    parser.add_argument("--node-down-s", type=float, default=2, help="how long a killed push or signal node stays down")
    parser.add_argument("--node-kinds", default="relay,push,signal", help="which nodes node faults pick from")
    parser.add_argument("--recover-bound-s", type=float, help="rooms served and nodes ready again within this (default: the lease + 10 s)")
    parser.add_argument("--answer-bound-s", type=float, default=5, help="every request answered within this during a database fault")
    parser.add_argument("--readyz-bound-s", type=float, default=5, help="/readyz not ready within this of a database fault")
    parser.add_argument("--readyz-services", default="relay,push,signal", help="whose /readyz must turn not ready during a database fault")
    parser.add_argument("--observe-s", type=float, help="how long after a fault the shard map is compared with the one before "
                                                        f"(default: the lease + {RECONNECT_GRACE_S:g} s reconnect grace + 3 s)")
    parser.add_argument("--tether", default=os.path.join(HERE, "..", ".build", "release", "tether"))
    parser.add_argument("--keep", action="store_true", help="keep the work directory (node and PostgreSQL logs)")
    opts = parser.parse_args(argv)
    lease = opts.lease_ms / 1000
    opts.tether = os.path.abspath(opts.tether)
    opts.seed = opts.seed if opts.seed is not None else random.randrange(1 << 32)
    opts.node_stop_s = opts.node_stop_s if opts.node_stop_s is not None else lease + 3
    opts.recover_bound_s = opts.recover_bound_s if opts.recover_bound_s is not None else lease + 10
    opts.observe_s = opts.observe_s if opts.observe_s is not None else lease + RECONNECT_GRACE_S + 3
    if opts.minutes is None and opts.trials is None:
        opts.minutes = 30
    opts.readyz_services = set(opts.readyz_services.split(","))
    opts.node_kinds = set(opts.node_kinds.split(","))
    if not os.access(opts.tether, os.X_OK):
        parser.error(f"no tether binary at {opts.tether} (build it, or pass --tether)")
    return opts


def main():
    opts = parse()
    work = tempfile.mkdtemp(prefix="tether-chaos-")
    os.chmod(work, 0o755)
    harness = Harness(opts, work)
    # SIGTERM and SIGHUP end the run like Ctrl-C: the cleanup below runs, nothing is left frozen.
    def interrupt(*_):
        raise KeyboardInterrupt()
    for signo in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signo, interrupt)
    # Started in the background by a script, SIGINT arrives ignored; Ctrl-C must still clean up.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupted, failed = False, None
    try:
        asyncio.run(harness.run())
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted; cleaning up")
    except Exception as error:   # setup failures and harness bugs: reported, then cleaned up
        failed = f"{type(error).__name__}: {error}"
        harness.harness_errors.append(failed)
        log(f"stopped: {failed}")
        traceback.print_exc(file=sys.stderr)
    finally:
        harness.shutdown()
        if opts.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    summary = harness.summary(interrupted)
    print(json.dumps(summary), flush=True)
    if any(summary["violations"].values()) or harness.crashes:
        sys.exit(1)
    if harness.harness_errors or interrupted:
        sys.exit(2)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Drives the real `tether mac` / `tether phone` / `tether unpair` binaries as a script would:
pipes for standard input and output (the commands' scriptable mode), a real `tether relay`
process, and checks what each side prints.

Usage: peer_cli.py TETHER_BINARY SCENARIO
Exit 0 and a last line `PASS <scenario>` when every check of the scenario held.
"""
import base64
import json
import os
import re
import shutil
import socket
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

TETHER = os.path.abspath(sys.argv[1])
SCENARIO = sys.argv[2]
WORK = tempfile.mkdtemp(prefix="tether-cli-")
SAS_LINE = re.compile(r"^\d{6}$")


LOG_LOCK = threading.Lock()


def log(*parts):
    # One write per line under a lock: reader threads and the scenario log at the same time.
    with LOG_LOCK:
        sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
        sys.stdout.flush()


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Peer:
    """One `tether` process with piped standard streams; each stream's lines are kept in order
    and read through a cursor of their own, so waiting on one stream never skips the other."""

    def __init__(self, name, args, env=None):
        self.name = name
        self.out = []
        self.err = []
        self.cursor = {"out": 0, "err": 0}
        self.changed = threading.Condition()
        self.proc = subprocess.Popen([TETHER] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1, cwd=WORK,
                                     env=dict(os.environ, **(env or {})))
        self.readers = [threading.Thread(target=self._read, args=(self.proc.stdout, self.out, "out"), daemon=True),
                        threading.Thread(target=self._read, args=(self.proc.stderr, self.err, "err"), daemon=True)]
        for reader in self.readers:
            reader.start()

    def _read(self, stream, lines, tag):
        for line in stream:
            line = line.rstrip("\n")
            log(f"  [{self.name} {tag}] {line[:160]}")
            with self.changed:
                lines.append(line)
                self.changed.notify_all()

    def type(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, predicate, timeout=20, what="a line", stream="out"):
        """The next line on `stream` (after the last one matched there) that satisfies `predicate`."""
        lines = self.out if stream == "out" else self.err
        deadline = time.time() + timeout
        with self.changed:
            while True:
                while self.cursor[stream] < len(lines):
                    line = lines[self.cursor[stream]]
                    self.cursor[stream] += 1
                    if predicate(line):
                        return line
                left = deadline - time.time()
                if left <= 0:
                    raise AssertionError(f"{self.name}: no {what} within {timeout} s")
                self.changed.wait(left)

    def said(self, text, timeout=5, stream="err"):
        """Whether any line on `stream`, already read or arriving within `timeout`, contains
        `text`: each stream has its own reader thread, so a line on one may land just after a
        line printed later on the other."""
        lines = self.out if stream == "out" else self.err
        deadline = time.time() + timeout
        with self.changed:
            while not any(text in line for line in lines):
                left = deadline - time.time()
                if left <= 0:
                    return False
                self.changed.wait(left)
            return True

    def expect_exit(self, timeout=20):
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} did not exit within {timeout} s")
        for reader in self.readers:  # they end at the streams' EOF, with the last lines taken
            reader.join(timeout=5)
        return code

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Relay:
    def __init__(self, port=None, db="relay.db", args=(), env=None, local=True):
        self.port = port or free_port()
        self.log_path = os.path.join(WORK, f"relay-{self.port}.log")
        self.db = db if db.startswith("postgres://") else os.path.join(WORK, db)
        self.args = list(args)
        self.env = env or {}
        self.local = local
        RELAYS.append(self)
        self.start()

    @property
    def origin(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        argv = [TETHER, "relay"] + (["--local"] if self.local else []) + ["--relay-port", str(self.port), "--relay-db", self.db] + self.args
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(self.log_path, "a"), text=True, cwd=WORK,
                                     env=dict(os.environ, **self.env))
        line = self.proc.stdout.readline()
        check(line.startswith("relay: listening on"), f"relay did not start: {line!r}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def log_lines(self):
        with open(self.log_path) as f:
            return f.read().splitlines()


PEERS = []
RELAYS = []


def peer(name, args, env=None):
    p = Peer(name, args, env)
    PEERS.append(p)
    return p


def state(name):
    return os.path.join(WORK, name)


def pair(relay_arg, mac_state="mac", phone_state="phone", mac_extra=(), phone_extra=(), env=None):
    """First pairing in scriptable mode; returns (mac, phone, link)."""
    mac = peer("mac", ["mac", *relay_arg, "--state", state(mac_state), *mac_extra], env)
    link = mac.expect(lambda l: l.startswith("iterm2://pair?"), what="pairing link")
    phone = peer("phone", ["phone", link, "--state", state(phone_state), *phone_extra], env)
    code = phone.expect(lambda l: SAS_LINE.match(l) is not None, what="SAS line")
    mac.type(code)
    mac.expect(lambda l: l.startswith("Connected end-to-end"), what="connected", stream="err")
    phone.expect(lambda l: l.startswith("Connected end-to-end"), what="connected", stream="err")
    return mac, phone, link


def chat(sender, receiver, text, timeout=30):
    sender.type(text)
    receiver.expect(lambda l: l == text, timeout=timeout, what=f"chat line {text!r}")


def mode(path):
    return os.stat(path).st_mode & 0o777


# ---------------------------------------------------------------------------------------------


def scenario_pair():
    relay = Relay()
    mac, phone, link = pair(["--relay", relay.origin])
    check(f"relay={relay.origin}" in link and "v=1" in link, link)
    check(phone.said(relay.origin.replace("http://", "")), "the phone shows the relay host")
    chat(phone, mac, "hello from the phone")
    chat(mac, phone, "hello from the mac — ünïcødé")
    big = "x" * 100_000
    chat(phone, mac, big)
    # State: owner-only directory and files, and no pairing secrets in the clear outside it.
    for side in ("mac", "phone"):
        check(mode(state(side)) == 0o700, f"{side} state dir mode {oct(mode(state(side)))}")
        for name in os.listdir(state(side)):
            check(mode(os.path.join(state(side), name)) == 0o600, f"{side}/{name} mode")
    check(sorted(os.listdir(state("mac"))) == ["mac-pairing", "noise-static-private-key", "relay-room-secret"], os.listdir(state("mac")))
    check(sorted(os.listdir(state("phone"))) == ["noise-static-private-key", "paired-code", "relay-registered-room", "relay-room-secret"],
          os.listdir(state("phone")))
    check(open(os.path.join(state("mac"), "relay-room-secret"), "rb").read() == open(os.path.join(state("phone"), "relay-room-secret"), "rb").read(),
          "the Mac stored the phone's room secret")
    # Restart the phone: a signed reconnect, no pairing.
    phone.stop()
    phone = peer("phone2", ["phone", "--state", state("phone")])
    phone.expect(lambda l: l.startswith("Connected end-to-end"), what="reconnected", stream="err")
    check(not any(SAS_LINE.match(l) for l in phone.out), "no SAS on a reconnect")
    chat(phone, mac, "after the phone restarted")
    # Restart the Mac.
    mac.stop()
    mac = peer("mac2", ["mac", "--state", state("mac")])
    mac.expect(lambda l: l.startswith("Connected end-to-end"), timeout=40, what="reconnected", stream="err")
    check(not any(l.startswith("iterm2://") for l in mac.out), "no new link once paired")
    chat(mac, phone, "after the mac restarted")
    # Lines typed while the other side is away are delivered when it is back.
    phone.stop()
    mac.type("sent while the phone was away")
    time.sleep(0.5)
    phone = peer("phone3", ["phone", "--state", state("phone")])
    chat(phone, mac, "phone is back")


def scenario_interrupt():
    """Ctrl-C on a connected Mac closes its socket with a close frame and never re-joins."""
    relay = Relay()
    mac, phone, link = pair(["--relay", relay.origin])
    chat(phone, mac, "before the interrupt")
    time.sleep(0.3)
    admits_before = sum(" admit role=mac" in l for l in relay.log_lines())
    mac.proc.send_signal(signal.SIGINT)
    check(mac.proc.wait(timeout=10) == 0, "the Mac exits 0 on Ctrl-C")
    time.sleep(1.0)   # a re-join, if any, would have happened by now (the Mac re-parks at once)
    lines = relay.log_lines()
    check(sum(" admit role=mac" in l for l in lines) == admits_before, f"no re-join after Ctrl-C: {lines[-6:]}")
    check(any("disconnect initiator=remote role=mac state=admitted code=1000" in l for l in lines),
          f"the Mac's socket ended with a close frame: {lines[-6:]}")
    # A Mac still parked, waiting for its first phone, closes its park with a close frame too.
    parked = peer("parked", ["mac", "--relay", relay.origin, "--state", state("parked")])
    parked.expect(lambda l: l.startswith("iterm2://pair?"), what="pairing link")
    parked.expect(lambda l: "Parked on the relay" in l, what="parked", stream="err")
    closes_before = sum("code=1000" in l and "role=mac" in l for l in relay.log_lines())
    parked.proc.send_signal(signal.SIGINT)
    check(parked.proc.wait(timeout=10) == 0, "a parked Mac exits 0 on Ctrl-C")
    time.sleep(0.5)
    closes = sum("code=1000" in l and "role=mac" in l for l in relay.log_lines())
    check(closes == closes_before + 1, f"the parked Mac's socket ended with a close frame: {relay.log_lines()[-4:]}")


def scenario_wrongcode():
    relay = Relay()
    mac = peer("mac", ["mac", "--relay", relay.origin, "--state", state("mac")])
    link = mac.expect(lambda l: l.startswith("iterm2://pair?"), what="pairing link")
    phone = peer("phone", ["phone", link, "--state", state("phone")])
    code = phone.expect(lambda l: SAS_LINE.match(l) is not None, what="SAS line")
    wrong = f"{(int(code) + 1) % 1000000:06d}"
    for _ in range(3):
        mac.type(wrong)
    check(phone.expect_exit() != 0, "the phone fails when declined")
    check(any("declined on your Mac" in l for l in phone.err), "declined message")
    check(not os.path.exists(os.path.join(state("phone"), "paired-code")), "nothing stored on a declined pairing")
    link2 = mac.expect(lambda l: l.startswith("iterm2://pair?"), what="new pairing link")
    pid = lambda l: re.search(r"pid=([0-9a-f]+)", l).group(1)
    check(pid(link2) != pid(link), "a new pid after three wrong codes")
    check(mac.said("wrongly three times"), "the Mac says why")
    # The old link's room is dead: the Mac left it, so a phone with it hears `mac offline`.
    stale = peer("stale", ["phone", link, "--state", state("stale")])
    check(stale.expect_exit() != 0, "stale link refused")
    check(any("mac offline" in l for l in stale.err), f"stale link reason: {stale.err[-1:]}")
    phone = peer("phone2", ["phone", link2, "--state", state("phone")])
    code = phone.expect(lambda l: SAS_LINE.match(l) is not None, what="SAS line")
    mac.type(code)
    chat(phone, mac, "paired on the second link", timeout=20)
    # A scripted Mac whose standard input ends before a code arrives cannot confirm: it says so
    # and exits non-zero; the phone hears "declined".
    closed = peer("mac-eof", ["mac", "--relay", relay.origin, "--state", state("mac-eof")])
    closed.proc.stdin.close()
    link3 = closed.expect(lambda l: l.startswith("iterm2://pair?"), what="pairing link")
    late = peer("phone-eof", ["phone", link3, "--state", state("phone-eof")])
    check(closed.expect_exit() != 0, "the Mac fails without input")
    check(closed.err and closed.err[-1] == "tether: standard input ended before the code was entered", closed.err[-1:])
    check(late.expect_exit() != 0 and any("declined" in l for l in late.err), late.err[-1:])


def scenario_expiry():
    relay = Relay()
    mac = peer("mac", ["mac", "--relay", relay.origin, "--state", state("mac"), "--link-lifetime", "2"])
    first = mac.expect(lambda l: l.startswith("iterm2://pair?"), what="pairing link")
    started = time.time()
    second = mac.expect(lambda l: l.startswith("iterm2://pair?"), timeout=10, what="regenerated link")
    check(second != first and time.time() - started >= 1.5, "the link regenerates after its lifetime")
    check(mac.said("expired"), "the Mac says the link expired")
    phone = peer("phone", ["phone", second, "--state", state("phone")])
    mac.type(phone.expect(lambda l: SAS_LINE.match(l) is not None, what="SAS"))
    chat(phone, mac, "paired after an expiry")
    # Paired: no more regeneration.
    time.sleep(3)
    check(sum(1 for l in mac.out if l.startswith("iterm2://")) == 2, "no new link once paired")


def scenario_relayrestart():
    port = free_port()
    relay = Relay(port=port)
    mac, phone, _ = pair(["--relay", relay.origin])
    chat(phone, mac, "before the restart")
    relay.stop()
    time.sleep(0.5)
    relay = Relay(port=port)
    # Both reconnect with signed joins to the same stored room (the Mac's re-park waits ≤ 5 s,
    # the phone's backoff ≤ 3 s, then ≤ 4 s…).
    phone.expect(lambda l: l.startswith("Connected end-to-end"), timeout=45, what="reconnect", stream="err")
    chat(phone, mac, "after the restart", timeout=30)
    chat(mac, phone, "and back")


def scenario_displace():
    relay = Relay()
    mac, phone, _ = pair(["--relay", relay.origin])
    shutil.copytree(state("phone"), state("phone-b"))
    newer = peer("phone-b", ["phone", "--state", state("phone-b")])
    newer.expect(lambda l: l.startswith("Connected end-to-end"), what="newer phone connected", stream="err")
    phone.expect(lambda l: "displaced" in l and "Retrying in 60 s" in l, what="displaced backoff", stream="err")
    chat(newer, mac, "from the newer phone")
    chat(mac, newer, "to the newer phone")
    # The same for the Mac: a newer Mac with the same pairing takes the slot; the older waits 60 s.
    shutil.copytree(state("mac"), state("mac-b"))
    newer_mac = peer("mac-b", ["mac", "--state", state("mac-b")])
    mac.expect(lambda l: "displaced" in l and "Retrying in 60 s" in l, what="displaced backoff", stream="err")
    newer_mac.expect(lambda l: l.startswith("Connected end-to-end"), timeout=45, what="newer Mac connected (the phone's next ping starts the handshake)", stream="err")
    chat(newer, newer_mac, "to the newer mac", timeout=30)


def scenario_unpair():
    relay = Relay()
    mac, phone, _ = pair(["--relay", relay.origin])
    chat(phone, mac, "about to unpair")
    done = subprocess.run([TETHER, "unpair", "--state", state("phone")], capture_output=True, text=True, timeout=30)
    check(done.returncode == 0, f"unpair: {done.stderr}")
    check("Unpaired" in done.stdout, done.stdout)
    # The relay closes both legs `room deleted`: both running peers stop, needing re-pairing.
    check(mac.expect_exit() != 0 and phone.expect_exit() != 0, "both sides end")
    check(any("needs re-pairing" in l for l in mac.err), mac.err[-1:])
    check(sorted(os.listdir(state("mac"))) == ["noise-static-private-key"], os.listdir(state("mac")))
    check(sorted(os.listdir(state("phone"))) == ["noise-static-private-key"], os.listdir(state("phone")))
    again = subprocess.run([TETHER, "phone", "--state", state("phone")], capture_output=True, text=True, timeout=30)
    check(again.returncode != 0 and "not paired" in again.stderr, again.stderr)
    again = subprocess.run([TETHER, "unpair", "--state", state("phone")], capture_output=True, text=True, timeout=30)
    check(again.returncode != 0 and "not paired" in again.stderr, again.stderr)


def scenario_attested():
    authority = os.path.join(WORK, "attester")
    made = subprocess.run([TETHER, "attester", "init", authority], capture_output=True, text=True, timeout=30)
    check(made.returncode == 0, made.stderr)
    check(mode(os.path.join(authority, "root-key.pem")) == 0o600, "the root key is owner-only")
    cert, key = os.path.join(WORK, "tls.pem"), os.path.join(WORK, "tls-key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    port = free_port()
    origin = f"https://127.0.0.1:{port}"
    app_id = "TEAMID.com.example.companion"
    relay = Relay(port=port, local=False, args=["--relay-origin", origin, "--app-id", app_id, "--tls-cert", cert, "--tls-key", key,
                                               "--appattest-root-pem", open(os.path.join(authority, "root.pem")).read()])
    attest = ["--attester", authority, "--app-id", app_id]
    # Without the attester the relay refuses the phone: attestation mode needs a ticket.
    mac = peer("mac", ["mac", "--relay", origin, "--state", state("mac"), "--ca", cert])
    link = mac.expect(lambda l: l.startswith("iterm2://pair?"), what="pairing link")
    bare = peer("bare", ["phone", link, "--state", state("bare"), "--ca", cert])
    check(bare.expect_exit() != 0, "a phone without an attester is refused")
    check(any("ticket required" in l for l in bare.err), bare.err[-1:])
    # Another root's attester is refused too.
    other = os.path.join(WORK, "other")
    subprocess.run([TETHER, "attester", "init", other], check=True, capture_output=True)
    forged = peer("forged", ["phone", link, "--state", state("forged"), "--ca", cert, "--attester", other, "--app-id", app_id])
    check(forged.expect_exit() != 0 and any("attestation rejected" in l for l in forged.err), forged.err[-1:])
    phone = peer("phone", ["phone", link, "--state", state("phone"), "--ca", cert, *attest])
    mac.type(phone.expect(lambda l: SAS_LINE.match(l) is not None, what="SAS"))
    chat(phone, mac, "attested and paired")
    phone.stop()
    phone = peer("phone2", ["phone", "--state", state("phone"), "--ca", cert])
    chat(phone, mac, "signed rejoin without attesting", timeout=30)
    # Unpair from the Mac; a rejoin with the old pairing is then refused (`ticket required`).
    saved = state("phone-saved")
    shutil.copytree(state("phone"), saved)
    done = subprocess.run([TETHER, "unpair", "--state", state("mac"), "--ca", cert], capture_output=True, text=True, timeout=30)
    check(done.returncode == 0, done.stderr)
    check(phone.expect_exit() != 0, "the phone stops")
    stale = peer("stale", ["phone", "--state", saved, "--ca", cert])
    check(stale.expect_exit() != 0, "rejoin refused")
    check(any("needs re-pairing" in l and "ticket required" in l for l in stale.err), stale.err[-1:])


def scenario_resolver():
    """v2: the Mac emits a resolver link; both sides find the relay through the shard map, and
    follow a reshard (4421) to the new owner, which shares the database."""
    port_a, port_b = free_port(), free_port()
    shard_map = {"version": 1, "ranges": [{"low": 0, "high": 65535, "host": f"127.0.0.1:{port_a}"}]}
    first_map = os.path.join(WORK, "map1.json")
    with open(first_map, "w") as f:
        json.dump(shard_map, f)
    relay_a = Relay(port=port_a, db="shared.db", env={"RELAY_SHARD_MAP": first_map})
    relay_b = Relay(port=port_b, db="shared.db")
    resolver = f"http://127.0.0.1:{port_a}/shardmap.json"
    mac, phone, link = pair(["--resolver", resolver])
    check("v=2" in link and "resolver=" + resolver in link and "relay=" not in link, link)
    chat(phone, mac, "through the resolver")
    moved = {"version": 2, "ranges": [{"low": 0, "high": 65535, "host": f"127.0.0.1:{port_b}"}]}
    path = os.path.join(WORK, "map2.json")
    with open(path, "w") as f:
        json.dump(moved, f)
    done = subprocess.run([TETHER, "shardmap", "publish", path, "--relay-db", os.path.join(WORK, "shared.db")], capture_output=True, text=True)
    check(done.returncode == 0, done.stderr)
    phone.expect(lambda l: "reshard" in l, timeout=15, what="reshard close", stream="err")
    chat(phone, mac, "after the reshard", timeout=40)
    relay_a.stop()
    chat(mac, phone, "owner A is gone; B serves the room", timeout=20)


def scenario_cluster():
    """Three relay nodes on one PostgreSQL (TETHER_TEST_PG) with a map over them and a fourth
    that owns no bucket and only answers the resolver: a Mac and a phone pair through it and chat;
    the room's owner is killed with -9 mid-session; once its lease lapses the survivors take its
    buckets and both sides, re-resolving, rejoin the new owner with signed joins and chat on."""
    database = os.environ.get("TETHER_TEST_PG")
    check(database, "TETHER_TEST_PG (a postgres:// URL) is not set")
    # TETHER_TEST_LEASE_MS: the default 10 s lease to measure failover as users see it.
    lease_ms = int(os.environ.get("TETHER_TEST_LEASE_MS", "3000"))
    lease = {"RELAY_LEASE_TTL_MS": str(lease_ms)}
    ports = [free_port() for _ in range(3)]
    hosts = [f"127.0.0.1:{p}" for p in ports]
    third = 65536 // 3
    shard_map = {"version": 1, "ranges": [{"low": 0, "high": third - 1, "host": hosts[0]},
                                          {"low": third, "high": 2 * third - 1, "host": hosts[1]},
                                          {"low": 2 * third, "high": 65535, "host": hosts[2]}]}
    path = os.path.join(WORK, "cluster-map.json")
    with open(path, "w") as f:
        json.dump(shard_map, f)
    nodes = [Relay(port=ports[0], db=database, env=dict(lease, RELAY_SHARD_MAP=path))]
    nodes += [Relay(port=p, db=database, env=lease) for p in ports[1:]]
    resolver_node = Relay(db=database, env=lease)
    resolver = f"http://127.0.0.1:{resolver_node.port}/shardmap.json"
    time.sleep(1.5)  # every node adopts the map (read once a second)
    mac, phone, link = pair(["--resolver", resolver])
    chat(phone, mac, "through the cluster")
    # The owner is the node that admitted them (the room name is derived, never in the link).
    owners = [i for i, node in enumerate(nodes) if any(" admit role=phone" in l for l in node.log_lines())]
    check(len(owners) == 1, "admitted by nodes %s" % owners)
    owner = owners[0]
    killed = time.time()
    nodes[owner].proc.kill()
    nodes[owner].proc.wait()
    # A line typed while the dead node's socket still looks open to the sender is written into
    # that socket and lost with it (nothing acknowledges a frame end to end), so the next line
    # is typed once both sides say they are back, as a user would.
    for side in (mac, phone):
        side.expect(lambda l: l.startswith("Disconnected"), timeout=20, what="the owner's close", stream="err")
    for side in (mac, phone):
        side.expect(lambda l: l.startswith("Connected end-to-end"), timeout=60 + lease_ms / 1000, what="back end-to-end", stream="err")
    chat(mac, phone, "after the owner was killed")
    log(f"  room back {time.time() - killed:.1f} s after its owner was killed (lease {lease_ms / 1000:g} s)")
    chat(phone, mac, "and back the other way")
    current = json.loads(urllib.request.urlopen(resolver, timeout=5).read())
    check(current["version"] >= 2 and hosts[owner] not in [r["host"] for r in current["ranges"]],
          "the dead node still owns buckets: %s" % current)


def scenario_tamper():
    """A relay-side proxy flips one bit of one spliced frame: the receiver's AEAD fails, the
    channel is torn down, and both sides run a fresh handshake. The proxy forwards raw TCP
    (HTTP calls and WebSocket upgrades alike) and parses the client's WebSocket frames, so it
    can alter the payload of one binary frame from the phone (a masked byte flipped stays
    flipped once unmasked)."""
    import asyncio

    relay_port, proxy_port = free_port(), free_port()
    proxy_origin = f"http://127.0.0.1:{proxy_port}"
    relay = Relay(port=relay_port, env={"RELAY_ORIGIN": proxy_origin})
    armed = threading.Event()
    tampered = threading.Event()

    async def pipe(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def frames_up(reader, writer):
        buffer = b""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            writer.write(head)
            upgrade = b"upgrade: websocket" in head.lower()
            role = None
            while data := await reader.read(65536):
                if not upgrade:
                    writer.write(data)
                    await writer.drain()
                    continue
                buffer += data
                while len(buffer) >= 2:
                    length = buffer[1] & 0x7F
                    offset = 2
                    if length == 126:
                        if len(buffer) < 4:
                            break
                        length, offset = int.from_bytes(buffer[2:4], "big"), 4
                    elif length == 127:
                        if len(buffer) < 10:
                            break
                        length, offset = int.from_bytes(buffer[2:10], "big"), 10
                    masked = buffer[1] & 0x80
                    total = offset + (4 if masked else 0) + length
                    if len(buffer) < total:
                        break
                    frame, buffer = bytearray(buffer[:total]), buffer[total:]
                    opcode = frame[0] & 0x0F
                    key = frame[offset:offset + 4] if masked else b"\0\0\0\0"
                    body = offset + (4 if masked else 0)
                    if opcode == 1 and role is None:
                        text = bytes(b ^ key[i % 4] for i, b in enumerate(frame[body:]))
                        role = json.loads(text).get("role")
                    if opcode == 2 and role == "phone" and armed.is_set() and not tampered.is_set() and length > 16:
                        frame[-1] ^= 0x01
                        tampered.set()
                    writer.write(bytes(frame))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def handle(client_reader, client_writer):
        try:
            relay_reader, relay_writer = await asyncio.open_connection("127.0.0.1", relay_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(frames_up(client_reader, relay_writer), pipe(relay_reader, client_writer))

    async def serve():
        server = await asyncio.start_server(handle, "127.0.0.1", proxy_port)
        async with server:
            await server.serve_forever()

    threading.Thread(target=lambda: asyncio.run(serve()), daemon=True).start()
    time.sleep(0.5)
    mac, phone, _ = pair(["--relay", proxy_origin])
    chat(phone, mac, "clean frame")
    armed.set()
    phone.type("this frame is altered in transit")
    mac.expect(lambda l: "failed authentication" in l, what="AEAD failure", stream="err")
    check(tampered.is_set(), "the proxy altered a frame")
    check("this frame is altered in transit" not in mac.out, "the altered frame is never shown")
    phone.expect(lambda l: l.startswith("Connected end-to-end"), timeout=30, what="re-handshake", stream="err")
    chat(phone, mac, "after a fresh handshake", timeout=30)
    chat(mac, phone, "both ways")


if __name__ == "__main__":
    try:
        globals()["scenario_" + SCENARIO]()
        log(f"PASS {SCENARIO}")
        code = 0
    except AssertionError as error:
        log(f"FAIL {SCENARIO}: {error}")
        code = 1
    except Exception as error:  # a crash of the driver is a failure too, with its cause
        import traceback
        traceback.print_exc(file=sys.stdout)
        log(f"FAIL {SCENARIO}: {type(error).__name__}: {error}")
        code = 1
    finally:
        for p in PEERS:
            p.stop()
    for relay in RELAYS:
        relay.stop()
    shutil.rmtree(WORK, ignore_errors=True)
    sys.exit(code)

#!/usr/bin/env python3
"""A relay-only call keeps the device's address out of everything Tether signals: `tether call`
and `tether answer`, both `--relay-only`, through a real `tether signal` in TURN_MODE=coturn and
a real coturn, with every byte each process sends to the signaling server recorded and decoded.

usage: relay_only_signals.py --tether PATH [--scenario NAME]...   (detector, relay-only-signals)

On loopback the device and the TURN server would both be 127.0.0.1, so each process gathers on
a loopback address of its own (`--ice-address 127.0.0.2` and `127.0.0.3`) while coturn and
`tether signal` listen on 127.0.0.1. Each process reaches `tether signal` through a recording TCP
proxy of this script, so the recording is exactly what went to the server; while the call runs,
the processes' own sockets are read from /proc (every local address and port they hold).

After the call (secured, a text each way, hung up), each recording is decoded layer by layer --
the HTTP upgrade request, the WebSocket frames (unmasked), each JSON message, each signal's
base64 body and its JSON, the SDP lines and the candidate attributes -- and it must hold that:
  - no layer names the device's address (as text, or its four bytes in a decoded binary field),
    any IPv4 literal is 0.0.0.0 or the TURN server's, no IPv6 address of the machine appears, and
    the upgrade request, the SDP and the candidates do not name the host;
  - no text names any local port of the device as a number;
  - every candidate is relayed at the TURN server's address with `raddr 0.0.0.0 rport 0`, and the
    SDP's `o=` and `c=` addresses are 0.0.0.0 or the TURN server's;
  - every message and body has exactly the fields signaling.md §5 and §7.1 define, the IDs are the
    two callers' and every opaque field has its defined form (nothing else rides along).
A device port is not looked for as two bytes inside signatures and keys: any 16-bit value turns up
in 64 random bytes too often, and those fields are fixed-size values of the protocol.

`detector` runs the same inspection on a made-up recording with libnice's old relayed candidate
(`raddr <device> rport <port>`) and on its clean twin: the first must be caught, the second not.

Each scenario prints `PASS <name>` or `FAIL <name>: <why>`, plus `INFO` lines on what was
inspected; the exit status is 0 only if every scenario passed. Written for Tether's tests from
RFC 6455, RFC 8839 and signaling.md; it shares no code with Tether.
"""
import argparse
import base64
import binascii
import ipaddress
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from call_cli import Fail, Proc, check, waiting
from coturn_fixture import TurnServer

TURN_ADDRESS = "127.0.0.1"
DEVICES = {"judy": "127.0.0.2", "ken": "127.0.0.3"}
MESSAGE_FIELDS = {"register": {"type", "v", "id", "sig"},
                  "signal": {"type", "v", "kind", "from", "to", "call", "body", "sig"},
                  "presence": {"type", "v", "ids"}}
BODY_FIELDS = {"offer": {"sdp", "agreementKey", "identitySig"}, "answer": {"sdp", "agreementKey", "identitySig"},
               "candidate": {"candidate", "sdpMid", "sdpMLineIndex"}, "channel": set(), "reject": {"reason"},
               "close": {"reason"}}
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
IPV4 = re.compile(r"(?<![0-9.])(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?![0-9.])")
NUMBER = re.compile(r"(?<![0-9])[0-9]{1,5}(?![0-9])")


# ------------------------------------------------------------------------------------------------
# What the device is: its address and its local ports
# ------------------------------------------------------------------------------------------------

class Device:
    """What must not appear in a recording: the address the process gathers on, the machine's
    IPv6 addresses (loopback aside), every local port the process held, and the host name where
    a host-derived value could be written (the upgrade request, SDP, candidates)."""

    def __init__(self, address, ports=()):
        self.address = address
        self.packed = socket.inet_aton(address)
        self.ports = set(ports)
        self.ipv6 = machine_ipv6_addresses()
        name = socket.gethostname()
        self.hostname = name if len(name) >= 4 else None


def machine_ipv6_addresses():
    addresses = set()
    try:
        with open("/proc/net/if_inet6") as handle:
            for line in handle:
                address = ipaddress.IPv6Address(bytes.fromhex(line.split()[0]))
                if not address.is_loopback:
                    addresses.add(address)
    except OSError:
        pass
    return addresses


def proc_address(text):
    """/proc/net/{tcp,udp}[6]'s `local_address` (each 32-bit word in host order) and port."""
    address, port = text.split(":")
    raw = bytes.fromhex(address)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words)), int(port, 16)


def sockets_of(pid):
    """(protocol, local address, local port) of every socket the process holds now."""
    inodes = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[len("socket:["):-1])
    except OSError:
        return set()
    found = set()
    for protocol in ("tcp", "tcp6", "udp", "udp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, protocol)) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[9] in inodes:
                found.add((protocol,) + proc_address(fields[1]))
    return found


class SocketSampler:
    """Reads the processes' sockets every 20 ms until stopped: the ICE sockets live only while
    the call does."""

    def __init__(self, pids):
        self.pids = pids
        self.seen = {pid: set() for pid in pids}
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while self.running:
            for pid in self.pids:
                self.seen[pid] |= sockets_of(pid)
            time.sleep(0.02)

    def stop(self):
        self.running = False
        self.thread.join()


# ------------------------------------------------------------------------------------------------
# The recording proxy
# ------------------------------------------------------------------------------------------------

class RecordingProxy:
    """Listens on 127.0.0.1 and passes each connection to the signaling server, keeping every
    byte the client sent, per connection and in order."""

    def __init__(self, server_port):
        self.server_port = server_port
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.port = self.listener.getsockname()[1]
        self.recordings = []
        self.lock = threading.Lock()
        self.threads = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.server_port))
            recording = bytearray()
            with self.lock:
                self.recordings.append(recording)
            for source, sink, keep in ((client, server, recording), (server, client, None)):
                thread = threading.Thread(target=self._pump, args=(source, sink, keep), daemon=True)
                thread.start()
                self.threads.append(thread)

    def _pump(self, source, sink, keep):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if keep is not None:
                    keep += data
                sink.sendall(data)
        except OSError:
            pass
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self):
        self.listener.close()
        for thread in list(self.threads):
            thread.join(timeout=5)
        with self.lock:
            return [bytes(recording) for recording in self.recordings]


# ------------------------------------------------------------------------------------------------
# Inspection
# ------------------------------------------------------------------------------------------------

class Inspection:
    """Decodes one process's recordings and collects findings (anything naming the device, or
    anything the protocol does not define)."""

    def __init__(self, device, own_id, peer_id, server_port=None):
        """`server_port`: the port the upgrade request's Host names, the server's and not the
        device's, even should a device socket on another address share its number."""
        self.device, self.own_id, self.peer_id = device, own_id, peer_id
        self.server_port = server_port
        self.findings = []
        self.kinds = {}
        self.candidates = []
        self.bytes = 0

    def finding(self, where, what):
        self.findings.append("%s: %s" % (where, what))

    # Layers ------------------------------------------------------------------------------------

    def recording(self, data):
        self.bytes += len(data)
        head, separator, rest = data.partition(b"\r\n\r\n")
        if not separator or not head.startswith(b"GET /signal HTTP/1.1\r\n"):
            return self.finding("upgrade", "not a WebSocket upgrade request: %r" % head[:80])
        self.binary("upgrade", head)
        self.text("upgrade", head.decode("latin-1"), host_derived=True)
        message, opcode = bytearray(), None
        for fin, code, payload in self.frames(rest):
            self.binary("frame", payload)
            if code >= 0x8:
                self.control(code, payload)
                continue
            if code != 0x0:
                if opcode is not None:
                    self.finding("frame", "a new message inside a fragmented one")
                message, opcode = bytearray(), code
            message += payload
            if fin:
                self.message(bytes(message))
                message, opcode = bytearray(), None

    def frames(self, data):
        offset = 0
        while offset < len(data):
            if len(data) - offset < 2:
                self.finding("frame", "%d trailing bytes" % (len(data) - offset))
                return
            first, second = data[offset], data[offset + 1]
            length, index = second & 0x7F, offset + 2
            if length == 126:
                length, index = struct.unpack(">H", data[index:index + 2])[0], index + 2
            elif length == 127:
                length, index = struct.unpack(">Q", data[index:index + 8])[0], index + 8
            if not second & 0x80:
                self.finding("frame", "a client frame without a mask (RFC 6455 §5.3)")
                return
            mask, index = data[index:index + 4], index + 4
            payload = data[index:index + length]
            if len(payload) < length or len(mask) < 4:
                self.finding("frame", "a frame cut short")
                return
            yield first >> 7, first & 0x0F, bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            offset = index + length

    def control(self, opcode, payload):
        if opcode == 0x8 and len(payload) >= 2:
            self.text("close frame", payload[2:].decode("utf-8", "replace"))
        elif opcode in (0x9, 0xA):
            self.text("ping/pong", payload.decode("latin-1"))
        elif opcode != 0x8:
            self.finding("frame", "control opcode %d" % opcode)

    def message(self, raw):
        self.text("message", raw.decode("utf-8", "replace"))
        try:
            value = json.loads(raw)
        except ValueError:
            return self.finding("message", "not JSON: %r" % raw[:80])
        kind = value.get("type") if isinstance(value, dict) else None
        if kind not in MESSAGE_FIELDS:
            return self.finding("message", "an unknown message: %r" % raw[:80])
        where = kind
        self.fields(where, value, MESSAGE_FIELDS[kind])
        if value.get("v") != 2:
            self.finding(where, "v is %r" % value.get("v"))
        if kind == "register":
            self.identity(where, "id", value.get("id"), {self.own_id})
            self.opaque(where, "sig", value.get("sig"), 64)
        elif kind == "presence":
            for id in value.get("ids") or []:
                self.identity(where, "ids", id, {self.own_id, self.peer_id})
        else:
            self.signal(value)

    def signal(self, value):
        kind = value.get("kind")
        where = "signal %s" % kind
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        if kind not in BODY_FIELDS:
            return self.finding(where, "an unknown kind")
        self.identity(where, "from", value.get("from"), {self.own_id})
        self.identity(where, "to", value.get("to"), {self.peer_id})
        if not isinstance(value.get("call"), str) or not UUID.match(value["call"]):
            self.finding(where, "call is not a UUID: %r" % value.get("call"))
        self.opaque(where, "sig", value.get("sig"), 64)
        raw = self.opaque(where, "body", value.get("body"), None)
        if raw is None:
            return
        self.text(where + " body", raw.decode("utf-8", "replace"))
        try:
            body = json.loads(raw)
        except ValueError:
            return self.finding(where, "the body is not JSON")
        if not isinstance(body, dict):
            return self.finding(where, "the body is not an object")
        self.fields(where + " body", body, BODY_FIELDS[kind])
        if kind in ("offer", "answer"):
            self.opaque(where, "agreementKey", body.get("agreementKey"), 32)
            self.opaque(where, "identitySig", body.get("identitySig"), 64)
            self.sdp(where, body.get("sdp"))
        elif kind == "candidate":
            if body.get("sdpMLineIndex") not in (0, None) or isinstance(body.get("sdpMLineIndex"), bool):
                self.finding(where, "sdpMLineIndex is %r" % body.get("sdpMLineIndex"))
            if body.get("sdpMid") not in ("0", None):
                self.finding(where, "sdpMid is %r, not the data section's" % body.get("sdpMid"))
            if body.get("candidate"):
                self.candidate(where, body["candidate"])
        elif kind in ("reject", "close"):
            if body.get("reason") not in ("declined", "busy", "error", "hangup", "timeout"):
                self.finding(where, "reason %r" % body.get("reason"))

    def sdp(self, where, text):
        if not isinstance(text, str):
            return self.finding(where, "no SDP")
        self.text(where + " sdp", text, host_derived=True)
        lines = text.split("\r\n")
        if lines[-1] != "":
            self.finding(where, "SDP does not end with CRLF")
        for line in lines[:-1]:
            if not re.match(r"^[vostmca]=", line):
                self.finding(where, "an SDP line Tether does not write: %r" % line)
            if line.startswith("o="):
                fields = line.split(" ")
                if len(fields) != 6 or fields[3:5] != ["IN", "IP4"] or fields[5] != "0.0.0.0":
                    self.finding(where, "o= names an address: %r" % line)
            elif line.startswith("c="):
                if line.split(" ")[-1] not in ("0.0.0.0", TURN_ADDRESS):
                    self.finding(where, "c= names an address: %r" % line)
            elif line.startswith("a=candidate:"):
                self.candidate(where + " sdp", line[2:])

    def candidate(self, where, value):
        """RFC 8839 §5.1: relayed, at the TURN server, the related address withheld, nothing more."""
        self.candidates.append(value)
        self.text(where + " candidate", value, host_derived=True)
        fields = value.split(" ")
        if len(fields) < 8 or fields[6] != "typ":
            return self.finding(where, "a candidate that does not parse: %r" % value)
        if fields[7] != "relay":
            self.finding(where, "a %s candidate in a relay-only call: %r" % (fields[7], value))
        if fields[4] != TURN_ADDRESS:
            self.finding(where, "a candidate not at the TURN server: %r" % value)
        extensions = dict(zip(fields[8::2], fields[9::2]))
        if extensions.get("raddr") != "0.0.0.0" or extensions.get("rport") != "0":
            self.finding(where, "the related address is not withheld: %r" % value)
        unknown = set(extensions) - {"raddr", "rport"}
        if unknown or len(fields) % 2:
            self.finding(where, "more than a relayed candidate carries: %r" % value)

    # Field checks --------------------------------------------------------------------------

    def fields(self, where, value, expected):
        if set(value) != expected:
            self.finding(where, "fields %s, expected %s" % (sorted(value), sorted(expected)))

    def identity(self, where, name, value, allowed):
        if value not in allowed:
            self.finding(where, "%s is not one of the two callers' IDs: %r" % (name, value))

    def opaque(self, where, name, value, size):
        """A b64std field: its bytes, checked as binary; `size` when the protocol fixes it."""
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, TypeError, ValueError):
            self.finding(where, "%s is not base64" % name)
            return None
        if size is not None and len(raw) != size:
            self.finding(where, "%s is %d bytes, not %d" % (name, len(raw), size))
        self.binary(where + " " + name, raw)
        return raw

    def binary(self, where, raw):
        if self.device.packed in raw:
            self.finding(where, "the device address's 4 bytes")
        if self.device.address.encode() in raw:
            self.finding(where, "the device address as text")

    def text(self, where, text, host_derived=False):
        device = self.device
        if device.address in text:
            self.finding(where, "names the device address %s" % device.address)
        for literal in IPV4.findall(text):
            if literal not in ("0.0.0.0", TURN_ADDRESS):
                self.finding(where, "names the address %s" % literal)
        for address in device.ipv6:
            if address.compressed in text.lower() or address.exploded in text.lower():
                self.finding(where, "names the machine's IPv6 address %s" % address)
        if host_derived and device.hostname and re.search(r"(?<![A-Za-z0-9-])%s(?![A-Za-z0-9-])" % re.escape(device.hostname),
                                                          text, re.IGNORECASE):
            self.finding(where, "names the host %s" % device.hostname)
        for number in NUMBER.findall(text):
            if int(number) in device.ports and not (where == "upgrade" and int(number) == self.server_port):
                self.finding(where, "names the device's local port %s" % number)


# ------------------------------------------------------------------------------------------------
# Scenarios
# ------------------------------------------------------------------------------------------------

def masked_frame(payload, opcode=0x1):
    mask = os.urandom(4)
    length = len(payload)
    header = bytes([0x80 | opcode]) + (bytes([0x80 | length]) if length < 126 else bytes([0x80 | 126]) + struct.pack(">H", length))
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def made_up_recording(candidate, own_id, peer_id):
    def signal(kind, body):
        return json.dumps({"type": "signal", "v": 2, "kind": kind, "from": own_id, "to": peer_id,
                           "call": "0b9f4c52-8a5e-4c1e-9d0a-4f3b2a1c0d9e", "body": base64.b64encode(json.dumps(body).encode()).decode(),
                           "sig": base64.b64encode(os.urandom(64)).decode()}).encode()
    head = b"GET /signal HTTP/1.1\r\nHost: 127.0.0.1:8791\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" \
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    register = json.dumps({"type": "register", "v": 2, "id": own_id, "sig": base64.b64encode(os.urandom(64)).decode()}).encode()
    return head + masked_frame(register) + masked_frame(signal("candidate", {"candidate": candidate, "sdpMid": "0", "sdpMLineIndex": 0})) \
        + masked_frame(signal("candidate", {"candidate": "", "sdpMid": "0", "sdpMLineIndex": 0}))


def scenario_detector(tether):
    own_id, peer_id = "A" * 64, "B" * 64
    device = Device("127.0.0.2", ports={38254})
    leaking = Inspection(device, own_id, peer_id)
    leaking.recording(made_up_recording("candidate:2 1 udp 505414655 127.0.0.1 20627 typ relay raddr 127.0.0.2 rport 38254",
                                        own_id, peer_id))
    text = "\n".join(leaking.findings)
    check("device address" in text and "local port 38254" in text and "not withheld" in text,
          "the leaking candidate is caught: %r" % leaking.findings)
    clean = Inspection(device, own_id, peer_id)
    clean.recording(made_up_recording("candidate:2 1 udp 505414655 127.0.0.1 20627 typ relay raddr 0.0.0.0 rport 0", own_id, peer_id))
    check(clean.findings == [], "its clean twin passes: %r" % clean.findings)


def relay_port_range():
    """coturn's relayed ports, kept below the kernel's ephemeral range so that a relayed port
    (the TURN server's) can never equal a device port by chance."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
        low = int(handle.read().split()[0])
    check(low > 20000 + 1000, "the ephemeral range starts at %d, too low to keep relayed ports apart" % low)
    return 20000, min(29999, low - 1)


def identity(tether, directory, name):
    state = os.path.join(directory, name)
    out = subprocess.run([tether, "id", "--state", state], capture_output=True, text=True, check=True).stdout.split("\n")
    return state, out[0], out[1]


def scenario_relay_only_signals(tether):
    directory = tempfile.mkdtemp(prefix="tether-relay-only-")
    secret = os.urandom(18).hex()
    low, high = relay_port_range()
    turn = TurnServer(secret, log=os.path.join(directory, "turnserver.log"), min_port=low, max_port=high, sessions=True)
    server, proxies, procs, sampler = None, [], [], None
    try:
        turn_port = turn.start()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            signal_port = probe.getsockname()[1]
        environment = dict(os.environ, TURN_MODE="coturn", TURN_SECRET=secret, TURN_URLS="turn:127.0.0.1:%d?transport=udp" % turn_port)
        server = subprocess.Popen([tether, "signal", "--signal-host", "127.0.0.1", "--signal-port", str(signal_port)],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=environment)
        check(server.stdout.readline().startswith("signal: listening on"), "tether signal started")
        a_state, a_id, _ = identity(tether, directory, "judy")
        b_state, b_id, b_link = identity(tether, directory, "ken")
        proxies = [RecordingProxy(signal_port), RecordingProxy(signal_port)]
        url = "ws://127.0.0.1:%d/signal"
        ken = Proc("ken", [tether, "answer", "--signal", url % proxies[1].port, "--state", b_state,
                           "--relay-only", "--ice-address", DEVICES["ken"]])
        procs.append(ken)
        waiting(None, ken)
        judy = Proc("judy", [tether, "call", b_link, "--signal", url % proxies[0].port, "--state", a_state,
                             "--relay-only", "--ice-address", DEVICES["judy"]])
        procs.append(judy)
        sampler = SocketSampler([judy.p.pid, ken.p.pid])
        check(ken.wait_for("incoming ") == "incoming " + a_id, "the invitation names the caller's ID")
        ken.type("yes")
        a_number = judy.wait_for("secured ")[len("secured "):]
        b_number = ken.wait_for("secured ")[len("secured "):]
        check(a_number == b_number, "safety numbers %r / %r" % (a_number, b_number))
        judy.type("through the relay")
        check(ken.wait_for("message ") == "message through the relay", "Ken got the text")
        ken.type("and back")
        check(judy.wait_for("message ") == "message and back", "Judy got the answer")
        judy.eof()
        check(judy.wait_for("ended ") == "ended hung up", "Judy hung up")
        check(ken.wait_for("ended ") == "ended the peer hung up", "Ken heard it")
        check(judy.exit_status() == 0 and ken.exit_status() == 0, "both exit 0 after a secured call")
        sampler.stop()
        recordings = [proxy.close() for proxy in proxies]

        # TURN carried the call: coturn, the witness from outside Tether, allocated for both.
        log = open(os.path.join(directory, "turnserver.log"), errors="replace").read().splitlines()
        users = {match.group(1) for line in log if "ALLOCATE processed, success" in line
                 for match in [re.search(r"user <([^>]*)>", line)] if match}
        check(len(users) >= 2, "coturn allocated for both sides: %r" % sorted(users))
        check(any("CREATE_PERMISSION processed, success" in line for line in log), "coturn permitted the peers")

        for (name, own, peer), process, proxy, recording in zip((("judy", a_id, b_id), ("ken", b_id, a_id)), (judy, ken), proxies,
                                                                recordings):
            seen = sampler.seen[process.p.pid]
            address = DEVICES[name]
            check(any(protocol == "udp" and local == address for protocol, local, _ in seen),
                  "%s gathered on %s: its sockets %r" % (name, address, sorted(seen)))
            device = Device(address, ports={port for _, _, port in seen})
            inspection = Inspection(device, own, peer, server_port=proxy.port)
            check(len(recording) == 1, "%s opened one signaling connection, not %d" % (name, len(recording)))
            for data in recording:
                inspection.recording(data)
            expected = "offer" if name == "judy" else "answer"
            check(inspection.kinds.get(expected) == 1 and inspection.kinds.get("candidate", 0) >= 2,
                  "%s signalled its description and candidates: %r" % (name, inspection.kinds))
            check(inspection.candidates, "%s signalled a candidate" % name)
            print("INFO %s: %d bytes to the server, signals %s, local ports %s, candidates %s" % (
                name, inspection.bytes, dict(sorted(inspection.kinds.items())), sorted(device.ports), inspection.candidates), flush=True)
            check(inspection.findings == [], "%s signalled what names the device: %s" % (name, "; ".join(inspection.findings[:12])))
    finally:
        if sampler is not None:
            sampler.stop()
        for process in procs:
            process.stop()
        for proxy in proxies:
            proxy.close()
        if server is not None and server.poll() is None:
            server.terminate()
            server.wait()
        turn.stop()
        shutil.rmtree(directory, ignore_errors=True)


SCENARIOS = {"detector": scenario_detector, "relay-only-signals": scenario_relay_only_signals}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tether", required=True)
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    arguments = parser.parse_args()
    failed = False
    for name in arguments.scenario or list(SCENARIOS):
        try:
            SCENARIOS[name](arguments.tether)
            print("PASS " + name, flush=True)
        except (Fail, RuntimeError, OSError, subprocess.SubprocessError) as failure:
            failed = True
            print("FAIL %s: %s" % (name, failure), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Hostile and broken callers against one running `tether answer` (signaling.md §7.1-§7.3,
§13.1), through a real `tether signal`. Each caller is a fresh identity that signs its signals
and its agreement-key binding correctly (Tests/Peers/signal_client.py), so `tether answer` shows
the invitation and the test consents; what is wrong is inside:

  sdp-*          an offer whose SDP is malformed (garbage, no fingerprint, only a sha-1 one, a
                 setup role an offer may not take, no m=application, no m= at all, two sections,
                 a bad ice-ufrag, no ice-pwd, a malformed a=candidate);
  candidate-*    a well-formed offer, then a `candidate` whose value is malformed (not a
                 candidate, port, priority, component, transport type, TCP without tcptype), or
                 one sent while the call is still ringing;
  fingerprint    aiortc as the caller's media, with an offer whose a=fingerprint is another
                 certificate's: ICE connects, DTLS must refuse aiortc's real certificate;
  ignored        §7.2 drops a `candidate` whose body breaks the schema (both locators null, a
                 fractional or negative index, a non-string candidate, a missing field, not JSON,
                 not an object), and the transport skips candidates it cannot use (an mDNS name,
                 another transport, another m-line): none of them may end the call, so the
                 caller's `close` `hangup` after them is what ends it;
  forged-binding an offer whose identitySig is not over its agreementKey: dropped, never shown.

Each refused call must end with `ended <reason>` naming what was wrong, the same reason on
standard error (`tether: answer: the call ended: ...`), `close` `error` signed by the answerer,
and `answer: waiting for a call` again: the process keeps running. The last scenario, `good-call`,
is a real `tether call` to the same `tether answer` process: secured with equal safety numbers,
a text, hang-up, exit 0.

Prints `PASS <name>` or `FAIL <name>: <why>` per scenario, in order; exit status 0 only if every
scenario passed.

usage: hostile_caller.py --tether PATH
"""
import argparse
import asyncio
import json
import os
import re
import sys

from aiortc import RTCCertificate, RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

import signal_client
from call_cli import Fail, World, check
from signal_client import Net, Peer, b64, b64decode_strict, identity_binding, new_call, signal_string

RAW = serialization.Encoding.Raw, serialization.PublicFormat.Raw


def sdp(lines):
    return "".join(line + "\r\n" for line in lines)


def hex_fingerprint(size):
    return ":".join("%02X" % byte for byte in os.urandom(size))


# A data-only offer as RFC 8841 and JSEP write it: valid, so that each variant below is wrong in
# exactly one way (the candidate scenarios see Tether answer it).
BASE = [
    "v=0",
    "o=- 7071234567890123456 0 IN IP4 0.0.0.0",
    "s=-",
    "t=0 0",
    "a=group:BUNDLE 0",
    "a=ice-options:trickle",
    "m=application 9 UDP/DTLS/SCTP webrtc-datachannel",
    "c=IN IP4 0.0.0.0",
    "a=mid:0",
    "a=ice-ufrag:Mlry",
    "a=ice-pwd:hostilecallerpassword0123",
    "a=fingerprint:sha-256 " + hex_fingerprint(32),
    "a=setup:actpass",
    "a=sctp-port:5000",
    "a=max-message-size:65536",
]


def replaced(prefix, line):
    return [line if old.startswith(prefix) else old for old in BASE]


def without(prefix):
    return [line for line in BASE if not line.startswith(prefix)]


MEDIA = BASE.index("m=application 9 UDP/DTLS/SCTP webrtc-datachannel")

# name: (offer SDP, what the reason must say)
MALFORMED_OFFERS = {
    "sdp-garbage": ("this is not SDP at all\r\nnor is this\r\n", "not <type>=<value>"),
    "sdp-no-fingerprint": (sdp(without("a=fingerprint:")), "no a=fingerprint"),
    "sdp-sha1-fingerprint-only": (sdp(replaced("a=fingerprint:", "a=fingerprint:sha-1 " + hex_fingerprint(20))), "no sha-256 fingerprint"),
    "sdp-setup-active": (sdp(replaced("a=setup:", "a=setup:active")), "a=setup:active is not allowed"),
    "sdp-setup-holdconn": (sdp(replaced("a=setup:", "a=setup:holdconn")), "a=setup:holdconn is not allowed"),
    "sdp-audio-not-application": (sdp(replaced("m=", "m=audio 9 UDP/TLS/RTP/SAVPF 111")), "not application UDP/DTLS/SCTP"),
    "sdp-no-media-section": (sdp(BASE[:MEDIA]), "no m= section"),
    "sdp-two-media-sections": (sdp(BASE + BASE[MEDIA:]), "more than one m= section"),
    "sdp-bad-ice-ufrag": (sdp(replaced("a=ice-ufrag:", "a=ice-ufrag:a!")), "malformed a=ice-ufrag"),
    "sdp-no-ice-pwd": (sdp(without("a=ice-pwd:")), "no a=ice-pwd"),
    "sdp-malformed-candidate": (sdp(BASE + ["a=candidate:1 1 UDP 2122260223 127.0.0.1 70000 typ host"]), "candidate port"),
}

# name: (candidate attribute value, what the reason must say); each body is schema-valid.
MALFORMED_CANDIDATES = {
    "candidate-not-a-candidate": ("hello, I am a candidate", "remote candidate refused"),
    "candidate-bad-port": ("candidate:1 1 UDP 2122260223 127.0.0.1 70000 typ host", "candidate port"),
    "candidate-bad-priority": ("candidate:1 1 UDP 99999999999 127.0.0.1 5000 typ host", "candidate priority"),
    "candidate-component-2": ("candidate:1 2 UDP 2122260223 127.0.0.1 5000 typ host", "component 2"),
    "candidate-tcp-without-tcptype": ("candidate:1 1 TCP 2122260223 127.0.0.1 9 typ host", "TCP candidate without tcptype"),
    "candidate-tcptype-on-udp": ("candidate:1 1 UDP 2122260223 127.0.0.1 5000 typ host tcptype active", "tcptype on a UDP candidate"),
    "candidate-no-type": ("candidate:1 1 UDP 2122260223 127.0.0.1 5000", "remote candidate refused"),
}


class Mallory:
    """One registered identity ringing the answerer; the signals it receives, checked."""

    def __init__(self, peer, bob):
        self.peer, self.bob = peer, bob
        self.call = None
        self.received = []
        self.arrived = asyncio.Event()
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def connect(cls, net, bob):
        peer = await Peer.connect(net, name="mallory")
        await peer.register()
        return cls(peer, bob)

    async def _read(self):
        while True:
            self.received.append(await self.peer.recv(timeout=3600))
            self.arrived.set()

    async def send(self, kind, body=None, body_b64=None):
        await self.peer.signal(self.bob, kind=kind, body=body, body_b64=body_b64, call=self.call)

    async def offer(self, description, binding_key=None):
        self.call = new_call()
        agreement = X25519PrivateKey.generate().public_key().public_bytes(*RAW)
        bound = agreement if binding_key is None else binding_key
        await self.send("offer", {"sdp": description, "agreementKey": b64(agreement),
                                  "identitySig": b64(self.peer.key.sign(identity_binding(bound)))})

    async def next(self, kind, timeout=10):
        """The body of the next `kind` signal from the answerer for this call, after checking
        that the answerer signed it (§7.2, as any recipient would)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            for index, message in enumerate(self.received):
                if message.get("type") == "error":
                    raise Fail("the server refused a signal: %s" % json.dumps(message))
                if message.get("type") == "signal" and message.get("kind") == kind and message.get("call") == self.call:
                    del self.received[index]
                    check(message["from"] == self.bob and message["to"] == self.peer.id, "the %s is from the answerer to us" % kind)
                    Ed25519PublicKey.from_public_bytes(bytes.fromhex(self.bob)).verify(
                        b64decode_strict(message["sig"]),
                        signal_string(kind, message["from"], message["to"], message["call"], message["body"]))
                    return json.loads(b64decode_strict(message["body"]))
            remaining = end - loop.time()
            if remaining <= 0 or self.reader.done():
                raise Fail("no %s from the answerer within %ss (got %s)" % (kind, timeout, [m.get("kind") for m in self.received]))
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), remaining)
            except TimeoutError:
                pass

    def kinds(self):
        return [message.get("kind") for message in self.received if message.get("call") == self.call]

    async def close(self):
        if self.reader.done() and not self.reader.cancelled():
            self.reader.exception()  # the connection ended first; nothing is waiting for it
        self.reader.cancel()
        await self.peer.close()


class Answerer:
    """The one `tether answer` process every scenario rings."""

    def __init__(self, world):
        self.world = world
        state, self.id, _ = world.identity("bob")
        self.state = state
        self.proc = world.answer("bob", state)
        self.net = Net(world.url)

    async def wait(self, prefix, after, timeout=15, errors=False):
        stream = self.proc.errors if errors else self.proc.lines
        return await asyncio.to_thread(self.proc.wait_for, prefix, timeout, after, stream)

    async def ring(self, mallory, description, **offer):
        """Mallory's offer shown as an invitation naming her; consent given."""
        out, err = self.proc.mark()
        await mallory.offer(description, **offer)
        line = await self.wait("incoming ", out)
        check(line == "incoming " + mallory.peer.id, "the invitation names the caller: %r" % line)
        return out, err

    def consent(self):
        self.proc.type("yes")

    async def refused(self, mallory, mark, expected):
        """The call ended with a reason that says `expected`, the peer heard `close` `error`,
        and the answerer waits for the next call."""
        out, err = mark
        line = await self.wait("ended ", out)
        check(expected in line, "the reason names the problem (%r): %r" % (expected, line))
        note = await self.wait("tether: answer: the call ended: ", err, errors=True)
        check(note == "tether: answer: the call ended: " + line[len("ended "):], "the same reason on standard error: %r" % note)
        check(await mallory.next("close") == {"reason": "error"}, "the caller heard close error")
        await self.wait("answer: waiting for a call", err, errors=True)
        check(self.proc.p.poll() is None, "tether answer keeps running")
        return line


async def malformed_offer(bob, description, expected):
    mallory = await Mallory.connect(bob.net, bob.id)
    try:
        mark = await bob.ring(mallory, description)
        bob.consent()
        await bob.refused(mallory, mark, expected)
        check("answer" not in mallory.kinds(), "no answer to a refused offer")
    finally:
        await mallory.close()


async def malformed_candidate(bob, value, expected, while_ringing=False):
    mallory = await Mallory.connect(bob.net, bob.id)
    try:
        mark = await bob.ring(mallory, sdp(BASE))
        candidate = {"candidate": value, "sdpMid": "0", "sdpMLineIndex": 0}
        if while_ringing:
            # Held by the answerer's call until consent, then handed to the transport with the
            # offer (§7.3 step 3).
            await mallory.send("candidate", candidate)
            bob.consent()
        else:
            bob.consent()
            answer = await mallory.next("answer")
            check(answer["sdp"].startswith("v=0\r\n"), "the well-formed offer was answered")
            await mallory.send("candidate", candidate)
        await bob.refused(mallory, mark, expected)
    finally:
        await mallory.close()


async def scenario_ignored(bob):
    mallory = await Mallory.connect(bob.net, bob.id)
    try:
        out, err = await bob.ring(mallory, sdp(BASE))
        bob.consent()
        await mallory.next("answer")
        for body in ({"candidate": "candidate:1 1 UDP 2122260223 127.0.0.1 5000 typ host", "sdpMid": None, "sdpMLineIndex": None},
                     {"candidate": "candidate:1 1 UDP 2122260223 127.0.0.1 5000 typ host", "sdpMid": None, "sdpMLineIndex": 0.5},
                     {"candidate": "candidate:1 1 UDP 2122260223 127.0.0.1 5000 typ host", "sdpMid": None, "sdpMLineIndex": -1},
                     {"candidate": 7, "sdpMid": "0", "sdpMLineIndex": 0},
                     {"candidate": "candidate:1 1 UDP 2122260223 127.0.0.1 5000 typ host", "sdpMid": "0"},
                     [1, 2, 3]):
            await mallory.send("candidate", body)
        await mallory.send("candidate", body_b64=b64(b"not json {"))
        for value, mid, index in (("candidate:1 1 UDP 2122260223 0b4e2c8a-1f3d-4e5a-9b6c-7d8e9f0a1b2c.local 5000 typ host", "0", 0),
                                  ("candidate:1 1 SCTP 2122260223 127.0.0.1 5000 typ host", "0", 0),
                                  ("candidate:1 1 UDP 2122260223 127.0.0.1 5000 typ fancy", "0", 0),
                                  ("not even a candidate, but for an m-line the offer does not have", "1", 1)):
            await mallory.send("candidate", {"candidate": value, "sdpMid": mid, "sdpMLineIndex": index})
        await mallory.send("close", {"reason": "hangup"})
        line = await bob.wait("ended ", out)
        check(line == "ended the peer hung up", "only the caller's close ended the call: %r" % line)
        await bob.wait("answer: waiting for a call", err, errors=True)
        check([l for l in bob.proc.lines[out:] if l.startswith("ended ")] == ["ended the peer hung up"], "one end, the hang-up")
        check("close" not in mallory.kinds(), "the answerer sent no close of its own")
    finally:
        await mallory.close()


async def scenario_forged_binding(bob):
    mallory = await Mallory.connect(bob.net, bob.id)
    try:
        out, _ = bob.proc.mark()
        other = X25519PrivateKey.generate().public_key().public_bytes(*RAW)
        await mallory.offer(sdp(BASE), binding_key=other)
        await asyncio.sleep(1.5)
        check(not any(line.startswith("incoming ") for line in bob.proc.lines[out:]), "an offer with a forged binding is never shown")
        check(mallory.kinds() == [], "nor answered: %r" % mallory.kinds())
        check(bob.proc.p.poll() is None, "tether answer keeps running")
    finally:
        await mallory.close()


async def scenario_fingerprint(bob):
    mallory = await Mallory.connect(bob.net, bob.id)
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    try:
        channel = pc.createDataChannel("cryptext", ordered=True)
        opened = []
        channel.on("open", lambda: opened.append(True))
        await pc.setLocalDescription(await pc.createOffer())
        honest = pc.localDescription.sdp
        other = {f.algorithm: f.value for f in RTCCertificate.generateCertificate().getFingerprints()}
        lying = re.sub(r"a=fingerprint:(\S+) (\S+)", lambda m: "a=fingerprint:%s %s" % (m.group(1), other[m.group(1)]), honest)
        check(lying != honest and "a=fingerprint:sha-256 " in lying, "the offer names another certificate")
        mark = await bob.ring(mallory, lying)
        bob.consent()
        answer = await mallory.next("answer")
        # aiortc takes the answerer's trickled candidates inline, with the end of candidates.
        lines = []
        while True:
            candidate = await mallory.next("candidate")
            if candidate["candidate"] == "":
                break
            lines.append("a=" + candidate["candidate"] + "\r\n")
        check(lines, "the answerer sent candidates")
        await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"] + "".join(lines) + "a=end-of-candidates\r\n", type="answer"))
        line = await bob.refused(mallory, mark, "DTLS: the peer's certificate does not match the SDP fingerprint")
        check(line == "ended the connection failed (DTLS: the peer's certificate does not match the SDP fingerprint)", line)
        check(not opened, "aiortc's data channel never opened")
    finally:
        await pc.close()
        await mallory.close()


async def scenario_good_call(bob):
    world = bob.world
    a_state, a_id, _ = world.identity("alice")
    out, err = bob.proc.mark()
    alice = world.call("alice", a_state, bob.id)
    check(await bob.wait("incoming ", out) == "incoming " + a_id, "the invitation names Alice")
    bob.consent()
    a_number = (await asyncio.to_thread(alice.wait_for, "secured "))[len("secured "):]
    b_number = (await bob.wait("secured ", out))[len("secured "):]
    check(a_number == b_number and len(a_number.split(" ")) == 12, "safety numbers %r / %r" % (a_number, b_number))
    alice.type("after all that")
    check(await bob.wait("message ", out) == "message after all that", "Bob got the text")
    alice.eof()
    check(await bob.wait("ended ", out) == "ended the peer hung up", "Bob heard the hang-up")
    check(await asyncio.to_thread(bob.proc.exit_status) == 0, "tether answer exits 0 after its secured call")


def scenarios():
    for name, (description, expected) in MALFORMED_OFFERS.items():
        yield name, lambda bob, d=description, e=expected: malformed_offer(bob, d, e)
    for name, (value, expected) in MALFORMED_CANDIDATES.items():
        yield name, lambda bob, v=value, e=expected: malformed_candidate(bob, v, e)
    yield "candidate-while-ringing", lambda bob: malformed_candidate(bob, "candidate:1 1 UDP 2122260223 127.0.0.1 70000 typ host",
                                                                     "candidate port", while_ringing=True)
    yield "ignored", scenario_ignored
    yield "forged-binding", scenario_forged_binding
    yield "fingerprint", scenario_fingerprint
    yield "good-call", scenario_good_call


async def run(tether):
    # One answerer refusing some twenty calls in a few seconds sends more signals (an answer,
    # candidates and a close each) than §6.4's 50 per 10 s; that limit is not under test here.
    world = World(tether, server_flags=("--signal-signal-rate-limit", "1000"))
    failed = False
    try:
        bob = Answerer(world)
        await bob.wait("answer: waiting for a call", 0, errors=True)
        for name, scenario in scenarios():
            try:
                await asyncio.wait_for(scenario(bob), 30)
                print("PASS " + name, flush=True)
            except (Fail, signal_client.Fail, TimeoutError) as failure:
                failed = True
                print("FAIL %s: %s" % (name, " ".join(str(failure).split()) or type(failure).__name__), flush=True)
    finally:
        world.close()
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tether", required=True)
    sys.exit(asyncio.run(run(parser.parse_args().tether)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""An honest Cryptext v2 call peer, for end-to-end tests of `tether call` and `tether answer` as
a person would use them (issue 33: texts at hang-up, pasted bursts, receipts, lines typed early).
Written from signaling.md only, on PyPI packages: signed signaling through `signal_client.py`
(`websockets`, `cryptography`), the WebRTC data channel through `aiortc`, the secure channel
through `noiseprotocol` (the payload checks of `call_channel_peer.py`). It shares no code with
Tether.

  chat_peer.py --signal URL [options] answer    registers a fresh identity, waits for one call,
                                                accepts it and takes part in it
  chat_peer.py --signal URL [options] call ID   rings ID (a `tether answer`) instead
  chat_peer.py selftest                         checks its own channel rules offline (two
                                                instances, one rule broken at a time): PASS/FAIL
                                                lines, exit 0 only if all passed

options
  --accept-after S      (answer) let it ring S seconds before answering, as a person takes a moment
  --say TEXT ...        texts to send once secured (in order, paced as below); --say-count N adds
                        `text 1` ... `text N`
  --hang-up             once every text it said has its receipt (or --receipt-wait S passed),
                        send `close` `hangup` and end
  --receipt-delay S     send each receipt S seconds after its text arrived (a peer slow to
                        confirm: texts then wait for receipts in larger numbers); default 0
  --receipt-wait S      how long a hang-up (--hang-up) waits for receipts and for its own frames
                        to leave; default 5
  --pace-window S       its sending window for 40 frames (default 1.25, at least 1: §13.1)
  --timeout S           give up (close `timeout`, exit 1) if the call has not ended after S seconds

What it does, as the other side of a call must (signaling.md §7, §9, §10):
  - every forwarded signal is checked (§7.2: signature, recipient, call and peer, body schema,
    the agreement key's binding) and dropped when it fails, reported as a `dropped` event;
  - Noise KK in the role §9.1 gives it, key confirmation, then for each text a receipt (§9.5),
    ids deduplicated over the last 512 (a duplicate gets no receipt);
  - rotations (§10): answers ROTATE_INIT, starts its own every 500 transport frames it sent under
    one epoch or after 10 minutes, the concurrent-request rule, at most 64 messages held while
    its own request is pending;
  - as a receiver it enforces §9.6: 100,000 frames per direction, frames of at most 32,785 bytes,
    and more than 40 incoming frames in a fixed 1,000 ms window (the window starts at the first
    frame counted in it and includes both ends) terminates on the 41st; every bad frame or
    payload terminates too: it closes the channel, sends `close` `error` and exits 3;
  - as a sender it paces itself (§13.1): never more than 40 frames in any --pace-window (default
    1.25 s, wider than the receiver's 1 s so arrival jitter cannot make 41 of them);
  - after `close` it keeps reading the data channel until it closes (at most 1.5 s), so texts that
    were still in flight are reported as arriving after the close.

Standard output: one JSON object per line, each with `event` and `ms` (milliseconds since the
peer started):
  registered {id, link}          incoming {from, call}          calling {to, call}
  answered                       open (the data channel)        secured {safetyNumber}
  text {n, id, text, sentAt, afterClose}      (n counts from 1, in arrival order)
  duplicate {id}                 receipt {id, n} (for a text it said)
  said {n, id, text}             (a text of its own left, sealed)
  rotated {epoch, initiator}     ("peer" or "tether")
  dropped {why}                  (a signal §7.2 drops)
  close {reason, texts, receiptsSent, messagesUnsent, sinceLastTextMs}  (the `close` signal)
  rejected {reason}              channel-closed
  violation {what}               (a §9 rule broken: the channel is terminated)
  failure {what}                 (the call failed otherwise: setup, signaling, a missing close)
  end {status, texts, receiptsSent, receiptsReceived, framesIn, framesOut, windowMax (the most
       frames it counted in one 1,000 ms window), epoch, firstTextMs, lastTextMs, closeReason,
       violations}               (always the last line)
Exit status: 0 after a call that the other side (or --hang-up) ended with `close`, 3 on a protocol
violation, 1 when the call failed or timed out, 2 on bad arguments.
"""
import argparse
import asyncio
import collections
import hashlib
import json
import sys
import time
import uuid

import aioice.ice
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.sdp import candidate_from_sdp
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from noise.connection import Keypair, NoiseConnection

import signal_client
from call_channel_peer import READY, ROTATE_INIT, ROTATE_RESP, Violation, parse_payload
from signal_client import ID_RE, Net, Peer, b64, b64decode_strict, identity_binding, new_call, signal_string, strict_json


def loopback_only(use_ipv4, use_ipv6):
    return ["127.0.0.1"] if use_ipv4 else []


# The tests need no network: aiortc gathers on loopback only.
aioice.ice.get_host_addresses = loopback_only

RAW = serialization.Encoding.Raw, serialization.PublicFormat.Raw

# §9.6, §9.5, §10, §7.5 and §13.1.
FRAMES_PER_DIRECTION = 100_000
FRAMES_PER_WINDOW = 40
RATE_WINDOW = 1.0
MAX_FRAME = 32_785
MAX_PAYLOAD = 32_768
ROTATE_AFTER_FRAMES = 500
ROTATE_AFTER_SECONDS = 600
ROTATION_QUEUE = 64
DEDUP_WINDOW = 512
HELD_EARLY_FRAMES = 16
QUEUED_CANDIDATES = 64
HANDSHAKE_MESSAGE = 48
AFTER_CLOSE_GRACE = 1.5
CLOSE_AFTER_CHANNEL_GRACE = 3.0

STARTED = time.monotonic()


def now():
    return time.monotonic()


def ms(instant):
    return None if instant is None else round((instant - STARTED) * 1000, 1)


def emit(event, **fields):
    record = {"event": event, "ms": ms(now())}
    record.update(fields)
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def safety_number(first_id, second_id):
    """§11: the two ID keys sorted, two SHA-256 blocks, twelve groups of five digits."""
    low, high = sorted([bytes.fromhex(first_id), bytes.fromhex(second_id)])
    m = b"".join(hashlib.sha256(b"cryptext.safety-number.v2\x00" + bytes([i]) + low + high).digest() for i in (1, 2))
    return " ".join("%05d" % (int.from_bytes(m[5 * g:5 * g + 5], "big") % 100_000) for g in range(12))


class SignalDropped(Exception):
    """A forwarded signal that §7.2 says to drop."""


# ------------------------------------------------------------------------------------------------
# The secure channel (§9, §10), independent of the transport: frames in, frames out.
# ------------------------------------------------------------------------------------------------

class RateWindow:
    """§9.6 as a receiver counts: fixed 1,000 ms windows, each starting at the first frame
    counted in it and including both ends; the 41st frame in one terminates."""

    def __init__(self):
        self.start, self.count, self.max = None, 0, 0

    def count_frame(self, at):
        if self.start is None or at - self.start > RATE_WINDOW:
            self.start, self.count = at, 0
        self.count += 1
        self.max = max(self.max, self.count)
        if self.count > FRAMES_PER_WINDOW:
            raise Violation("frame %d within %.0f ms of the window's first frame: more than %d incoming frames in a %d ms window"
                            % (self.count, (at - self.start) * 1000, FRAMES_PER_WINDOW, RATE_WINDOW * 1000))


class Pacer:
    """§13.1 as a sender: at most 40 frames in any `window` seconds (sliding)."""

    def __init__(self, window):
        self.window = window
        self.sent = collections.deque(maxlen=FRAMES_PER_WINDOW)

    def delay(self, at):
        if len(self.sent) < FRAMES_PER_WINDOW:
            return 0.0
        wait = self.sent[0] + self.window - at
        return wait + 0.0005 if wait >= 0 else 0.0

    def record(self, at):
        self.sent.append(at)


class SecureChannel:
    """One call's Noise channel. `receive` takes a frame from the data channel and returns what it
    meant; `next_frame` gives the next frame the pacer may send (sealed only when it leaves, so
    nonces and epochs follow the order on the wire)."""

    def __init__(self, caller, call, caller_id, callee_id, static_private, remote_static):
        self.caller = caller
        self.caller_id, self.callee_id = caller_id, callee_id
        kk = NoiseConnection.from_name(b"Noise_KK_25519_ChaChaPoly_SHA256")
        kk.set_as_initiator() if caller else kk.set_as_responder()
        kk.set_keypair_from_private_bytes(Keypair.STATIC, static_private)
        kk.set_keypair_from_public_bytes(Keypair.REMOTE_STATIC, remote_static)
        kk.set_prologue(("cryptext.channel.v2\n%s\n%s\n%s" % (call, caller_id, callee_id)).encode())
        kk.start_handshake()
        self.noise = kk
        self.session_id = None
        self.confirmed = False          # the peer's key confirmation arrived
        self.epoch, self.epoch_started, self.sent_under_epoch = 0, None, 0
        self.pending = None             # our NN request, waiting for ROTATE_RESP
        self.answering = False          # a ROTATE_RESP of ours waits to leave
        self.jobs = collections.deque()  # ("raw", frame) | ("ready",) | ("resp", nn, msg2) | ("message", plaintext, note)
        self.messages_queued = 0
        self.frames_in = self.frames_out = 0
        self.window = RateWindow()
        self.recent = collections.deque()
        self.recent_set = set()

    # -- handshake ---------------------------------------------------------------------------

    def start(self):
        """The caller's handshake message 1 (§9.3)."""
        self.jobs.append(("raw", b"\x01" + self.noise.write_message(b"")))

    def _split(self, at):
        self.session_id = self.noise.get_handshake_hash()
        self.epoch_started = at
        self.jobs.append(("ready",))

    # -- sending -----------------------------------------------------------------------------

    def queue_message(self, plaintext, note=None):
        if len(plaintext) > MAX_PAYLOAD:
            raise Violation("own payload over %d bytes" % MAX_PAYLOAD)
        self.jobs.append(("message", plaintext, note))
        self.messages_queued += 1
        if self.pending is not None and self.messages_queued > ROTATION_QUEUE:
            raise Violation("more than %d messages held during our own rotation (no ROTATE_RESP)" % ROTATION_QUEUE)

    def queue_receipt(self, ident):
        receipt = {"v": 2, "type": "receipt", "id": ident}
        self.queue_message(json.dumps(receipt, separators=(",", ":")).encode(), ("receipt-sent", ident))

    def _seal(self, plaintext):
        self.sent_under_epoch += 1
        return b"\x02" + self.noise.encrypt(plaintext)

    def _nn(self, initiator):
        nn = NoiseConnection.from_name(b"Noise_NN_25519_ChaChaPoly_SHA256")
        nn.set_as_initiator() if initiator else nn.set_as_responder()
        prologue = "cryptext.rotate.v2\n%s\n%s\n%s\n%d" % (self.session_id.hex(), self.caller_id, self.callee_id, self.epoch + 1)
        nn.set_prologue(prologue.encode())
        nn.start_handshake()
        return nn

    def _switch(self, nn, at, by):
        self.noise, self.pending, self.answering = nn, None, False
        self.epoch += 1
        self.epoch_started, self.sent_under_epoch = at, 0
        return ("rotated", self.epoch, by)

    def next_frame(self, at):
        """(frame, note) for the next frame that may leave now, or None if none may; note says
        what the frame carried for the report."""
        if self.frames_out >= FRAMES_PER_DIRECTION:
            return None
        while self.jobs:
            job = self.jobs[0]
            if job[0] == "raw":
                self.jobs.popleft()
                return job[1], None
            if job[0] == "ready":
                self.jobs.popleft()
                return self._seal(READY), None
            if job[0] == "resp":
                self.jobs.popleft()
                frame = self._seal(bytes([ROTATE_RESP]) + job[2])
                return frame, self._switch(job[1], at, "tether")
            # An application message: held while our request waits, and preceded by a rotation
            # when one is due (§10: "before sending its next message").
            if self.pending is not None:
                return None
            if self.sent_under_epoch >= ROTATE_AFTER_FRAMES or at - self.epoch_started >= ROTATE_AFTER_SECONDS:
                nn = self._nn(initiator=True)
                self.pending = nn
                return self._seal(bytes([ROTATE_INIT]) + nn.write_message(b"")), None
            self.jobs.popleft()
            self.messages_queued -= 1
            return self._seal(job[1]), job[2]
        return None

    # -- receiving ---------------------------------------------------------------------------

    def receive(self, frame, at):
        """What the frame meant: None, ("secured",), ("text", payload), ("duplicate", id),
        ("receipt", id), ("rotated", epoch, by); raises Violation to terminate."""
        self.frames_in += 1
        if self.frames_in > FRAMES_PER_DIRECTION:
            raise Violation("incoming frame %d: over %d frames in one direction" % (self.frames_in, FRAMES_PER_DIRECTION))
        self.window.count_frame(at)
        if not frame:
            raise Violation("an empty frame")
        if len(frame) > MAX_FRAME:
            raise Violation("a frame of %d bytes (over %d)" % (len(frame), MAX_FRAME))
        kind, message = frame[0], frame[1:]
        if kind == 0x01:
            if self.noise.handshake_finished or (self.caller and not self.jobs_sent_handshake()):
                raise Violation("a handshake frame where none is expected")
            if len(message) != HANDSHAKE_MESSAGE:
                raise Violation("handshake message of %d bytes" % len(message))
            try:
                if self.noise.read_message(message) != b"":
                    raise Violation("a handshake message with a payload")
            except Violation:
                raise
            except Exception as error:
                raise Violation("handshake message refused: %s %s" % (type(error).__name__, error))
            if not self.caller:
                self.jobs.append(("raw", b"\x01" + self.noise.write_message(b"")))
            self._split(at)
            return None
        if kind != 0x02:
            raise Violation("frame type 0x%02x" % kind)
        if not self.noise.handshake_finished:
            raise Violation("a transport frame before the handshake finished")
        try:
            plaintext = self.noise.decrypt(message)
        except Exception as error:
            raise Violation("a transport frame that does not decrypt under epoch %d: %s" % (self.epoch, type(error).__name__))
        if not self.confirmed:
            if plaintext != READY:
                raise Violation("the first transport plaintext is not the key confirmation")
            self.confirmed = True
            return ("secured",)
        first = plaintext[:1]
        if first == bytes([ROTATE_INIT]):
            if self.answering:
                raise Violation("a second ROTATE_INIT before the rotation completed")
            if self.pending is not None:
                if self.caller:
                    return None  # the caller's own request wins (§10)
                self.pending = None  # the callee abandons its own, keeping its queued messages
            nn = self._nn(initiator=False)
            try:
                if nn.read_message(plaintext[1:]) != b"":
                    raise Violation("an NN message 1 with a payload")
            except Violation:
                raise
            except Exception as error:
                raise Violation("a malformed NN message 1: %s" % error)
            # ROTATE_RESP leaves before anything this side was about to write (§10 step 2).
            self.jobs.appendleft(("resp", nn, nn.write_message(b"")))
            self.answering = True
            return None
        if first == bytes([ROTATE_RESP]):
            if self.pending is None:
                raise Violation("ROTATE_RESP without a request")
            try:
                if self.pending.read_message(plaintext[1:]) != b"":
                    raise Violation("an NN message 2 with a payload")
            except Violation:
                raise
            except Exception as error:
                raise Violation("a malformed NN message 2: %s" % error)
            return self._switch(self.pending, at, "peer")
        if first == b"{":
            payload = parse_payload(plaintext)
            if type(payload.get("sentAt", 0)) is int and abs(payload.get("sentAt", 0)) > 1 << 53:
                raise Violation("sentAt over 2^53")
            if payload["type"] == "receipt":
                return ("receipt", payload["id"])
            if payload["id"] in self.recent_set:
                return ("duplicate", payload["id"])
            self.recent.append(payload["id"])
            self.recent_set.add(payload["id"])
            if len(self.recent) > DEDUP_WINDOW:
                self.recent_set.discard(self.recent.popleft())
            return ("text", payload)
        raise Violation("a transport plaintext that starts with 0x%02x" % plaintext[0] if plaintext else "an empty transport plaintext")

    def jobs_sent_handshake(self):
        # The caller expects message 2 only after its message 1 left.
        return self.frames_out > 0


# ------------------------------------------------------------------------------------------------
# The call: signaling, the data channel, the report.
# ------------------------------------------------------------------------------------------------

class ChatPeer:
    def __init__(self, args):
        self.args = args
        self.key = Ed25519PrivateKey.generate()
        self.agreement = X25519PrivateKey.generate()
        self.agreement_public = self.agreement.public_key().public_bytes(*RAW)
        self.signaling = None
        self.call, self.other, self.other_agreement = None, None, None
        self.caller = args.mode == "call"
        self.pc = None
        self.dc = None
        self.remote_set = False
        self.queued_candidates = []
        self.channel = None
        self.accepting_frames = False
        self.held_frames = []
        self.peer_channel = False
        self.channel_sent = False
        self.changed = asyncio.Event()
        self.done = asyncio.get_running_loop().create_future()
        self.closing_at = None
        self.close_reason = None
        self.violations = []
        self.texts = 0
        self.first_text, self.last_text = None, None
        self.receipts_sent = 0
        self.said = {}          # id -> n, texts this peer sent that still await their receipt
        self.said_count = 0
        self.receipts_in = 0
        self.delayed_receipts = 0
        self.writer = None
        self.tasks = []

    # -- signaling ---------------------------------------------------------------------------

    async def signal(self, kind, body):
        await self.signaling.signal(self.other, kind=kind, body=body, call=self.call)

    def check_signal(self, message):
        """§7.2 for a forwarded signal; the body, or SignalDropped."""
        if message.get("type") != "signal":
            raise SignalDropped("not a signal: %s" % json.dumps(message)[:200])
        kind, frm = message.get("kind"), message.get("from")
        if message.get("to") != self.signaling.id:
            raise SignalDropped("a %s to another ID" % kind)
        if not isinstance(frm, str) or not ID_RE.match(frm):
            raise SignalDropped("a %s from a non-canonical ID" % kind)
        try:
            Ed25519PublicKey.from_public_bytes(bytes.fromhex(frm)).verify(
                b64decode_strict(message.get("sig")), signal_string(kind, frm, message["to"], message.get("call"), message.get("body")))
            body = strict_json(b64decode_strict(message.get("body")).decode("utf-8"))
        except (InvalidSignature, ValueError, TypeError) as error:
            raise SignalDropped("a %s that does not verify or parse: %s" % (kind, error))
        if not isinstance(body, dict):
            raise SignalDropped("a %s body that is not an object" % kind)
        if kind != "offer" and (frm != self.other or message.get("call") != self.call):
            raise SignalDropped("a %s not from this call's peer or for another call" % kind)
        return kind, body

    def description(self, frm, body, kind):
        """§7.1 and §3.2: the SDP and the agreement key, once its binding verified under `frm`."""
        sdp, key, sig = body.get("sdp"), body.get("agreementKey"), body.get("identitySig")
        if not isinstance(sdp, str):
            raise SignalDropped("a %s without an sdp string" % kind)
        try:
            key, sig = b64decode_strict(key), b64decode_strict(sig)
        except ValueError as error:
            raise SignalDropped("a %s with a bad agreementKey or identitySig: %s" % (kind, error))
        if len(key) != 32 or len(sig) != 64 or key == bytes(32):
            raise SignalDropped("a %s with a wrong-sized or zero agreementKey or identitySig" % kind)
        try:
            Ed25519PublicKey.from_public_bytes(bytes.fromhex(frm)).verify(sig, identity_binding(key))
        except InvalidSignature:
            raise SignalDropped("a %s whose identitySig does not bind its agreementKey" % kind)
        if self.agreement.exchange(X25519PublicKey.from_public_bytes(key)) == bytes(32):
            raise SignalDropped("a %s with a low-order agreementKey" % kind)
        return sdp, key

    async def read_signals(self):
        while True:
            message = await self.signaling.recv(timeout=24 * 3600)
            if message.get("type") == "error":
                emit("signal-error", code=message.get("code"), message=message.get("message"))
                continue
            try:
                kind, body = self.check_signal(message)
                await self.on_signal(kind, message, body)
            except SignalDropped as dropped:
                emit("dropped", why=str(dropped))

    async def keepalive(self):
        # §4: clients ping every 15 s.
        while True:
            await asyncio.sleep(15)
            await self.signaling.ws.ping()

    async def on_signal(self, kind, message, body):
        if kind == "offer":
            if self.caller:
                raise SignalDropped("an offer to a caller")
            if self.call is not None:
                if message["from"] == self.other and message["call"] == self.call:
                    raise SignalDropped("a second offer for this call")
                # §7.2: only one call at a time.
                await self.signaling.signal(message["from"], kind="reject", body={"reason": "busy"}, call=message["call"])
                return
            sdp, key = self.description(message["from"], body, kind)
            self.call, self.other, self.other_agreement = message["call"], message["from"], key
            emit("incoming", **{"from": self.other, "call": self.call})
            self.spawn(self.accept(sdp))
        elif kind == "answer":
            if not self.caller or self.remote_set:
                raise SignalDropped("an answer this side does not wait for")
            sdp, key = self.description(message["from"], body, kind)
            self.other_agreement = key
            emit("answered")
            await self.pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="answer"))
            await self.remote_description_set()
        elif kind == "candidate":
            await self.on_candidate(body)
        elif kind == "channel":
            if body != {}:
                raise SignalDropped("a channel body that is not {}")
            self.peer_channel = True
            self.start_handshake_if_ready()
        elif kind == "reject":
            if not self.caller:
                raise SignalDropped("a reject to the callee")
            emit("rejected", reason=body.get("reason"))
            self.finish(1)
        elif kind == "close":
            self.on_close(body.get("reason"))

    async def on_candidate(self, body):
        value, mid, index = body.get("candidate"), body.get("sdpMid"), body.get("sdpMLineIndex")
        if not isinstance(value, str) or "sdpMid" not in body or "sdpMLineIndex" not in body:
            raise SignalDropped("a candidate body outside the schema")
        if not (mid is None or isinstance(mid, str)) or not (index is None or (type(index) is int and index >= 0)) or (mid is None and index is None):
            raise SignalDropped("a candidate with bad locators")
        if value == "":
            candidate = None
        else:
            text = value[len("candidate:"):] if value.startswith("candidate:") else value
            try:
                candidate = candidate_from_sdp(text)
            except (AssertionError, ValueError, IndexError) as error:
                emit("candidate-skipped", candidate=value, why=str(error))
                return
            candidate.sdpMid, candidate.sdpMLineIndex = mid, index
        if not self.remote_set:
            if len(self.queued_candidates) >= QUEUED_CANDIDATES:
                await self.end_with_close("error", "more than %d candidates before the remote description" % QUEUED_CANDIDATES, 1)
                return
            self.queued_candidates.append(candidate)
            return
        await self.pc.addIceCandidate(candidate)

    async def remote_description_set(self):
        self.remote_set = True
        queued, self.queued_candidates = self.queued_candidates, []
        for candidate in queued:
            await self.pc.addIceCandidate(candidate)

    async def send_end_of_candidates(self):
        # aiortc puts every candidate in its description; the end of candidates still goes as
        # §13.1 writes it, with the data m-line's locators.
        sdp = self.pc.localDescription.sdp
        mid = next((line[len("a=mid:"):].strip() for line in sdp.splitlines() if line.startswith("a=mid:")), "0")
        await self.signal("candidate", {"candidate": "", "sdpMid": mid, "sdpMLineIndex": 0})

    def description_body(self, sdp):
        return {"sdp": sdp, "agreementKey": b64(self.agreement_public),
                "identitySig": b64(self.key.sign(identity_binding(self.agreement_public)))}

    # -- the call ----------------------------------------------------------------------------

    def new_connection(self):
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))

        @self.pc.on("datachannel")
        def on_datachannel(channel):
            self.attach(channel)

        @self.pc.on("connectionstatechange")
        async def on_state():
            if self.pc is not None and self.pc.connectionState == "failed":
                await self.end_with_close("error", "the peer connection failed", 1)

    async def accept(self, sdp):
        if self.args.accept_after:
            await asyncio.sleep(self.args.accept_after)  # ringing, as a person takes a moment
        self.new_connection()
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="offer"))
        await self.remote_description_set()
        await self.pc.setLocalDescription(await self.pc.createAnswer())
        await self.signal("answer", self.description_body(self.pc.localDescription.sdp))
        emit("answered")
        await self.send_end_of_candidates()

    async def dial(self, callee):
        if not ID_RE.match(callee):
            raise SystemExit("call: %r is not a canonical ID" % callee)
        self.call, self.other = new_call(), callee
        self.new_connection()
        self.attach(self.pc.createDataChannel("cryptext", ordered=True))
        await self.pc.setLocalDescription(await self.pc.createOffer())
        await self.signal("offer", self.description_body(self.pc.localDescription.sdp))
        emit("calling", to=callee, call=self.call)
        await self.send_end_of_candidates()

    def attach(self, channel):
        if self.dc is not None or channel.label != "cryptext":
            emit("dropped", why="a data channel %r besides the call's" % channel.label)
            return
        self.dc = channel
        channel.on("open", lambda: self.spawn(self.on_open()))
        channel.on("message", self.on_frame)
        channel.on("close", self.on_channel_closed)
        if channel.readyState == "open":
            self.spawn(self.on_open())

    async def on_open(self):
        if self.channel is not None:
            return
        emit("open")
        caller_id, callee_id = (self.signaling.id, self.other) if self.caller else (self.other, self.signaling.id)
        private = self.agreement.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
        self.channel = SecureChannel(self.caller, self.call, caller_id, callee_id, private, self.other_agreement)
        self.writer = self.spawn(self.write_frames())
        await self.signal("channel", {})
        self.channel_sent = True
        if not self.caller:
            # §7.3 step 5: the callee takes handshake frames once it has sent `channel`.
            self.accepting_frames = True
            held, self.held_frames = self.held_frames, []
            for frame, at in held:
                self.take_frame(frame, at)
        self.start_handshake_if_ready()

    def start_handshake_if_ready(self):
        if self.caller and self.peer_channel and self.channel is not None and not self.accepting_frames:
            self.accepting_frames = True
            self.channel.start()
            self.changed.set()

    def on_frame(self, message):
        at = now()
        if self.done.done() or self.violations:
            return
        frame = message if isinstance(message, bytes) else message.encode()
        if not self.accepting_frames:
            if len(self.held_frames) >= HELD_EARLY_FRAMES:
                self.terminate("more than %d frames before the handshake could start" % HELD_EARLY_FRAMES)
                return
            self.held_frames.append((frame, at))
            return
        self.take_frame(frame, at)

    def take_frame(self, frame, at):
        try:
            meaning = self.channel.receive(frame, at)
        except Violation as violation:
            self.terminate(str(violation))
            return
        self.changed.set()
        if meaning is None:
            return
        if meaning[0] == "secured":
            emit("secured", safetyNumber=safety_number(self.signaling.id, self.other))
            self.say()
        elif meaning[0] == "text":
            payload = meaning[1]
            self.texts += 1
            self.first_text = self.first_text or at
            self.last_text = at
            emit("text", n=self.texts, id=payload["id"], text=payload["text"], sentAt=payload["sentAt"],
                 afterClose=self.closing_at is not None)
            if self.closing_at is None:
                if self.args.receipt_delay:
                    self.delayed_receipts += 1
                    asyncio.get_running_loop().call_later(self.args.receipt_delay, self.delayed_receipt, payload["id"])
                else:
                    self.receipt(payload["id"])
        elif meaning[0] == "duplicate":
            emit("duplicate", id=meaning[1])
        elif meaning[0] == "receipt":
            n = self.said.pop(meaning[1], None)
            if n is None:
                return  # §9.5: a receipt for an unknown id is ignored
            self.receipts_in += 1
            emit("receipt", id=meaning[1], n=n)
            self.maybe_hang_up()
        elif meaning[0] == "rotated":
            emit("rotated", epoch=meaning[1], initiator=meaning[2])

    def receipt(self, ident):
        try:
            self.channel.queue_receipt(ident)
        except Violation as violation:
            self.terminate(str(violation))
        self.changed.set()

    def delayed_receipt(self, ident):
        self.delayed_receipts -= 1
        if self.closing_at is None and not self.done.done():
            self.receipt(ident)

    def say(self):
        texts = list(self.args.say or []) + ["text %d" % i for i in range(1, self.args.say_count + 1)]
        for text in texts:
            self.said_count += 1
            ident = str(uuid.uuid4())
            self.said[ident] = self.said_count
            payload = {"v": 2, "type": "text", "id": ident, "text": text, "sentAt": int(time.time() * 1000)}
            try:
                self.channel.queue_message(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode(),
                                           ("said", self.said_count, ident, text))
            except Violation as violation:
                self.terminate(str(violation))
                return
        self.changed.set()
        if texts and self.args.hang_up:
            self.spawn(self.hang_up_later())
        else:
            self.maybe_hang_up()

    def maybe_hang_up(self):
        if self.args.hang_up and not self.said and self.channel is not None and self.channel.confirmed:
            self.spawn(self.end_with_close("hangup", None, 0))

    async def hang_up_later(self):
        await asyncio.sleep(self.args.receipt_wait + len(self.said) / 30)
        if not self.done.done():
            await self.end_with_close("hangup", None, 0)

    async def write_frames(self):
        """The only sender on the data channel: frames leave in order, paced (§13.1)."""
        pacer = Pacer(self.args.pace_window)
        while not self.done.done() and self.closing_at is None:
            self.changed.clear()
            while self.channel.jobs and self.closing_at is None and not self.done.done():
                wait = pacer.delay(now())
                if wait > 0:
                    await asyncio.sleep(wait)
                    continue
                if self.dc is None or self.dc.readyState != "open":
                    return
                at = now()
                try:
                    out = self.channel.next_frame(at)
                except Violation as violation:
                    self.terminate(str(violation))
                    return
                if out is None:
                    break
                frame, note = out
                self.dc.send(frame)
                self.channel.frames_out += 1
                pacer.record(at)
                if note is None:
                    continue
                if note[0] == "receipt-sent":
                    self.receipts_sent += 1
                elif note[0] == "said":
                    emit("said", n=note[1], id=note[2], text=note[3])
                elif note[0] == "rotated":
                    emit("rotated", epoch=note[1], initiator=note[2])
            await self.changed.wait()

    def spawn(self, coroutine):
        """A task whose failure ends the call (reported), never one that fails unseen."""
        async def guarded():
            try:
                await coroutine
            except asyncio.CancelledError:
                raise
            except Exception as error:
                emit("failure", what="%s: %s" % (type(error).__name__, error))
                self.finish(1)
        task = asyncio.ensure_future(guarded())
        self.tasks.append(task)
        return task

    # -- the end -----------------------------------------------------------------------------

    def on_close(self, reason):
        if self.closing_at is not None or self.done.done():
            return
        self.closing_at = now()
        self.close_reason = reason
        unsent = (self.channel.messages_queued if self.channel is not None else 0) + self.delayed_receipts
        emit("close", reason=reason, texts=self.texts, receiptsSent=self.receipts_sent, messagesUnsent=unsent,
             sinceLastTextMs=None if self.last_text is None else round((self.closing_at - self.last_text) * 1000, 1))
        self.changed.set()
        self.spawn(self.after_close())

    async def after_close(self):
        # Texts still in flight on the data channel may land after the signal that ended the
        # call: read until the channel closes, briefly.
        end = now() + AFTER_CLOSE_GRACE
        while now() < end and self.dc is not None and self.dc.readyState == "open":
            await asyncio.sleep(0.02)
        self.finish(0 if not self.violations else 3)

    def on_channel_closed(self):
        if self.done.done() or self.closing_at is not None:
            return
        emit("channel-closed")

        async def wait_for_close():
            await asyncio.sleep(CLOSE_AFTER_CHANNEL_GRACE)
            if self.closing_at is None and not self.done.done():
                emit("failure", what="the data channel closed and no `close` followed within %.0f s" % CLOSE_AFTER_CHANNEL_GRACE)
                self.finish(1)
        self.spawn(wait_for_close())

    def terminate(self, what):
        """§9.6: stop reading, close the channel, `close` `error`, report."""
        if self.done.done():
            return
        self.violations.append(what)
        emit("violation", what=what)
        self.spawn(self.end_with_close("error", None, 3))

    async def end_with_close(self, reason, why, status):
        if self.done.done() or self.closing_at is not None:
            return
        if why:
            emit("failure", what=why)
        if reason == "hangup" and self.channel is not None:
            # An honest hang-up lets what it already accepted leave first (receipts included).
            end = now() + self.args.receipt_wait
            while self.channel.jobs and now() < end and self.dc is not None and self.dc.readyState == "open":
                await asyncio.sleep(0.02)
        if self.done.done() or self.closing_at is not None:
            return
        self.closing_at = now()
        self.close_reason = "sent " + reason
        try:
            await self.signal("close", {"reason": reason})
        except Exception as error:  # signaling gone: the close cannot be said
            emit("failure", what="could not send close: %s" % error)
        if reason == "hangup":
            # The `close` names the reason; tearing the connection down at once (aiortc aborts the
            # SCTP association) could reach the other side first and read as a failed connection.
            # Let the other side, having read `close`, close the channel (1.5 s at most).
            end = now() + AFTER_CLOSE_GRACE
            while now() < end and self.dc is not None and self.dc.readyState == "open":
                await asyncio.sleep(0.02)
        self.finish(status)

    def finish(self, status):
        if not self.done.done():
            self.done.set_result(status)

    def summary(self, status):
        emit("end", status=status, texts=self.texts, receiptsSent=self.receipts_sent, receiptsReceived=self.receipts_in,
             framesIn=self.channel.frames_in if self.channel else 0, framesOut=self.channel.frames_out if self.channel else 0,
             windowMax=self.channel.window.max if self.channel else 0, epoch=self.channel.epoch if self.channel else 0,
             firstTextMs=ms(self.first_text), lastTextMs=ms(self.last_text), closeReason=self.close_reason,
             violations=self.violations)

    async def run(self):
        self.signaling = await Peer.connect(Net(self.args.signal), key=self.key, name="chat-peer")
        await self.signaling.register()
        link = "cryptext://contact/v2/%s" % self.signaling.id
        emit("registered", id=self.signaling.id, link=link)
        reader = asyncio.ensure_future(self.read_signals())
        pinger = asyncio.ensure_future(self.keepalive())
        status = 1
        try:
            if self.caller:
                await self.dial(self.args.callee)
            waiting = [self.done, reader]
            finished, _ = await asyncio.wait(waiting, timeout=self.args.timeout, return_when=asyncio.FIRST_COMPLETED)
            if self.done in finished:
                status = self.done.result()
            elif reader in finished:
                emit("failure", what="signaling ended: %s" % (reader.exception() or "closed"))
            else:
                emit("failure", what="the call did not end within %s s" % self.args.timeout)
                await self.end_with_close("timeout", None, 1)
        finally:
            for task in [reader, pinger, self.writer] + self.tasks:
                if task is not None and not task.done():
                    task.cancel()
            if self.pc is not None:
                await self.pc.close()
            await self.signaling.close()
        self.summary(status)
        return status


# ------------------------------------------------------------------------------------------------
# Self-test: the channel's rules against a second instance of itself, no network
# ------------------------------------------------------------------------------------------------

def self_test():
    """Checks that this peer enforces what the end-to-end tests trust it to: two SecureChannels
    (caller and callee) exchange frames directly; then one rule is broken at a time."""
    results = []

    def case(name, function):
        try:
            function()
            results.append("PASS " + name)
        except Exception as error:  # every failure is reported by name, the rest still run
            results.append("FAIL %s: %s: %s" % (name, type(error).__name__, error))

    def expect(condition, why):
        if not condition:
            raise AssertionError(why)

    def refused(function, words):
        try:
            function()
        except Violation as violation:
            expect(words in str(violation), "the violation names %r: %s" % (words, violation))
            return
        raise AssertionError("no violation (%s)" % words)

    def pair():
        keys = [X25519PrivateKey.generate() for _ in range(2)]
        raw = [k.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()) for k in keys]
        public = [k.public_key().public_bytes(*RAW) for k in keys]
        ids = [signal_client.id_of(Ed25519PrivateKey.generate()) for _ in range(2)]
        call = new_call()
        caller = SecureChannel(True, call, ids[0], ids[1], raw[0], public[1])
        callee = SecureChannel(False, call, ids[0], ids[1], raw[1], public[0])
        clock = [100.0]
        return caller, callee, clock

    def flush(sender, receiver, clock, step=0.05):
        """Every frame `sender` may send, delivered at once (spaced by `step` seconds)."""
        meanings = []
        while True:
            out = sender.next_frame(clock[0])
            if out is None:
                return meanings
            sender.frames_out += 1
            clock[0] += step
            meanings.append(receiver.receive(out[0], clock[0]))

    def secured():
        caller, callee, clock = pair()
        caller.start()
        flush(caller, callee, clock)
        flush(callee, caller, clock)
        flush(caller, callee, clock)
        expect(caller.confirmed and callee.confirmed, "both confirmed")
        expect(caller.session_id == callee.session_id, "one session ID")
        return caller, callee, clock

    def text(channel, body, ident=None):
        payload = {"v": 2, "type": "text", "id": ident or str(uuid.uuid4()), "text": body, "sentAt": 1}
        channel.queue_message(json.dumps(payload).encode())

    def chat():
        caller, callee, clock = secured()
        text(caller, "hello")
        got = flush(caller, callee, clock)
        expect(got[0][0] == "text" and got[0][1]["text"] == "hello", "the text arrived: %r" % got)
        callee.queue_receipt(got[0][1]["id"])
        expect(flush(callee, caller, clock)[0] == ("receipt", got[0][1]["id"]), "the receipt arrived")

    def rotation_by_count():
        caller, callee, clock = secured()
        callee.sent_under_epoch = ROTATE_AFTER_FRAMES
        text(callee, "after 500 frames")
        flush(callee, caller, clock)  # ROTATE_INIT, then nothing: the text is held
        expect(callee.pending is not None and callee.jobs, "the text waits for ROTATE_RESP")
        flush(caller, callee, clock)  # ROTATE_RESP: both switch
        got = flush(callee, caller, clock)
        expect(caller.epoch == callee.epoch == 1, "epoch 1 on both sides")
        expect(got and got[-1][0] == "text", "the held text left under the new keys: %r" % got)

    def concurrent_rotations():
        caller, callee, clock = secured()
        caller.sent_under_epoch = callee.sent_under_epoch = ROTATE_AFTER_FRAMES
        text(caller, "from the caller")
        text(callee, "from the callee")
        init_caller = caller.next_frame(clock[0])[0]
        init_callee = callee.next_frame(clock[0])[0]
        caller.frames_out += 1
        callee.frames_out += 1
        expect(caller.receive(init_callee, clock[0]) is None and caller.pending is not None, "the caller ignores the callee's request")
        callee.receive(init_caller, clock[0])
        expect(callee.pending is None and callee.answering, "the callee abandons its own and answers")
        flush(callee, caller, clock)
        flush(caller, callee, clock)
        expect(caller.epoch == callee.epoch == 1, "epoch 1 on both sides after the caller's rotation")

    def rate_window():
        caller, callee, clock = secured()
        start = clock[0] + 10
        for i in range(FRAMES_PER_WINDOW):
            text(caller, "burst %d" % i)
        for i in range(FRAMES_PER_WINDOW):
            callee.receive(caller.next_frame(start)[0], start)
        text(caller, "the 41st, 1,000 ms after the first")
        refused(lambda: callee.receive(caller.next_frame(start + RATE_WINDOW)[0], start + RATE_WINDOW), "more than 40 incoming frames")

    def rate_window_next():
        caller, callee, clock = secured()
        start = clock[0] + 10
        for i in range(FRAMES_PER_WINDOW + 1):
            text(caller, "burst %d" % i)
        for i in range(FRAMES_PER_WINDOW):
            callee.receive(caller.next_frame(start)[0], start)
        callee.receive(caller.next_frame(start + RATE_WINDOW + 0.001)[0], start + RATE_WINDOW + 0.001)

    def bad(frame_of, words):
        """`frame_of(caller)`: the frame the caller sends instead of an honest one."""
        def run():
            caller, callee, clock = secured()
            refused(lambda: callee.receive(frame_of(caller), clock[0] + 1), words)
        return run

    def changed(change):
        """The caller's next honest text frame, changed."""
        def frame_of(caller):
            text(caller, "a text")
            return change(caller.next_frame(0.0)[0])
        return frame_of

    def sealed(plaintext):
        return lambda caller: b"\x02" + caller.noise.encrypt(plaintext)

    def duplicate():
        caller, callee, clock = secured()
        ident = str(uuid.uuid4())
        text(caller, "once", ident)
        text(caller, "twice", ident)
        got = flush(caller, callee, clock)
        expect([m[0] for m in got] == ["text", "duplicate"], "the second is a duplicate: %r" % got)

    def frame_limit():
        caller, callee, clock = secured()
        callee.frames_in = FRAMES_PER_DIRECTION
        text(caller, "the 100,001st")
        refused(lambda: callee.receive(caller.next_frame(clock[0])[0], clock[0] + 1), "over 100000 frames")

    def pacer():
        paced = Pacer(1.25)
        for _ in range(FRAMES_PER_WINDOW):
            expect(paced.delay(0.0) == 0, "40 may leave at once")
            paced.record(0.0)
        expect(1.25 <= paced.delay(0.0) < 1.26, "the 41st waits for the window: %r" % paced.delay(0.0))

    case("handshake, confirmation, text and receipt", chat)
    case("rotation after 500 frames, the held text after it", rotation_by_count)
    case("concurrent rotations: the caller's wins", concurrent_rotations)
    case("41st frame within 1,000 ms terminates", rate_window)
    case("a frame after 1,000 ms starts the next window", rate_window_next)
    case("empty frame terminates", bad(lambda caller: b"", "empty frame"))
    case("unknown frame type terminates", bad(changed(lambda frame: b"\x03" + frame[1:]), "frame type 0x03"))
    case("handshake frame after the handshake terminates", bad(changed(lambda frame: b"\x01" + frame[1:]), "handshake frame"))
    case("tampered ciphertext terminates", bad(changed(lambda frame: frame[:-1] + bytes([frame[-1] ^ 1])), "does not decrypt"))
    case("oversized frame terminates", bad(lambda caller: b"\x02" + bytes(MAX_FRAME), "a frame of 32786 bytes"))
    case("a payload that is not JSON terminates", bad(sealed(b"{not json"), "not JSON"))
    case("a payload with v 3 terminates", bad(sealed(b'{"v":3,"type":"receipt","id":"%s"}' % str(uuid.uuid4()).encode()), "v is not 2"))
    case("an unknown plaintext terminates", bad(sealed(b"\x42"), "starts with 0x42"))
    case("ROTATE_RESP without a request terminates", bad(sealed(b"\x11" + bytes(48)), "ROTATE_RESP without a request"))
    case("a duplicate text gets no receipt", duplicate)
    case("the 100,001st incoming frame terminates", frame_limit)
    case("the sender paces 40 frames per window", pacer)
    for line in results:
        print(line)
    return 0 if all(line.startswith("PASS ") for line in results) else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--signal", help="ws://127.0.0.1:PORT/signal (answer and call)")
    parser.add_argument("--say", action="append", metavar="TEXT")
    parser.add_argument("--say-count", type=int, default=0, metavar="N")
    parser.add_argument("--hang-up", action="store_true")
    parser.add_argument("--receipt-wait", type=float, default=5.0, metavar="S")
    parser.add_argument("--accept-after", type=float, default=0.0, metavar="S")
    parser.add_argument("--receipt-delay", type=float, default=0.0, metavar="S")
    parser.add_argument("--pace-window", type=float, default=1.25, metavar="S")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="S")
    sub = parser.add_subparsers(dest="mode", required=True)
    sub.add_parser("selftest")
    sub.add_parser("answer")
    call = sub.add_parser("call")
    call.add_argument("callee", metavar="ID")
    args = parser.parse_args()
    if args.mode == "selftest":
        sys.exit(self_test())
    if not args.signal:
        parser.error("--signal URL is required")
    if args.pace_window < RATE_WINDOW:
        parser.error("--pace-window below %s s would break §13.1" % RATE_WINDOW)

    async def run():
        return await ChatPeer(args).run()
    try:
        sys.exit(asyncio.run(run()))
    except signal_client.Fail as failure:
        emit("failure", what=str(failure))
        emit("end", status=1, texts=0, violations=[])
        sys.exit(1)


if __name__ == "__main__":
    main()

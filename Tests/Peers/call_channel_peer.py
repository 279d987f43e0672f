#!/usr/bin/env python3
"""An independent peer for Tether's call secure channel (signaling.md §9, §10), built on the PyPI
package `noiseprotocol` and the standard library only (no Tether code).

It speaks over stdin/stdout in records: a 4-byte big-endian length, a 1-byte kind and the body.
From Tether:
  b'F': one channel frame (type byte and Noise message, §9.2)
  b'C': a JSON command: {"op":"text","id":...,"text":...,"sentAt":...} or {"op":"rotate"}
To Tether, after each record it handles, then b'A' ("done with that record"):
  b'F': a channel frame for Tether
  b'H': the KK handshake hash (once, after Split)
  b'R': key confirmation received (once)
  b'T': a text received: the canonical JSON {"id":...,"text":...,"sentAt":...}
  b'K': a receipt received, for the id in the body
  b'E': both directions switched to the epoch in the body (decimal)
Any protocol violation exits with status 3 and a reason on stderr. It exits 0 on EOF.
"""
import argparse
import json
import sys

from noise.connection import Keypair, NoiseConnection

# The record framing the Swift side speaks to every Noise peer (the script's directory is on sys.path).
from noise_peer import read_record, write_record

READY = b"cryptext.channel-ready.v2"
ROTATE_INIT, ROTATE_RESP = 0x10, 0x11
QUEUE_LIMIT = 64


class Violation(Exception):
    pass


def no_duplicates(pairs):
    keys = [key for key, _ in pairs]
    if len(keys) != len(set(keys)):
        raise Violation("duplicate key")
    return dict(pairs)


def is_uuid(value):
    if not isinstance(value, str) or len(value) != 36:
        return False
    return all((c == "-") if i in (8, 13, 18, 23) else (c in "0123456789abcdef") for i, c in enumerate(value))


def parse_payload(plaintext):
    """§9.5, strictly: a JSON object, v the integer 2, text or receipt with their fields."""
    try:
        payload = json.loads(plaintext.decode("utf-8"), object_pairs_hook=no_duplicates)
    except (ValueError, UnicodeDecodeError) as error:
        raise Violation("payload is not JSON: %s" % error)
    if not isinstance(payload, dict):
        raise Violation("payload is not an object")
    if type(payload.get("v")) is not int or payload["v"] != 2:
        raise Violation("v is not 2")
    if not is_uuid(payload.get("id")):
        raise Violation("bad id")
    if payload.get("type") == "receipt":
        return payload
    if payload.get("type") != "text":
        raise Violation("unknown type")
    text = payload.get("text")
    if not isinstance(text, str) or not 1 <= len(text) <= 4000:
        raise Violation("bad text")
    if type(payload.get("sentAt")) is not int:
        raise Violation("bad sentAt")
    return payload


class Peer:
    def __init__(self, args, out):
        self.out = out
        self.initiator = args.role == "initiator"
        self.initiator_id, self.responder_id = args.initiator_id, args.responder_id
        self.noise = NoiseConnection.from_name(b"Noise_KK_25519_ChaChaPoly_SHA256")
        self.noise.set_as_initiator() if self.initiator else self.noise.set_as_responder()
        self.noise.set_keypair_from_private_bytes(Keypair.STATIC, bytes.fromhex(args.static))
        self.noise.set_keypair_from_public_bytes(Keypair.REMOTE_STATIC, bytes.fromhex(args.remote_static))
        prologue = "cryptext.channel.v2\n%s\n%s\n%s" % (args.call, self.initiator_id, self.responder_id)
        self.noise.set_prologue(prologue.encode())
        self.noise.start_handshake()
        self.session_id = None
        self.confirmed = False
        self.epoch = 0
        self.rotation = None
        self.held = []

    def send_frame(self, kind, message):
        write_record(self.out, b"F", bytes([kind]) + message)

    def seal(self, plaintext):
        self.send_frame(0x02, self.noise.encrypt(plaintext))

    def split(self):
        self.session_id = self.noise.get_handshake_hash()
        write_record(self.out, b"H", self.session_id)
        self.seal(READY)

    def open(self):
        if self.initiator:
            self.send_frame(0x01, self.noise.write_message(b""))

    def nn(self, as_initiator):
        noise = NoiseConnection.from_name(b"Noise_NN_25519_ChaChaPoly_SHA256")
        noise.set_as_initiator() if as_initiator else noise.set_as_responder()
        prologue = "cryptext.rotate.v2\n%s\n%s\n%s\n%d" % (self.session_id.hex(), self.initiator_id, self.responder_id, self.epoch + 1)
        noise.set_prologue(prologue.encode())
        noise.start_handshake()
        return noise

    def switch(self, noise):
        self.noise, self.rotation = noise, None
        self.epoch += 1
        write_record(self.out, b"E", str(self.epoch).encode())
        held, self.held = self.held, []
        for plaintext in held:
            self.send_payload(plaintext)

    def send_payload(self, plaintext):
        if self.rotation is not None:
            if len(self.held) == QUEUE_LIMIT:
                raise Violation("rotation queue overflow")
            self.held.append(plaintext)
        else:
            self.seal(plaintext)

    def frame(self, frame):
        if not frame:
            raise Violation("empty frame")
        kind, message = frame[0], frame[1:]
        if kind == 0x01:
            if self.noise.handshake_finished:
                raise Violation("handshake frame after the handshake")
            if self.noise.read_message(message) != b"":
                raise Violation("handshake payload")
            if not self.initiator:
                self.send_frame(0x01, self.noise.write_message(b""))
            self.split()
            return
        if kind != 0x02 or not self.noise.handshake_finished:
            raise Violation("unexpected frame type %d" % kind)
        plaintext = self.noise.decrypt(message)
        if not self.confirmed:
            if plaintext != READY:
                raise Violation("first plaintext is not the confirmation")
            self.confirmed = True
            write_record(self.out, b"R", b"")
        elif plaintext[:1] == bytes([ROTATE_INIT]):
            if self.rotation is not None and self.initiator:
                return  # the caller's own request wins
            noise = self.nn(as_initiator=False)
            if noise.read_message(plaintext[1:]) != b"":
                raise Violation("NN payload")
            self.seal(bytes([ROTATE_RESP]) + noise.write_message(b""))
            self.switch(noise)
        elif plaintext[:1] == bytes([ROTATE_RESP]):
            if self.rotation is None:
                raise Violation("ROTATE_RESP without a request")
            if self.rotation.read_message(plaintext[1:]) != b"":
                raise Violation("NN payload")
            self.switch(self.rotation)
        elif plaintext[:1] == b"{":
            payload = parse_payload(plaintext)
            if payload["type"] == "receipt":
                write_record(self.out, b"K", payload["id"].encode())
            else:
                report = {"id": payload["id"], "text": payload["text"], "sentAt": payload["sentAt"]}
                write_record(self.out, b"T", json.dumps(report, sort_keys=True).encode())
                receipt = {"type": "receipt", "id": payload["id"], "v": 2}
                self.send_payload(json.dumps(receipt, separators=(",", ":")).encode())
        else:
            raise Violation("unknown plaintext")

    def command(self, body):
        command = json.loads(body)
        if command["op"] == "text":
            # Field order differs from Tether's on purpose: order is free (§2).
            text = {"sentAt": command["sentAt"], "text": command["text"], "id": command["id"], "type": "text", "v": 2}
            self.send_payload(json.dumps(text, ensure_ascii=False, separators=(",", ":")).encode())
        elif command["op"] == "rotate":
            noise = self.nn(as_initiator=True)
            self.seal(bytes([ROTATE_INIT]) + noise.write_message(b""))
            self.rotation = noise
        else:
            raise Violation("unknown command")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=["initiator", "responder"], required=True)
    parser.add_argument("--static", required=True)
    parser.add_argument("--remote-static", required=True)
    parser.add_argument("--call", required=True)
    parser.add_argument("--initiator-id", required=True)
    parser.add_argument("--responder-id", required=True)
    args = parser.parse_args()

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    peer = Peer(args, stdout)
    try:
        peer.open()
        write_record(stdout, b"A", b"")
        while True:
            kind, body = read_record(stdin)
            if kind is None:
                return 0
            if kind == b"F":
                peer.frame(body)
            elif kind == b"C":
                peer.command(body)
            else:
                raise Violation("unknown record kind")
            write_record(stdout, b"A", b"")
    except Exception as error:  # any failure is a violation: report it, never continue
        sys.stderr.write("call_channel_peer: %s: %s\n" % (type(error).__name__, error))
        return 3


if __name__ == "__main__":
    sys.exit(main())

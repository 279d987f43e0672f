#!/usr/bin/env python3
"""An independent Noise peer for Tether's interop tests, built on the PyPI package
`noiseprotocol` (not on Tether code).

It speaks over stdin/stdout in records: a 4-byte big-endian length, a 1-byte kind and the body.
  kind b'M': one Noise message (handshake or transport)
  kind b'H': this peer's handshake hash (sent once the handshake completes)
After the handshake it answers every transport message from Tether with one transport
message carrying b"echo:" + the plaintext, and also sends one unsolicited message first when it
is the responder, so both directions carry traffic whoever initiated. It exits on EOF.
"""
import argparse
import struct
import sys

from noise.connection import Keypair, NoiseConnection


def read_record(stream):
    header = stream.read(5)
    if len(header) < 5:
        return None, None
    length, kind = struct.unpack(">I", header[:4])[0], header[4:5]
    body = stream.read(length - 1)
    if len(body) != length - 1:
        return None, None
    return kind, body


def write_record(stream, kind, body):
    stream.write(struct.pack(">I", len(body) + 1) + kind + body)
    stream.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--protocol", required=True)
    parser.add_argument("--role", choices=["initiator", "responder"], required=True)
    parser.add_argument("--static", default="")
    parser.add_argument("--remote-static", default="")
    parser.add_argument("--prologue", default="")
    args = parser.parse_args()

    noise = NoiseConnection.from_name(args.protocol.encode())
    if args.role == "initiator":
        noise.set_as_initiator()
    else:
        noise.set_as_responder()
    if args.static:
        noise.set_keypair_from_private_bytes(Keypair.STATIC, bytes.fromhex(args.static))
    if args.remote_static:
        noise.set_keypair_from_public_bytes(Keypair.REMOTE_STATIC, bytes.fromhex(args.remote_static))
    noise.set_prologue(bytes.fromhex(args.prologue))
    noise.start_handshake()

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    my_turn = args.role == "initiator"
    index = 0
    while not noise.handshake_finished:
        if my_turn:
            write_record(stdout, b"M", noise.write_message(b"py-handshake-%d" % index))
        else:
            kind, body = read_record(stdin)
            if kind != b"M":
                return 2
            payload = noise.read_message(body)
            if payload != b"swift-handshake-%d" % index:
                sys.stderr.write("unexpected handshake payload %r\n" % payload)
                return 3
        my_turn = not my_turn
        index += 1
    write_record(stdout, b"H", noise.get_handshake_hash())
    if args.role == "responder":
        write_record(stdout, b"M", noise.encrypt(b"hello from python"))
    while True:
        kind, body = read_record(stdin)
        if kind is None:
            return 0
        plaintext = noise.decrypt(body)
        write_record(stdout, b"M", noise.encrypt(b"echo:" + plaintext))


if __name__ == "__main__":
    sys.exit(main())

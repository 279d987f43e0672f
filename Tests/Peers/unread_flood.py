#!/usr/bin/env python3
"""A client that never reads its replies (issue 29), for the end-to-end tests: one raw socket with a
4 KiB receive buffer upgrades to a WebSocket and writes as fast as the kernel takes, never reading,
while the server's resident memory is sampled.

  unread_flood.py HOST PORT PATH HEADERS PID MODE SECONDS

HEADERS: extra request header lines, `|`-separated (e.g. `x-relay-room: ab…`), or `-`.
MODE: `ping` (masked pings with 125-byte payloads) or `signal-error` (registers an ID first, then
`{"type":"signal","v":2}` text frames, each of which earns the signaling server's `error`
`bad_message` and keeps the connection, signaling.md §5.6).

Prints one JSON line: bytes sent, the server's VmRSS (kB) before and at its largest, and, once the
flood ends, whether the server had closed the socket and the close frame it sent (read only then).
"""
import json
import os
import select
import socket
import struct
import sys
import time


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def masked(opcode, payload):
    key = os.urandom(4)
    body = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    length = bytes([0x80 | len(payload)]) if len(payload) < 126 else bytes([0x80 | 126]) + struct.pack(">H", len(payload))
    return bytes([0x80 | opcode]) + length + key + body


def read_frame(s):
    """One unmasked server frame: (opcode, payload)."""
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data
    first, second = exactly(2)
    length = second & 0x7F
    if length == 126:
        length = struct.unpack(">H", exactly(2))[0]
    elif length == 127:
        length = struct.unpack(">Q", exactly(8))[0]
    return first & 0x0F, exactly(length)


def register(s):
    """signaling.md §6.1: the challenge, a signed `register`, the `registered` answer."""
    import base64
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    key = Ed25519PrivateKey.generate()
    ident = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex().upper()
    challenge = json.loads(read_frame(s)[1])["challenge"]
    signature = key.sign(f"cryptext.register.v2\n{challenge}\n{ident}".encode())
    s.sendall(masked(0x1, json.dumps({"type": "register", "v": 2, "id": ident, "sig": base64.b64encode(signature).decode()}).encode()))
    answer = json.loads(read_frame(s)[1])
    assert answer.get("type") == "registered", answer


def main():
    host, port, path, headers, pid, mode, seconds = sys.argv[1:8]
    port, pid, seconds = int(port), int(pid), float(seconds)
    extra = "" if headers == "-" else "".join(f"{h}\r\n" for h in headers.split("|"))
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((host, port))
    s.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            break
        head += chunk
    status = head.split(b"\r\n")[0].decode(errors="replace")
    if " 101 " not in status:
        print(json.dumps({"upgrade": status}))
        return
    if mode == "signal-error":
        register(s)
    unit = masked(0x9, b"p" * 125) if mode == "ping" else masked(0x1, b'{"type":"signal","v":2}')
    burst = unit * 256
    s.setblocking(False)
    start_rss = max_rss = rss_kb(pid)
    sent, offset, reset = 0, 0, False
    started = last_sample = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            n = s.send(burst[offset:] if offset else burst)
            sent += n
            offset = (offset + n) % len(burst)
        except BlockingIOError:
            select.select([], [s], [], 0.01)
        except OSError:
            reset = True
            break
        if time.monotonic() - last_sample > 0.1:
            max_rss = max(max_rss, rss_kb(pid))
            last_sample = time.monotonic()
    max_rss = max(max_rss, rss_kb(pid))
    # Now read what the server sent, looking for its close frame, for a few seconds.
    s.setblocking(True)
    s.settimeout(3)
    received = b""
    closed = False
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                closed = True
                break
            received += chunk
    except (socket.timeout, OSError):
        pass
    close = None
    index = received.rfind(b"\x88")
    while index >= 0:
        length = received[index + 1] if index + 1 < len(received) else 0
        if 2 <= length <= 125 and index + 2 + length == len(received):
            code = struct.unpack(">H", received[index + 2:index + 4])[0]
            close = [code, received[index + 4:index + 2 + length].decode(errors="replace")]
            break
        index = received.rfind(b"\x88", 0, index)
    print(json.dumps({"sent": sent, "rss_start_kb": start_rss, "rss_max_kb": max_rss, "reset": reset,
                      "closed": closed, "close": close}))


if __name__ == "__main__":
    main()

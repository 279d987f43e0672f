#!/usr/bin/env python3
"""Drives `tether mac` and `tether phone` in real terminals (tmux), as a person would: reads
the screen, decodes the QR code the Mac draws with zbarimg, types the code the phone shows
into the Mac, and chats.

Usage: peer_tmux.py TETHER_BINARY
Exit 0 and a last line `PASS tmux` when every check held.
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

TETHER = os.path.abspath(sys.argv[1])
WORK = tempfile.mkdtemp(prefix="tether-tmux-")
SOCKET = os.path.join(WORK, "tmux.sock")
BLOCKS = {" ": (False, False), "▀": (True, False), "▄": (False, True), "█": (True, True)}


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def tmux(*args):
    return subprocess.run(["tmux", "-S", SOCKET, *args], capture_output=True, text=True, check=True).stdout


def screen(window):
    return tmux("capture-pane", "-p", "-J", "-t", window)


def wait_for(window, pattern, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = screen(window)
        found = re.search(pattern, text, re.M)
        if found:
            return found, text
        time.sleep(0.2)
    raise AssertionError(f"{window}: {pattern!r} not on screen within {timeout} s:\n{screen(window)}")


def decode_qr(text):
    """The QR code on the screen, rebuilt module by module from its half blocks, then decoded by
    zbarimg from a PGM image (4 pixels per module, white border)."""
    lines = [line for line in text.split("\n") if any(c in "▀▄█" for c in line)]
    check(lines, "no QR code on the screen")
    left = min(len(line) - len(line.lstrip(" ")) for line in lines)
    width = max(len(line.rstrip()) for line in lines) - left
    rows = []
    for line in lines:
        cells = line[left:].ljust(width)
        check(all(c in BLOCKS for c in cells), f"unexpected character in the QR code: {cells!r}")
        rows.append([BLOCKS[c][0] for c in cells])
        rows.append([BLOCKS[c][1] for c in cells])
    scale, border = 4, 8
    size_x, size_y = (width + 2 * border) * scale, (len(rows) + 2 * border) * scale
    pixels = bytearray([255]) * (size_x * size_y)
    for y, row in enumerate(rows):
        for x, dark in enumerate(row):
            if dark:
                for dy in range(scale):
                    start = ((y + border) * scale + dy) * size_x + (x + border) * scale
                    pixels[start:start + scale] = bytes(scale)
    image = os.path.join(WORK, "qr.pgm")
    with open(image, "wb") as f:
        f.write(f"P5 {size_x} {size_y} 255\n".encode() + bytes(pixels))
    decoded = subprocess.run(["zbarimg", "--raw", "-q", image], capture_output=True, text=True)
    check(decoded.returncode == 0, f"zbarimg could not decode the QR code: {decoded.stderr}")
    return decoded.stdout.strip()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    port = free_port()
    relay = subprocess.Popen([TETHER, "relay", "--local", "--relay-port", str(port), "--relay-db", ":memory:"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        check(relay.stdout.readline().startswith("relay: listening"), "relay did not start")
        origin = f"http://127.0.0.1:{port}"
        tmux("new-session", "-d", "-s", "t", "-x", "250", "-y", "90", "-n", "mac",
             f"{TETHER} mac --relay {origin} --state {WORK}/mac; echo EXIT=$?; sleep 30")
        found, text = wait_for("t:mac", r"^(iterm2://pair\?\S+)")
        link = found.group(1)
        check(decode_qr(text) == link, "the QR code decodes to the printed link")
        tmux("new-window", "-t", "t", "-n", "phone", f"{TETHER} phone '{link}' --state {WORK}/phone; echo EXIT=$?; sleep 30")
        found, _ = wait_for("t:phone", r"^(\d{6})$")
        code = found.group(1)
        wait_for("t:mac", r"Type the 6-digit code")
        tmux("send-keys", "-t", "t:mac", code, "Enter")
        wait_for("t:mac", r"Connected end-to-end")
        wait_for("t:phone", r"Connected end-to-end")
        tmux("send-keys", "-t", "t:phone", "hello from a real terminal", "Enter")
        wait_for("t:mac", r"^hello from a real terminal$")
        tmux("send-keys", "-t", "t:mac", "typed on the mac", "Enter")
        wait_for("t:phone", r"^typed on the mac$")
        # Ctrl-C ends the chat cleanly (exit 0), and so does Ctrl-D (end of input).
        tmux("send-keys", "-t", "t:phone", "C-c", "")
        wait_for("t:phone", r"EXIT=0$")
        tmux("send-keys", "-t", "t:mac", "C-d", "")
        wait_for("t:mac", r"EXIT=0$")
        print("PASS tmux", flush=True)
        return 0
    except AssertionError as error:
        print(f"FAIL tmux: {error}", flush=True)
        return 1
    finally:
        subprocess.run(["tmux", "-S", SOCKET, "kill-server"], capture_output=True)
        relay.terminate()
        relay.wait()
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""An independent WebRTC SDP peer for Tether's data-only SDP tests, built on the PyPI package
`aiortc` (not on Tether code).

Subcommands:
  offer     prints the offer of an RTCPeerConnection with one data channel `cryptext` (ordered,
            reliable), taken after ICE gathering completed, so it carries its candidates.
  answer    reads an offer SDP on stdin, sets it as the remote description and prints the answer
            (after gathering); exits 1 with aiortc's error on stderr if the offer is refused.
  exchange  prints an offer as `offer` does and closes stdout, then reads an answer SDP on stdin
            and sets it as the remote description; exits 0 if aiortc accepts it, 1 (error on
            stderr) if not.

ICE gathers on loopback only: the tests need no network, and host addresses of the test machine
have no business in a fixture. No STUN or TURN servers are configured.
"""
import argparse
import asyncio
import os
import sys

import aioice.ice
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription


def loopback_only(use_ipv4, use_ipv6):
    return ["127.0.0.1"] if use_ipv4 else []


aioice.ice.get_host_addresses = loopback_only


def connection():
    return RTCPeerConnection(RTCConfiguration(iceServers=[]))


async def offer():
    pc = connection()
    pc.createDataChannel("cryptext", ordered=True)
    await pc.setLocalDescription(await pc.createOffer())
    return pc


async def answer(sdp):
    pc = connection()
    await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="offer"))
    await pc.setLocalDescription(await pc.createAnswer())
    return pc


async def run(command):
    pc = None
    try:
        if command == "offer":
            pc = await offer()
            sys.stdout.write(pc.localDescription.sdp)
        elif command == "answer":
            pc = await answer(sys.stdin.read())
            sys.stdout.write(pc.localDescription.sdp)
        else:
            pc = await offer()
            sys.stdout.write(pc.localDescription.sdp)
            sys.stdout.flush()
            # sys.stdout does not own fd 1, so closing it would not signal end of file.
            os.close(sys.stdout.fileno())
            sys.stdout = open(os.devnull, "w")
            await pc.setRemoteDescription(RTCSessionDescription(sdp=sys.stdin.read(), type="answer"))
        return 0
    except Exception as error:  # aiortc raises ValueError and others; any refusal is the result
        print(f"refused: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    finally:
        if pc is not None:
            await pc.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["offer", "answer", "exchange"])
    arguments = parser.parse_args()
    sys.exit(asyncio.run(run(arguments.command)))


if __name__ == "__main__":
    main()

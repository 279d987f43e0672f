#!/usr/bin/env python3
"""The aiortc side of `tether-rtcbench`: two aiortc RTCPeerConnections in one asyncio loop on
loopback, timed the way the benchmark times two RTCMediaTransports, so both stacks are measured
on the same machine in the same run. Prints one JSON line per measurement.

  setup --runs N [--turn URL --username U --password P]
                            createOffer -> the data channel open on both sides, N times; with
                            --turn, relayed candidates only (iceTransportPolicy relay)
                            {"stack": "aiortc", "measure": "setup", "run": i, "ms": t}
  throughput --bytes B --size S
                            B bytes in S-byte binary messages one way, back to back, the sender
                            held to a window of buffered bytes; from the first send to the last
                            message received
                            {"stack": "aiortc", "measure": "throughput", "bytes": B, "seconds": t, "mbps": x}

aiortc takes no trickled candidates, so each description carries all of them (gathering done
before setLocalDescription returns); that is part of the time measured, as it is of a real call.
"""
import argparse
import asyncio
import json
import sys
import time

import aioice.ice
from aiortc import RTCConfiguration, RTCIceServer, RTCIceTransportPolicy, RTCPeerConnection


def loopback_only(use_ipv4, use_ipv6):
    return ["127.0.0.1"] if use_ipv4 else []


aioice.ice.get_host_addresses = loopback_only

# Bytes the sender lets aiortc buffer before waiting for bufferedamountlow: large enough to keep
# SCTP's window full, small enough that the run measures the transport, not a queue.
WINDOW = 1 << 20


def emit(record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def configuration(turn):
    if turn is None:
        return RTCConfiguration(iceServers=[])
    url, username, password = turn
    return RTCConfiguration(iceServers=[RTCIceServer(urls=url, username=username, credential=password)],
                            iceTransportPolicy=RTCIceTransportPolicy.RELAY)


async def connected_pair(turn=None):
    """The two peer connections and the offerer's channel, once it is open on both sides; the time
    from createOffer to that moment."""
    offerer = RTCPeerConnection(configuration(turn))
    answerer = RTCPeerConnection(configuration(turn))
    opened_offerer, opened_answerer = asyncio.Event(), asyncio.Event()
    remote = {}
    start = time.perf_counter()
    channel = offerer.createDataChannel("cryptext", ordered=True)
    channel.on("open", opened_offerer.set)

    @answerer.on("datachannel")
    def on_datachannel(incoming):
        remote["channel"] = incoming
        if incoming.readyState == "open":
            opened_answerer.set()
        else:
            incoming.on("open", opened_answerer.set)

    await offerer.setLocalDescription(await offerer.createOffer())
    await answerer.setRemoteDescription(offerer.localDescription)
    await answerer.setLocalDescription(await answerer.createAnswer())
    await offerer.setRemoteDescription(answerer.localDescription)
    await asyncio.wait_for(asyncio.gather(opened_offerer.wait(), opened_answerer.wait()), 15)
    return offerer, answerer, channel, remote["channel"], time.perf_counter() - start


async def setup(runs, turn):
    for run in range(runs):
        offerer, answerer, _, _, elapsed = await connected_pair(turn)
        emit({"stack": "aiortc", "measure": "setup", "relayed": turn is not None, "run": run, "ms": elapsed * 1000})
        await offerer.close()
        await answerer.close()


async def throughput(total, size):
    offerer, answerer, sender, receiver, _ = await connected_pair()
    count = total // size
    done = asyncio.Event()
    received = {"messages": 0, "bytes": 0}

    @receiver.on("message")
    def on_message(message):
        received["messages"] += 1
        received["bytes"] += len(message)
        if received["messages"] == count:
            done.set()

    room = asyncio.Event()
    sender.bufferedAmountLowThreshold = WINDOW // 2
    sender.on("bufferedamountlow", room.set)
    payload = bytes(size)
    start = time.perf_counter()
    for _ in range(count):
        while sender.bufferedAmount > WINDOW:
            room.clear()
            await room.wait()
        sender.send(payload)
    await asyncio.wait_for(done.wait(), 300)
    elapsed = time.perf_counter() - start
    emit({"stack": "aiortc", "measure": "throughput", "bytes": received["bytes"], "messageBytes": size,
          "seconds": elapsed, "mbps": received["bytes"] / elapsed / 1e6})
    await offerer.close()
    await answerer.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    setup_parser = commands.add_parser("setup")
    setup_parser.add_argument("--runs", type=int, default=20)
    setup_parser.add_argument("--turn")
    setup_parser.add_argument("--username")
    setup_parser.add_argument("--password")
    throughput_parser = commands.add_parser("throughput")
    throughput_parser.add_argument("--bytes", type=int, default=64 << 20)
    throughput_parser.add_argument("--size", type=int, default=16 << 10)
    arguments = parser.parse_args()
    if arguments.command == "setup":
        turn = (arguments.turn, arguments.username, arguments.password) if arguments.turn else None
        asyncio.run(setup(arguments.runs, turn))
    else:
        asyncio.run(throughput(arguments.bytes, arguments.size))


if __name__ == "__main__":
    main()

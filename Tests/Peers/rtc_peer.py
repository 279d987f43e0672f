#!/usr/bin/env python3
"""An independent WebRTC data-channel peer for Tether's interop tests, built on the PyPI package
`aiortc` (not on Tether code). It speaks JSON lines on stdin/stdout:

  offer   creates an RTCPeerConnection with one data channel `cryptext` (ordered, reliable),
          prints {"sdp": <offer>} once ICE gathering is done, then reads {"sdp": <answer>}.
  answer  reads {"sdp": <offer>}, prints {"sdp": <answer>}; the channel comes from the offerer.

Then, on either side:
  out: {"event": "open"}              the data channel is open
       {"message": <b64>}              a binary message arrived (it is also sent back: an echo)
       {"event": "closed"}             the channel closed
       {"error": <text>}               something failed; the peer exits 1
  in:  {"send": <b64>}                 send one binary message
       {"close": true}                 close the channel and the connection, then exit 0

ICE gathers on loopback only: the tests need no network. By default there is no STUN or TURN;
`--ice-servers JSON` gives it the `iceServers` array a `registered` message delivers (signaling.md
§8.4), and `--relay-only` sets iceTransportPolicy relay, so aiortc offers relayed candidates only
and pairs nothing else.
"""
import argparse
import asyncio
import base64
import json
import sys

import aioice.ice
from aiortc import RTCConfiguration, RTCIceServer, RTCIceTransportPolicy, RTCPeerConnection, RTCSessionDescription


def loopback_only(use_ipv4, use_ipv6):
    return ["127.0.0.1"] if use_ipv4 else []


aioice.ice.get_host_addresses = loopback_only


def emit(record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


async def read_record(reader):
    line = await reader.readline()
    if not line:
        return None
    return json.loads(line)


def configuration(ice_servers, relay_only):
    servers = [RTCIceServer(urls=entry["urls"], username=entry.get("username"), credential=entry.get("credential"))
               for entry in json.loads(ice_servers or "[]")]
    policy = RTCIceTransportPolicy.RELAY if relay_only else RTCIceTransportPolicy.ALL
    return RTCConfiguration(iceServers=servers, iceTransportPolicy=policy)


async def run(command, config):
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    pc = RTCPeerConnection(config)
    channel_box = {}
    done = asyncio.Event()

    def attach(channel):
        channel_box["channel"] = channel

        @channel.on("open")
        def on_open():
            emit({"event": "open"})

        @channel.on("message")
        def on_message(message):
            data = message if isinstance(message, bytes) else message.encode()
            emit({"message": base64.b64encode(data).decode()})
            channel.send(data)

        @channel.on("close")
        def on_close():
            emit({"event": "closed"})
            done.set()

        if channel.readyState == "open":
            emit({"event": "open"})

    @pc.on("datachannel")
    def on_datachannel(channel):
        attach(channel)

    try:
        if command == "offer":
            attach(pc.createDataChannel("cryptext", ordered=True))
            await pc.setLocalDescription(await pc.createOffer())
            emit({"sdp": pc.localDescription.sdp})
            record = await read_record(reader)
            await pc.setRemoteDescription(RTCSessionDescription(sdp=record["sdp"], type="answer"))
        else:
            record = await read_record(reader)
            await pc.setRemoteDescription(RTCSessionDescription(sdp=record["sdp"], type="offer"))
            await pc.setLocalDescription(await pc.createAnswer())
            emit({"sdp": pc.localDescription.sdp})
        while not done.is_set():
            read = asyncio.ensure_future(read_record(reader))
            closed = asyncio.ensure_future(done.wait())
            finished, _ = await asyncio.wait([read, closed], return_when=asyncio.FIRST_COMPLETED)
            if read not in finished:
                read.cancel()
                break
            record = read.result()
            if record is None or record.get("close"):
                if "channel" in channel_box:
                    channel_box["channel"].close()
                break
            if "send" in record:
                channel_box["channel"].send(base64.b64decode(record["send"]))
        return 0
    except Exception as error:  # any failure is the result the test reads
        emit({"error": f"{type(error).__name__}: {error}"})
        return 1
    finally:
        await pc.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["offer", "answer"])
    parser.add_argument("--ice-servers", help="a JSON array of RTCIceServer objects")
    parser.add_argument("--relay-only", action="store_true", help="iceTransportPolicy relay")
    arguments = parser.parse_args()
    sys.exit(asyncio.run(run(arguments.command, configuration(arguments.ice_servers, arguments.relay_only))))


if __name__ == "__main__":
    main()

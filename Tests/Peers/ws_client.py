#!/usr/bin/env python3
"""An independent WebSocket client (PyPI `websockets`) for Tether's server tests.

Usage: ws_client.py URL SCENARIO. Prints one JSON object with what happened.
Scenarios:
  echo   text, binary, a 100,000-byte message, a ping; then a normal close
  many   200 small messages in a row, checking order
  slow   idles for 1.5 s (the server pings meanwhile), then checks the echo still works
"""
import asyncio
import json
import sys

import websockets


async def main(url, scenario):
    result = {}
    async with websockets.connect(url, max_size=None, compression=None, origin=None) as ws:
        if scenario == "echo":
            await ws.send("hello")
            result["text"] = await ws.recv()
            await ws.send(b"\x00\x01\xff")
            result["binary"] = list(await ws.recv())
            big = bytes(i % 251 for i in range(100_000))
            await ws.send(big)
            result["big_ok"] = (await ws.recv()) == big
            pong = await ws.ping(b"p")
            await asyncio.wait_for(pong, 5)
            result["pong"] = True
        elif scenario == "slow":
            await asyncio.sleep(1.5)
            await ws.send("after idle")
            result["survived"] = (await ws.recv()) == "after idle"
        elif scenario == "many":
            for i in range(200):
                await ws.send("m%d" % i)
            result["ordered"] = all([(await ws.recv()) == "m%d" % i for i in range(200)])
        await ws.close(code=1000, reason="bye")
        result["close_code"] = ws.close_code
        result["close_reason"] = ws.close_reason
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))

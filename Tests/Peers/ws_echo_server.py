#!/usr/bin/env python3
"""An independent WebSocket echo server (PyPI `websockets`) for Tether's client tests.

Prints "PORT <n>" once listening on 127.0.0.1, echoes every message, and records each
connection's request headers: the text message "headers?" is answered with them as JSON.
Exits when stdin closes.
"""
import asyncio
import json
import sys

import websockets


async def handler(ws):
    async for message in ws:
        if message == "headers?":
            await ws.send(json.dumps({k.lower(): v for k, v in ws.request.headers.raw_items()}))
        elif message == "close-4001":
            await ws.close(code=4001, reason="asked")
        else:
            await ws.send(message)


async def main():
    async with websockets.serve(handler, "127.0.0.1", 0, max_size=None, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        print("PORT %d" % port, flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main())

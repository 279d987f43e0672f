#!/usr/bin/env python3
"""An independent relay client (PyPI `websockets`) for Tether's end-to-end relay tests.

Usage: relay_client.py URL SCENARIO. Prints one JSON object with what happened.
  pair   a mac parks, a phone joins (open mode), random binary frames of many sizes cross in
         both directions, then the phone leaves and the mac sees "peer gone"
  gate   an Origin header (403 forbidden), a bad room (400 bad room), a phone with no mac
         (refused "mac offline" then close 1008)
"""
import asyncio
import json
import os
import random
import sys

import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatus


def room():
    return os.urandom(32).hex()


async def admit(url, room_name, role):
    ws = await websockets.connect(url, additional_headers={"x-relay-room": room_name}, max_size=None,
                                  compression=None, origin=None, user_agent_header="iTerm2Companion")
    await ws.send(json.dumps({"v": 1, "role": role}))
    challenge = json.loads(await ws.recv())
    await ws.send("{}")
    result = json.loads(await ws.recv())
    return ws, challenge, result


async def pair(url):
    out = {}
    r = room()
    mac, challenge, mac_result = await admit(url, r, "mac")
    out["nonce_length"] = len(challenge["nonce"])
    out["mac_result"] = mac_result
    phone, _, phone_result = await admit(url, r, "phone")
    out["phone_ok"] = phone_result.get("ok")
    out["token_length"] = len(phone_result.get("registrationToken", ""))
    rng = random.Random(7)
    sizes = [0, 1, 125, 126, 65535, 65536, 100_000, 262_144] + [rng.randrange(1, 5000) for _ in range(40)]
    frames = [os.urandom(n) for n in sizes]

    async def pump(sender, receiver, items):
        async def send():
            for f in items:
                await sender.send(f)
        task = asyncio.create_task(send())
        got = [await receiver.recv() for _ in items]
        await task
        return got

    out["phone_to_mac_ok"] = (await pump(phone, mac, frames)) == frames
    out["mac_to_phone_ok"] = (await pump(mac, phone, list(reversed(frames)))) == list(reversed(frames))
    await phone.close()
    try:
        await mac.recv()
    except ConnectionClosed as closed:
        out["mac_close"] = [closed.rcvd.code, closed.rcvd.reason] if closed.rcvd else None
    return out


async def gate(url):
    out = {}
    try:
        await websockets.connect(url, additional_headers={"x-relay-room": room()}, origin="https://evil.example")
    except InvalidStatus as refused:
        out["origin"] = [refused.response.status_code, refused.response.body.decode()]
    try:
        await websockets.connect(url, additional_headers={"x-relay-room": "ABC"})
    except InvalidStatus as refused:
        out["bad_room"] = [refused.response.status_code, refused.response.body.decode()]
    ws, _, result = await admit(url, room(), "phone")
    out["phone_alone"] = result
    try:
        await ws.recv()
    except ConnectionClosed as closed:
        out["phone_alone_close"] = [closed.rcvd.code, closed.rcvd.reason] if closed.rcvd else None
    return out


if __name__ == "__main__":
    url, scenario = sys.argv[1], sys.argv[2]
    print(json.dumps(asyncio.run({"pair": pair, "gate": gate}[scenario](url))))

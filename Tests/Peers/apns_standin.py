#!/usr/bin/env python3
"""APNs stand-in: an independent HTTP/2 server that answers like Apple's APNs provider API
(push.md §4), for end-to-end tests of `tether push`. Written from the spec only (Python asyncio,
h2, PyJWT, cryptography); it shares no code with Tether.

USAGE
  apns_standin.py --cert CERT.pem --key KEY.pem --jwt-public-key PUB.pem --team-id TEAMID --key-id KEYID
                  [--host 127.0.0.1] [--port 0] [--control-port 0] [--topics com.a,com.b]
                  [--max-concurrent-streams N] [--initial-max-concurrent-streams M]
                  [--exit-on-stdin-eof] [--verbose]

  --cert/--key              TLS certificate chain and private key (PEM) served on --host:--port.
  --jwt-public-key          PEM of the provider key's public half (a PEM private key, e.g. the .p8,
                            is also accepted: its public half is used).
  --team-id/--key-id        the expected JWT `iss` claim and `kid` header.
  --topics                  comma-separated allowed apns-topic values (absent = any topic).
  --max-concurrent-streams  SETTINGS_MAX_CONCURRENT_STREAMS advertised per connection (default 1000).
  --initial-max-concurrent-streams M
                            APNs-like start (push.md §4.1): advertise M (e.g. 1) until the first
                            200 on that connection; a SETTINGS frame raising it to
                            --max-concurrent-streams is sent just before that 200 (default: off).
                            A HEADERS frame that opens a stream beyond the current limit (e.g. sent
                            before the client saw our SETTINGS) gets RST_STREAM(REFUSED_STREAM): not
                            recorded, counted in /stats streams_refused.
  --exit-on-stdin-eof       also exit cleanly when stdin reaches EOF (for test harnesses).
  --verbose                 one line per request on stderr.

  TLS 1.2+, ALPN "h2" only: a client that does not negotiate h2 gets its TLS connection closed
  right after the handshake (counted in /stats as connections_refused, not as a connection).
  Port 0 = ephemeral. The control API always listens on 127.0.0.1.
  When both listeners are up, exactly one line is printed to stdout (then flushed):
      apns-standin: listening on 127.0.0.1:<port> control 127.0.0.1:<control-port>
  Exit status 0 on SIGTERM, SIGINT, POST /shutdown (or stdin EOF with --exit-on-stdin-eof);
  2 on bad arguments / unreadable cert or key.

APNS SIDE (one asyncio loop, one h2 state machine per TCP connection)
  Each request stream (HEADERS + DATA until END_STREAM) is checked in this order; the first
  failure is the answer:
   1. :method != POST                                  -> 405 MethodNotAllowed
      :path "/3/device/" or "/3/device" (no token)       -> 400 MissingDeviceToken
      :path not "/3/device/<non-empty hex>"             -> 404 BadPath
   2. no `authorization` header                         -> 403 MissingProviderToken
      not exactly "bearer <JWT>" (lowercase scheme, one space); JWT header `alg` != "ES256"
      or `kid` != --key-id; signature not ES256 (raw 64-byte r||s) under the public key;
      claims not an object with `iss` == --team-id and an integer `iat`; or `iat` more than
      300 s in the future                                -> 403 InvalidProviderToken
      now - iat > 3600 s                                 -> 403 ExpiredProviderToken
      (`exp` is neither required nor checked)
   3. `apns-topic` missing or empty                     -> 400 MissingTopic
      --topics given and topic not listed               -> 400 TopicDisallowed
   4. `apns-push-type` present and not one of alert background voip location complication
      fileprovider mdm liveactivity pushtotalk           -> 400 InvalidPushType
      `apns-priority` present and not 10, 5 or 1         -> 400 BadPriority
      `apns-collapse-id` longer than 64 bytes (UTF-8)    -> 400 BadCollapseId
      `apns-id` present and not a canonical UUID 8-4-4-4-12 hex -> 400 BadMessageId
      `apns-expiration` present and not decimal digits   -> 400 BadExpirationDate
      any non-pseudo header name repeated                -> 400 DuplicateHeaders
      empty body                                         -> 400 PayloadEmpty
      body > 4096 bytes (> 5120 when apns-push-type is voip) -> 413 PayloadTooLarge
      (a body that is not JSON is accepted and recorded: `payload` is null)
   5. the script (below) decides; no matching rule -> 200.
  Success: 200, headers `apns-id` (the request's apns-id if valid, else a fresh uppercase UUID)
  and `apns-unique-id` (a fresh UUID, as the development environment sends), empty body.
  Failure: the status, `apns-id`, `content-type: application/json`, body {"reason":"<Reason>"}
  and for 410 also "timestamp":<ms> (the rule's `timestamp`, else now). A scripted non-200 with
  "reason": null has an empty body.
  Other HTTP/2 protocol errors by the client end its connection (GOAWAY from h2).

CONTROL API (HTTP/1.1 + JSON on 127.0.0.1:<control-port>, keep-alive supported)
  GET    /requests   -> 200 [record, ...] oldest first
  DELETE /requests   -> 200 {"cleared":N}   (empties the log; connection ids keep counting)
  GET    /stats      -> 200 {"connections_opened":N, "connections_open":N, "requests":N,
                             "distinct_jwts":N, "connections_refused":N, "streams_refused":N,
                             "priority_frames":N}
                        connections_opened/_open count h2 connections since start;
                        connections_refused = TLS connections closed for lacking ALPN h2;
                        streams_refused = streams refused over the stream limit (since start);
                        priority_frames = PRIORITY frames and HEADERS carrying priority
                        received (since start; APNs ignores them, so a client sends none);
                        requests and distinct_jwts are computed over the current log, so
                        DELETE /requests resets them.
  POST   /script     body: JSON array of rules; replaces the script -> 200 {"rules":N}
  DELETE /script     -> 200 {"rules":0}
  GET    /script     -> 200 [rule + {"used":N}, ...]
  POST   /shutdown   -> 200 {"shutdown":true}, then the server exits 0.
  Bad input -> 400 {"error":"..."}; unknown path -> 404, wrong method -> 405 (same JSON shape).

  Record (one per request stream that reached END_STREAM, refused ones included):
    {"index":n (0-based, since start), "connection":id (per TCP connection, 1,2,... in
     accept order), "stream":id, "method", "path", "token" (the text after /3/device/ or null),
     "headers":[[name,value],...] (in order, lowercase, pseudo-headers included),
     "body":text (UTF-8, invalid bytes replaced), "body_length":bytes, "payload":parsed JSON or null,
     "jwt":raw token (the text after "bearer ", scheme in any case) or null,
     "jwt_header":dict|null, "jwt_claims":dict|null (decoded without verification, so present
     also for refused tokens), "status":int|null, "reason":str|null,
     "timestamp":ms|null (410 only), "apns_id":str, "action":"answer"|"goaway"|"goaway_after"|
     "reset"|"close"|"hang"|"ignored", "delay_ms":int, "received_at":unix seconds float}
    status/reason are what was (or, after delay_ms, will be) answered; null for
    goaway/reset/close/hang. "ignored" = stream above a GOAWAY's last_stream_id: not processed,
    never answered (a scripted answer pending for such a stream is dropped and its record
    turned into "ignored").

SCRIPT RULES
  {"token": "<hex>" | "*",          required; compared case-insensitively
   "status": int,                   100..599, default 200 (for answer / goaway_after)
   "reason": "..." | null,          default null
   "timestamp": ms,                 optional, for 410 (default: now in ms)
   "delay_ms": int,                 optional, wait before acting (every action), default 0
   "times": int,                    optional, number of requests it applies to; absent = unlimited
   "action": "answer" | "goaway" | "goaway_after" | "reset" | "close" | "hang",  default "answer"
   "comment": any}                  ignored; any other key is a 400
  Only requests that passed checks 1-4 consult the script. The first rule whose token matches
  and has uses left applies and uses one (decided when the request completes, in arrival order).
  answer       answer status/reason after delay_ms.
  goaway       GOAWAY(NO_ERROR, last_stream_id = this stream - 2, debug data {"reason":…} when
               `reason` is set): this request and any later stream are NOT processed; streams
               <= last_stream_id still in flight are answered normally, then the connection is
               closed. The client should resend on a new connection. (curl/libcurl 7.88.1 does
               not resend by itself here: it fails with CURLE_HTTP2 (16); it does resend after
               `reset`.)
  goaway_after answer status/reason, then GOAWAY(NO_ERROR, last_stream_id = this stream); later
               requests must use a new connection; closed once streams <= it are finished.
  reset        RST_STREAM(REFUSED_STREAM) on this stream.
  close        drop the TCP connection abruptly (no GOAWAY, no TLS close_notify).
  hang         never answer (the client's timeout must fire).
"""
import argparse
import asyncio
import json
import re
import signal
import ssl
import sys
import threading
import time
import traceback
import uuid

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from h2.errors import ErrorCodes
from hyperframe.frame import GoAwayFrame, SettingsFrame

PUSH_TYPES = {"alert", "background", "voip", "location", "complication", "fileprovider", "mdm",
              "liveactivity", "pushtotalk"}
PRIORITIES = {"10", "5", "1"}
ACTIONS = {"answer", "goaway", "goaway_after", "reset", "close", "hang"}
RULE_KEYS = {"token", "status", "reason", "timestamp", "delay_ms", "times", "action", "comment"}
HEX_RE = re.compile(r"[0-9A-Fa-f]+\Z")
UUID_RE = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\Z")
DIGITS_RE = re.compile(r"[0-9]+\Z")
MAX_PAYLOAD = 4096
MAX_PAYLOAD_VOIP = 5120
MAX_BODY_BUFFER = 1 << 20
JWT_MAX_AGE = 3600
JWT_FUTURE_SKEW = 300
PREFIX = "/3/device/"


def log(msg):
    print("apns-standin: " + msg, file=sys.stderr, flush=True)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


class Rule:
    def __init__(self, d):
        if not isinstance(d, dict):
            raise ValueError("each rule must be a JSON object")
        extra = set(d) - RULE_KEYS
        if extra:
            raise ValueError("unknown rule key(s): " + ", ".join(sorted(extra)))
        token = d.get("token")
        if not isinstance(token, str) or not (token == "*" or HEX_RE.match(token)):
            raise ValueError('rule "token" must be "*" or a non-empty hex string')
        self.token = token.lower()
        self.status = d.get("status", 200)
        if not is_int(self.status) or not 100 <= self.status <= 599:
            raise ValueError('rule "status" must be an integer 100..599')
        self.reason = d.get("reason")
        if self.reason is not None and not isinstance(self.reason, str):
            raise ValueError('rule "reason" must be a string or null')
        self.timestamp = d.get("timestamp")
        if self.timestamp is not None and (not is_int(self.timestamp) or self.timestamp < 0):
            raise ValueError('rule "timestamp" must be a non-negative integer (ms)')
        self.delay_ms = d.get("delay_ms", 0)
        if not is_int(self.delay_ms) or self.delay_ms < 0:
            raise ValueError('rule "delay_ms" must be a non-negative integer')
        self.times = d.get("times")
        if self.times is not None and (not is_int(self.times) or self.times < 0):
            raise ValueError('rule "times" must be a non-negative integer')
        self.action = d.get("action", "answer")
        if self.action not in ACTIONS:
            raise ValueError('rule "action" must be one of ' + ", ".join(sorted(ACTIONS)))
        self.source = d
        self.used = 0

    def take(self, token):
        if self.token != "*" and (token is None or self.token != token.lower()):
            return False
        if self.times is not None and self.used >= self.times:
            return False
        self.used += 1
        return True


class State:
    def __init__(self, args, public_key):
        self.args = args
        self.public_key = public_key
        self.topics = None
        if args.topics is not None:
            self.topics = {t.strip() for t in args.topics.split(",") if t.strip()}
        self.records = []
        self.record_index = 0
        self.script = []
        self.next_conn_id = 1
        self.open_conns = set()
        self.connections_opened = 0
        self.connections_refused = 0
        self.streams_refused = 0
        self.priority_frames = 0
        self.stop_event = None

    def add_record(self, rec):
        rec["index"] = self.record_index
        self.record_index += 1
        self.records.append(rec)

    def take_rule(self, token):
        for rule in self.script:
            if rule.take(token):
                return rule
        return None

    def stats(self):
        return {
            "connections_opened": self.connections_opened,
            "connections_open": len(self.open_conns),
            "requests": len(self.records),
            "distinct_jwts": len({r["jwt"] for r in self.records if r["jwt"] is not None}),
            "connections_refused": self.connections_refused,
            "streams_refused": self.streams_refused,
            "priority_frames": self.priority_frames,
        }


class Stream:
    def __init__(self, stream_id, headers):
        self.id = stream_id
        self.headers = headers
        self.body = bytearray()
        self.body_length = 0
        self.out = None          # pending response body bytes
        self.done = False        # response finished or stream reset
        self.record = None
        self.timer = None


def decode_unverified(token):
    header = claims = None
    try:
        header = jwt.get_unverified_header(token)
    except Exception:
        pass
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except Exception:
        pass
    if not isinstance(header, dict):
        header = None
    if not isinstance(claims, dict):
        claims = None
    return header, claims


class APNsProtocol(asyncio.Protocol):
    def __init__(self, state):
        self.state = state
        self.transport = None
        self.conn = None
        self.conn_id = None
        self.streams = {}
        self.closed = False
        self.goaway_last = None
        self.raised_limit = False
        self.stream_limit = 1

    # --- connection lifecycle -------------------------------------------------------------

    def connection_made(self, transport):
        self.transport = transport
        sslobj = transport.get_extra_info("ssl_object")
        alpn = sslobj.selected_alpn_protocol() if sslobj is not None else None
        if alpn != "h2":
            self.state.connections_refused += 1
            self.closed = True
            if self.state.args.verbose:
                log("refused a connection without ALPN h2 (offered result: %r)" % (alpn,))
            transport.close()
            return
        st = self.state
        self.conn_id = st.next_conn_id
        st.next_conn_id += 1
        st.connections_opened += 1
        st.open_conns.add(self)
        config = h2.config.H2Configuration(client_side=False, header_encoding=None,
                                           validate_inbound_headers=True)
        self.conn = h2.connection.H2Connection(config=config)
        # The stream limit is enforced here, not by h2 (which would make a stream over the limit
        # a connection error): h2 gets an unreachable limit, the SETTINGS frames carrying
        # MAX_CONCURRENT_STREAMS are written by us, and a stream over the advertised limit is
        # refused with RST_STREAM(REFUSED_STREAM) (RFC 9113 §5.1.2).
        self.conn.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 2 ** 31 - 1,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 65536,
        })
        self.conn.initiate_connection()
        self.conn.data_to_send()  # h2's SETTINGS frame, replaced by ours
        initial = st.args.initial_max_concurrent_streams
        if initial is None:
            self.raised_limit = True
            self.stream_limit = st.args.max_concurrent_streams
        else:
            self.stream_limit = initial
        frame = SettingsFrame(0)
        for k, v in self.conn.local_settings.items():
            frame.settings[k] = v
        frame.settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = self.stream_limit
        self.transport.write(frame.serialize())

    def connection_lost(self, exc):
        self.closed = True
        self.state.open_conns.discard(self)
        for s in self.streams.values():
            if s.timer is not None:
                s.timer.cancel()
        self.streams.clear()

    def flush(self):
        if self.closed or self.conn is None:
            return
        data = self.conn.data_to_send()
        if data:
            self.transport.write(data)

    def abort(self):
        if not self.closed:
            self.closed = True
            self.transport.abort()

    # --- inbound --------------------------------------------------------------------------

    def data_received(self, data):
        if self.closed:
            return
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as e:
            if self.state.args.verbose:
                log("connection %d: protocol error: %s" % (self.conn_id, e))
            self.flush()
            self.closed = True
            self.transport.close()
            return
        try:
            for ev in events:
                self.handle_event(ev)
                if self.closed:
                    return
        except Exception:
            log("connection %d: internal error\n%s" % (self.conn_id, traceback.format_exc()))
            self.abort()
            return
        self.flush()

    def handle_event(self, ev):
        if isinstance(ev, h2.events.PriorityUpdated):
            self.state.priority_frames += 1
            return
        if isinstance(ev, h2.events.RequestReceived):
            if len(self.streams) >= self.stream_limit:
                self.conn.reset_stream(ev.stream_id, ErrorCodes.REFUSED_STREAM)
                self.state.streams_refused += 1
                if self.state.args.verbose:
                    log("conn %d stream %d refused: over the stream limit %d"
                        % (self.conn_id, ev.stream_id, self.stream_limit))
                return
            headers = [(n.decode("utf-8", "replace").lower(), v.decode("utf-8", "replace"))
                       for n, v in ev.headers]
            self.streams[ev.stream_id] = Stream(ev.stream_id, headers)
        elif isinstance(ev, h2.events.DataReceived):
            s = self.streams.get(ev.stream_id)
            if s is not None:
                s.body_length += len(ev.data)
                room = MAX_BODY_BUFFER - len(s.body)
                if room > 0:
                    s.body += ev.data[:room]
            if ev.flow_controlled_length:
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            s = self.streams.get(ev.stream_id)
            if s is not None:
                self.request_complete(s)
        elif isinstance(ev, h2.events.StreamReset):
            s = self.streams.get(ev.stream_id)
            if s is not None:
                self.stream_done(s)
        elif isinstance(ev, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            self.pump()
        elif isinstance(ev, h2.events.ConnectionTerminated):
            # The client sent GOAWAY: h2 will not let us send more; close our side.
            self.flush()
            self.closed = True
            self.transport.close()

    # --- request handling -----------------------------------------------------------------

    def request_complete(self, s):
        st = self.state
        first = {}
        counts = {}
        for n, v in s.headers:
            first.setdefault(n, v)
            counts[n] = counts.get(n, 0) + 1
        method = first.get(":method")
        path = first.get(":path")
        token = path[len(PREFIX):] if path is not None and path.startswith(PREFIX) else None
        body = bytes(s.body)
        payload = None
        try:
            payload = json.loads(body.decode("utf-8"))
        except Exception:
            pass
        rec = {
            "index": None,
            "connection": self.conn_id,
            "stream": s.id,
            "method": method,
            "path": path,
            "token": token,
            "headers": [[n, v] for n, v in s.headers],
            "body": body.decode("utf-8", "replace"),
            "body_length": s.body_length,
            "payload": payload,
            "jwt": None,
            "jwt_header": None,
            "jwt_claims": None,
            "status": None,
            "reason": None,
            "timestamp": None,
            "apns_id": None,
            "action": "answer",
            "delay_ms": 0,
            "received_at": time.time(),
        }
        s.record = rec

        if self.goaway_last is not None and s.id > self.goaway_last:
            rec["action"] = "ignored"
            st.add_record(rec)
            self.log_request(rec)
            return

        req_id = first.get("apns-id")
        apns_id = req_id if req_id is not None and UUID_RE.match(req_id) else str(uuid.uuid4()).upper()
        rec["apns_id"] = apns_id

        status, reason = self.validate(first, counts, method, path, token, s, rec)
        rule = None
        action = "answer"
        timestamp = None
        delay_ms = 0
        if status is None:
            rule = st.take_rule(token)
            if rule is None:
                status, reason = 200, None
            else:
                action = rule.action
                delay_ms = rule.delay_ms
                if action in ("answer", "goaway_after"):
                    status, reason = rule.status, rule.reason
                    if status == 410 and reason is not None:
                        timestamp = rule.timestamp
        if (status == 410 and reason is not None and timestamp is None
                and action in ("answer", "goaway_after")):
            timestamp = int(time.time() * 1000)
        rec.update(status=status, reason=reason, timestamp=timestamp, action=action, delay_ms=delay_ms)
        st.add_record(rec)
        self.log_request(rec)

        goaway_reason = rule.reason if rule is not None else None
        if delay_ms:
            s.timer = asyncio.get_running_loop().call_later(
                delay_ms / 1000.0, self.act, s, action, status, reason, timestamp, apns_id, goaway_reason)
        else:
            self.act(s, action, status, reason, timestamp, apns_id, goaway_reason)

    def validate(self, first, counts, method, path, token, s, rec):
        st = self.state
        if method != "POST":
            return 405, "MethodNotAllowed"
        if path in ("/3/device", PREFIX):
            return 400, "MissingDeviceToken"
        if token is None or not HEX_RE.match(token):
            return 404, "BadPath"

        auth = first.get("authorization")
        if auth is None:
            return 403, "MissingProviderToken"
        if not auth.lower().startswith("bearer "):
            return 403, "InvalidProviderToken"
        raw = auth[len("bearer "):]
        rec["jwt"] = raw
        header, claims = decode_unverified(raw)
        rec["jwt_header"], rec["jwt_claims"] = header, claims
        if (not auth.startswith("bearer ") or header is None
                or header.get("alg") != "ES256" or header.get("kid") != st.args.key_id):
            return 403, "InvalidProviderToken"
        try:
            verified = jwt.decode(raw, key=st.public_key, algorithms=["ES256"], options={
                "verify_signature": True, "verify_exp": False, "verify_iat": False,
                "verify_nbf": False, "verify_aud": False, "verify_iss": False, "require": []})
        except Exception:
            return 403, "InvalidProviderToken"
        if not isinstance(verified, dict) or verified.get("iss") != st.args.team_id:
            return 403, "InvalidProviderToken"
        iat = verified.get("iat")
        if not is_int(iat):
            return 403, "InvalidProviderToken"
        now = time.time()
        if iat > now + JWT_FUTURE_SKEW:
            return 403, "InvalidProviderToken"
        if now - iat > JWT_MAX_AGE:
            return 403, "ExpiredProviderToken"

        topic = first.get("apns-topic")
        if not topic:
            return 400, "MissingTopic"
        if st.topics is not None and topic not in st.topics:
            return 400, "TopicDisallowed"

        push_type = first.get("apns-push-type")
        if push_type is not None and push_type not in PUSH_TYPES:
            return 400, "InvalidPushType"
        prio = first.get("apns-priority")
        if prio is not None and prio not in PRIORITIES:
            return 400, "BadPriority"
        collapse = first.get("apns-collapse-id")
        if collapse is not None and len(collapse.encode("utf-8")) > 64:
            return 400, "BadCollapseId"
        req_id = first.get("apns-id")
        if req_id is not None and not UUID_RE.match(req_id):
            return 400, "BadMessageId"
        exp = first.get("apns-expiration")
        if exp is not None and not DIGITS_RE.match(exp):
            return 400, "BadExpirationDate"
        if any(c > 1 for n, c in counts.items() if not n.startswith(":")):
            return 400, "DuplicateHeaders"
        if s.body_length == 0:
            return 400, "PayloadEmpty"
        limit = MAX_PAYLOAD_VOIP if push_type == "voip" else MAX_PAYLOAD
        if s.body_length > limit:
            return 413, "PayloadTooLarge"
        return None, None

    def log_request(self, rec):
        if self.state.args.verbose:
            log("conn %d stream %d %s %s -> %s %s %s%s" % (
                rec["connection"], rec["stream"], rec["method"], rec["path"], rec["action"],
                rec["status"], rec["reason"], (" after %d ms" % rec["delay_ms"]) if rec["delay_ms"] else ""))

    def act(self, s, action, status, reason, timestamp, apns_id, goaway_reason):
        s.timer = None
        if self.closed or s.done:
            return
        if self.goaway_last is not None and s.id > self.goaway_last:
            if s.record is not None:
                s.record.update(action="ignored", status=None, reason=None, timestamp=None)
            return
        if action == "answer":
            self.answer(s, status, reason, timestamp, apns_id)
        elif action == "goaway_after":
            self.answer(s, status, reason, timestamp, apns_id)
            self.send_goaway(s.id, goaway_reason=None)
        elif action == "goaway":
            self.send_goaway(max(s.id - 2, 0), goaway_reason)
        elif action == "reset":
            try:
                self.conn.reset_stream(s.id, ErrorCodes.REFUSED_STREAM)
            except h2.exceptions.ProtocolError:
                pass
            self.stream_done(s)
        elif action == "close":
            self.abort()
            return
        elif action == "hang":
            return
        self.flush()
        self.maybe_finish()

    def answer(self, s, status, reason, timestamp, apns_id):
        headers = [(":status", str(status)), ("apns-id", apns_id),
                   ("apns-unique-id", str(uuid.uuid4()))]
        body = b""
        if status != 200 and reason is not None:
            obj = {"reason": reason}
            if status == 410:
                obj["timestamp"] = timestamp
            body = json.dumps(obj, separators=(",", ":")).encode()
            headers += [("content-type", "application/json"), ("content-length", str(len(body)))]
        if status == 200 and not self.raised_limit:
            # APNs-like: the first success lifts the stream limit, announced just before its
            # answer (written beside h2, see connection_made; the client's ACK is harmless).
            self.raised_limit = True
            self.stream_limit = self.state.args.max_concurrent_streams
            self.flush()
            frame = SettingsFrame(0)
            frame.settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = self.stream_limit
            self.transport.write(frame.serialize())
        try:
            if body:
                self.conn.send_headers(s.id, headers)
                s.out = body
                self.pump()
            else:
                self.conn.send_headers(s.id, headers, end_stream=True)
                self.stream_done(s)
        except h2.exceptions.ProtocolError:
            self.stream_done(s)
            return

    def pump(self):
        """Send pending response bodies as flow control allows."""
        for s in list(self.streams.values()):
            if s.out is None or s.done:
                continue
            try:
                while s.out:
                    n = min(self.conn.local_flow_control_window(s.id),
                            self.conn.max_outbound_frame_size, len(s.out))
                    if n <= 0:
                        break
                    chunk, s.out = s.out[:n], s.out[n:]
                    self.conn.send_data(s.id, chunk, end_stream=not s.out)
            except h2.exceptions.ProtocolError:
                s.out = b""
            if not s.out:
                s.out = None
                self.stream_done(s)

    def stream_done(self, s):
        s.done = True
        if s.timer is not None:
            s.timer.cancel()
            s.timer = None
        self.streams.pop(s.id, None)
        self.maybe_finish()

    def send_goaway(self, last_stream_id, goaway_reason):
        if self.goaway_last is not None and self.goaway_last <= last_stream_id:
            return
        self.goaway_last = last_stream_id
        debug = b""
        if goaway_reason is not None:
            debug = json.dumps({"reason": goaway_reason}, separators=(",", ":")).encode()
        # Written beside h2's state machine on purpose: h2's close_connection() would forbid
        # finishing the streams at or below last_stream_id.
        self.flush()
        frame = GoAwayFrame(stream_id=0, last_stream_id=last_stream_id,
                            error_code=ErrorCodes.NO_ERROR, additional_data=debug)
        if not self.closed:
            self.transport.write(frame.serialize())
        self.maybe_finish()

    def maybe_finish(self):
        if self.goaway_last is None or self.closed:
            return
        for sid, s in self.streams.items():
            if sid <= self.goaway_last and not s.done:
                return
        self.flush()
        self.closed = True
        self.transport.close()


# --- control API ----------------------------------------------------------------------------

class HTTPError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


async def read_body(reader, headers):
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = b""
        while True:
            size_line = await reader.readline()
            try:
                size = int(size_line.split(b";")[0].strip(), 16)
            except ValueError:
                raise HTTPError(400, "bad chunked encoding")
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                return body
            body += await reader.readexactly(size)
            await reader.readline()
            if len(body) > 16 << 20:
                raise HTTPError(400, "body too large")
    n = headers.get("content-length")
    if n is None:
        return b""
    try:
        n = int(n)
    except ValueError:
        raise HTTPError(400, "bad content-length")
    if n < 0 or n > 16 << 20:
        raise HTTPError(400, "bad content-length")
    return await reader.readexactly(n)


def control_dispatch(state, method, path, body):
    """Returns (status, json-able object, shutdown?)."""
    routes = {
        "/requests": ("GET", "DELETE"),
        "/stats": ("GET",),
        "/script": ("GET", "POST", "DELETE"),
        "/shutdown": ("POST",),
    }
    if path not in routes:
        raise HTTPError(404, "not found")
    if method not in routes[path]:
        raise HTTPError(405, "method not allowed")
    if path == "/requests":
        if method == "GET":
            return 200, state.records, False
        n = len(state.records)
        state.records = []
        return 200, {"cleared": n}, False
    if path == "/stats":
        return 200, state.stats(), False
    if path == "/script":
        if method == "GET":
            return 200, [dict(r.source, used=r.used) for r in state.script], False
        if method == "DELETE":
            state.script = []
            return 200, {"rules": 0}, False
        try:
            rules = json.loads(body.decode("utf-8"))
        except Exception:
            raise HTTPError(400, "body is not JSON")
        if not isinstance(rules, list):
            raise HTTPError(400, "script must be a JSON array of rules")
        try:
            parsed = [Rule(r) for r in rules]
        except ValueError as e:
            raise HTTPError(400, str(e))
        state.script = parsed
        return 200, {"rules": len(parsed)}, False
    return 200, {"shutdown": True}, True


async def handle_control(state, reader, writer):
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            shutdown = False
            keep_alive = True
            try:
                parts = line.decode("latin-1").split()
                if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                    keep_alive = False
                    raise HTTPError(400, "bad request line")
                method, target, version = parts
                headers = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = h.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                conn_hdr = headers.get("connection", "").lower()
                keep_alive = (version == "HTTP/1.1" and conn_hdr != "close") or conn_hdr == "keep-alive"
                body = await read_body(reader, headers)
                status, obj, shutdown = control_dispatch(state, method, target.split("?", 1)[0], body)
            except HTTPError as e:
                status, obj = e.status, {"error": str(e)}
            payload = json.dumps(obj).encode()
            reasons = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
            head = ("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                    "Connection: %s\r\n\r\n" % (status, reasons.get(status, "Error"), len(payload),
                                                "keep-alive" if keep_alive and not shutdown else "close"))
            writer.write(head.encode("latin-1") + payload)
            await writer.drain()
            if shutdown:
                state.stop_event.set()
                break
            if not keep_alive:
                break
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


# --- main -------------------------------------------------------------------------------------

def load_public_key(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError:
        try:
            key = serialization.load_pem_private_key(data, password=None).public_key()
        except (ValueError, TypeError):
            raise ValueError("%s: not a PEM public key or unencrypted PEM private key" % path)
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise ValueError("%s: the JWT key must be an EC P-256 key" % path)
    return key


def fmt_addr(sock):
    host, port = sock.getsockname()[:2]
    return ("[%s]:%d" if ":" in host else "%s:%d") % (host, port)


async def serve(args, state, ctx):
    loop = asyncio.get_running_loop()
    state.stop_event = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, state.stop_event.set)
    server = await loop.create_server(lambda: APNsProtocol(state), args.host, args.port, ssl=ctx,
                                      backlog=256, ssl_handshake_timeout=10)
    control = await asyncio.start_server(lambda r, w: handle_control(state, r, w), "127.0.0.1",
                                         args.control_port)
    if args.exit_on_stdin_eof:
        def wait_stdin():
            try:
                while sys.stdin.buffer.read(4096):
                    pass
            except Exception:
                pass
            loop.call_soon_threadsafe(state.stop_event.set)
        threading.Thread(target=wait_stdin, daemon=True).start()
    print("apns-standin: listening on %s control %s" % (fmt_addr(server.sockets[0]),
                                                        fmt_addr(control.sockets[0])), flush=True)
    await state.stop_event.wait()
    server.close()
    control.close()
    for c in list(state.open_conns):
        c.abort()
    await asyncio.sleep(0)


def main(argv=None):
    p = argparse.ArgumentParser(description="APNs provider API stand-in (see module docstring)")
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--jwt-public-key", required=True)
    p.add_argument("--team-id", required=True)
    p.add_argument("--key-id", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--control-port", type=int, default=0)
    p.add_argument("--topics", default=None)
    p.add_argument("--max-concurrent-streams", type=int, default=1000)
    p.add_argument("--initial-max-concurrent-streams", type=int, default=None)
    p.add_argument("--exit-on-stdin-eof", action="store_true")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    if args.max_concurrent_streams < 1 or (args.initial_max_concurrent_streams is not None
                                           and args.initial_max_concurrent_streams < 1):
        p.error("stream limits must be >= 1")
    try:
        public_key = load_public_key(args.jwt_public_key)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(args.cert, args.key)
        ctx.set_alpn_protocols(["h2"])
    except (OSError, ValueError, ssl.SSLError) as e:
        log("cannot start: %s" % e)
        return 2
    state = State(args, public_key)
    try:
        asyncio.run(serve(args, state, ctx))
    except KeyboardInterrupt:
        pass
    except OSError as e:
        log("cannot listen: %s" % e)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

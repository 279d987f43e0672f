#!/usr/bin/env python3
"""A real TURN server (Debian `coturn`'s turnserver) on loopback, for checking the TURN REST
credentials `tether signal` issues in TURN_MODE=coturn (signaling.md §8.2), and a way to try an
allocation with given credentials. Written from coturn's documentation and RFC 5389/5766; it
shares no code with Tether. Needs `turnserver` and `turnutils_uclient` (scripts/install-deps).

USAGE
  coturn_fixture.py serve --secret SECRET [--port 0] [--realm tether.test] [--log FILE]
                          [--min-port 49152 --max-port 65535] [--verbose] [--sessions]
      Starts turnserver bound to 127.0.0.1 only, REST-API auth with SECRET, and prints exactly
      `listening on <port>` on stdout (flushed) once it answers a STUN Binding request over UDP
      and accepts TCP. Runs until SIGTERM/SIGINT (stops turnserver, exit 0) or until turnserver
      dies (exit 1, its last log lines on stderr). turnserver's own log goes to --log FILE, or
      to stderr with --verbose, or nowhere. --sessions adds turnserver's `-v`, so the log also
      names each session's requests and their outcome (`... user <USERNAME>: incoming packet
      ALLOCATE processed, success`): a test's outside witness that TURN carried a call.
      The turnserver command line (temporary directory D holds the pid file and the SQLite db,
      which turnserver opens even though REST auth needs no user database):
        turnserver -n --listening-ip=127.0.0.1 --relay-ip=127.0.0.1 --listening-port=P
          --min-port=.. --max-port=.. --use-auth-secret --static-auth-secret=SECRET
          --realm=REALM --no-tls --no-dtls --no-cli --no-rfc5780 --no-software-attribute
          --no-multicast-peers --allow-loopback-peers --fingerprint --log-file=stdout
          --simple-log --pidfile=D/turnserver.pid --db=D/turndb
      (--allow-loopback-peers: the relayed peers in an `allocate` check are on 127.0.0.1 too.)

  coturn_fixture.py allocate --port P --user USERNAME --password PASSWORD
                             [--host 127.0.0.1] [--tcp] [--method uclient|stun]
      Exit 0 iff an allocation with these credentials succeeds; prints one line:
        uclient (default): runs
          turnutils_uclient -y -c -n 1 -m 1 -l 50 -X [-t] -p P -u USERNAME -w PASSWORD HOST
          (two clients allocate relays and send each other one message through them). Success =
          exit status 0 and no "ERROR" in its output (a refused allocation prints "ERROR: Cannot
          complete Allocation" and exits 255). Prints `allocated (turnutils_uclient)` or
          `refused (turnutils_uclient exit N: <last line>)`.
        stun: an Allocate transaction written here (RFC 5766 over UDP, long-term credentials,
          MESSAGE-INTEGRITY = HMAC-SHA1 with key MD5(user:realm:password)); prints
          `allocated <relay ip:port> lifetime <s>` or `refused <code> <reason>`, then releases
          the allocation (Refresh, lifetime 0).

  coturn_fixture.py credentials --secret SECRET [--ttl 3600 | --expiry UNIX] [--user HEX32]
      Prints the §8.2 username (`<expiry>:<user>`) and password, one per line.

  coturn_fixture.py selftest
      Starts a server and checks the §8.2 vectors, a correct credential (UDP and TCP, both
      methods), a timestamp-only username, a wrong password, an expired timestamp and a wrong
      secret. One line per check; exit 0 iff all pass.
"""
import argparse
import base64
import hashlib
import hmac
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

MAGIC = 0x2112A442


# ------------------------------------------------------------------------------------------------
# §8.2 credentials
# ------------------------------------------------------------------------------------------------

def rest_credentials(secret, expiry, user=None):
    username = "%d:%s" % (expiry, user) if user is not None else "%d" % expiry
    password = base64.b64encode(hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest()).decode()
    return username, password


# ------------------------------------------------------------------------------------------------
# Minimal STUN/TURN client (RFC 5389, RFC 5766)
# ------------------------------------------------------------------------------------------------

ATTR_USERNAME, ATTR_MI, ATTR_ERROR, ATTR_LIFETIME = 0x0006, 0x0008, 0x0009, 0x000D
ATTR_REALM, ATTR_NONCE, ATTR_XOR_RELAYED, ATTR_TRANSPORT, ATTR_FINGERPRINT = 0x0014, 0x0015, 0x0016, 0x0019, 0x8028


def attr(kind, value):
    return struct.pack(">HH", kind, len(value)) + value + b"\0" * (-len(value) % 4)


def stun_message(mtype, tid, attrs, key=None):
    body = b"".join(attrs)
    if key is not None:
        # MESSAGE-INTEGRITY covers the header with a length that already includes it (RFC 5389 §15.4)
        header = struct.pack(">HHI", mtype, len(body) + 24, MAGIC) + tid
        body += attr(ATTR_MI, hmac.new(key, header + body, hashlib.sha1).digest())
    return struct.pack(">HHI", mtype, len(body), MAGIC) + tid + body


def parse_stun(data):
    mtype, length, magic = struct.unpack(">HHI", data[:8])
    tid = data[8:20]
    attrs, offset = {}, 20
    while offset + 4 <= 20 + length:
        kind, size = struct.unpack(">HH", data[offset:offset + 4])
        attrs.setdefault(kind, data[offset + 4:offset + 4 + size])
        offset += 4 + size + (-size % 4)
    return mtype, tid, attrs


def transact(sock, message, tid, tries=4, timeout=0.5):
    for _ in range(tries):
        sock.send(message)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = sock.recv(65536)
            except socket.timeout:
                break
            if len(data) >= 20 and data[8:20] == tid:
                return parse_stun(data)
        timeout *= 2
    raise TimeoutError("no STUN answer")


def binding_ok(host, port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((host, port))
        tid = os.urandom(12)
        try:
            mtype, _, _ = transact(sock, stun_message(0x0001, tid, []), tid, tries=1, timeout=0.2)
        except (TimeoutError, OSError):
            return False
        return mtype == 0x0101


def error_of(attrs):
    value = attrs.get(ATTR_ERROR, b"\0\0\0\0")
    return (value[2] & 0x7) * 100 + value[3], value[4:].decode(errors="replace")


def stun_allocate(host, port, username, password):
    """(True, 'relay ip:port lifetime s') or (False, 'code reason')."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((host, port))
        transport = attr(ATTR_TRANSPORT, b"\x11\0\0\0")
        tid = os.urandom(12)
        mtype, _, attrs = transact(sock, stun_message(0x0003, tid, [transport]), tid)
        if mtype != 0x0113 or error_of(attrs)[0] != 401:
            return False, "unexpected first answer 0x%04x %s" % (mtype, error_of(attrs))
        realm, nonce = attrs[ATTR_REALM], attrs[ATTR_NONCE]
        key = hashlib.md5(b"%s:%s:%s" % (username.encode(), realm, password.encode())).digest()
        for _ in range(2):   # a 438 stale nonce gets one retry with the new nonce
            tid = os.urandom(12)
            auth = [attr(ATTR_USERNAME, username.encode()), attr(ATTR_REALM, realm), attr(ATTR_NONCE, nonce)]
            mtype, _, attrs = transact(sock, stun_message(0x0003, tid, [transport] + auth, key), tid)
            if mtype == 0x0113 and error_of(attrs)[0] == 438:
                nonce = attrs.get(ATTR_NONCE, nonce)
                continue
            break
        if mtype != 0x0103:
            code, reason = error_of(attrs)
            return False, "%d %s" % (code, reason)
        relayed = attrs[ATTR_XOR_RELAYED]
        relay_port = struct.unpack(">H", relayed[2:4])[0] ^ (MAGIC >> 16)
        relay_ip = socket.inet_ntoa(struct.pack(">I", struct.unpack(">I", relayed[4:8])[0] ^ MAGIC))
        lifetime = struct.unpack(">I", attrs.get(ATTR_LIFETIME, b"\0\0\0\0"))[0]
        tid = os.urandom(12)
        auth = [attr(ATTR_USERNAME, username.encode()), attr(ATTR_REALM, realm), attr(ATTR_NONCE, nonce)]
        try:
            transact(sock, stun_message(0x0004, tid, [attr(ATTR_LIFETIME, b"\0\0\0\0")] + auth, key), tid, tries=2)
        except TimeoutError:
            pass
        return True, "%s:%d lifetime %d" % (relay_ip, relay_port, lifetime)


def uclient_allocate(host, port, username, password, tcp=False):
    command = ["turnutils_uclient", "-y", "-c", "-n", "1", "-m", "1", "-l", "50", "-X"] + (["-t"] if tcp else []) + \
              ["-p", str(port), "-u", username, "-w", password, host]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return False, "turnutils_uclient timed out"
    output = (done.stdout + done.stderr).strip()
    if done.returncode == 0 and "ERROR" not in output:
        return True, "turnutils_uclient"
    last = output.splitlines()[-1] if output else ""
    return False, "turnutils_uclient exit %d: %s" % (done.returncode, last)


def allocate(args):
    if args.method == "stun":
        if args.tcp:
            print("refused (--tcp is only for --method uclient)")
            return 2
        ok, detail = stun_allocate(args.host, args.port, args.user, args.password)
    else:
        ok, detail = uclient_allocate(args.host, args.port, args.user, args.password, args.tcp)
    print(("allocated %s" if ok else "refused %s") % (detail if args.method == "stun" else "(%s)" % detail), flush=True)
    return 0 if ok else 1


# ------------------------------------------------------------------------------------------------
# serve
# ------------------------------------------------------------------------------------------------

def free_port():
    """A port free for both UDP and TCP on 127.0.0.1."""
    for _ in range(200):
        port = random.randrange(20000, 45000)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u, socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
                u.bind(("127.0.0.1", port))
                t.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port")


def turnserver_command(directory, port, secret, realm, min_port, max_port, sessions=False):
    return ["turnserver", "-n"] + (["-v"] if sessions else []) + [ "--listening-ip=127.0.0.1", "--relay-ip=127.0.0.1", "--listening-port=%d" % port,
            "--min-port=%d" % min_port, "--max-port=%d" % max_port, "--use-auth-secret", "--static-auth-secret=%s" % secret,
            "--realm=%s" % realm, "--no-tls", "--no-dtls", "--no-cli", "--no-rfc5780", "--no-software-attribute",
            "--no-multicast-peers", "--allow-loopback-peers", "--fingerprint", "--log-file=stdout", "--simple-log",
            "--pidfile=%s" % os.path.join(directory, "turnserver.pid"), "--db=%s" % os.path.join(directory, "turndb")]


class TurnServer:
    def __init__(self, secret, port=0, realm="tether.test", log=None, verbose=False, min_port=49152, max_port=65535, sessions=False):
        self.secret, self.realm = secret, realm
        self.directory = tempfile.mkdtemp(prefix="coturn-fixture-")
        self.log_path = log or os.path.join(self.directory, "turnserver.log")
        self.verbose = verbose
        self.port = port or free_port()
        self.command = turnserver_command(self.directory, self.port, secret, realm, min_port, max_port, sessions)
        self.process = None

    def start(self, timeout=10):
        if shutil.which("turnserver") is None:
            raise RuntimeError("turnserver not found: install Debian coturn (scripts/install-deps)")
        self.log_handle = None if self.verbose else open(self.log_path, "ab")
        self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=sys.stderr if self.verbose else self.log_handle,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("turnserver exited %d: %s" % (self.process.returncode, self.log_tail()))
            if binding_ok("127.0.0.1", self.port) and self._tcp_ok():
                return self.port
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("turnserver did not answer within %ss: %s" % (timeout, self.log_tail()))

    def _tcp_ok(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def log_tail(self, lines=15):
        if self.verbose or not os.path.exists(self.log_path):
            return "(log on stderr)"
        with open(self.log_path, errors="replace") as handle:
            return " | ".join(handle.read().splitlines()[-lines:])

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.log_handle:
            self.log_handle.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def serve(args):
    server = TurnServer(args.secret, args.port, args.realm, args.log, args.verbose, args.min_port, args.max_port, args.sessions)
    stopping = []

    def stop(*_):
        stopping.append(True)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        port = server.start()
    except RuntimeError as error:
        print("coturn_fixture: %s" % error, file=sys.stderr)
        server.stop()
        return 1
    print("listening on %d" % port, flush=True)
    try:
        while not stopping:
            if server.process.poll() is not None:
                print("coturn_fixture: turnserver exited %d: %s" % (server.process.returncode, server.log_tail()), file=sys.stderr)
                return 1
            time.sleep(0.2)
    finally:
        server.stop()
    return 0


# ------------------------------------------------------------------------------------------------
# selftest
# ------------------------------------------------------------------------------------------------

def selftest(args):
    failures = []

    def check(name, condition, detail=""):
        print("%s %s%s" % ("ok  " if condition else "FAIL", name, (": " + detail) if detail and not condition else ""), flush=True)
        if not condition:
            failures.append(name)
    for secret, username, password in (("foobar", "1599491771", "Tpz/nKkyvX/vMSLKvL4sbtBt8Vs="),
                                       ("logen", "1599491771:ninefingers", "J29oEQUjl4DZR6tZ/JfUdnsxKm4="),
                                       ("tether-turn-secret", "1700003600:00112233445566778899aabbccddeeff", "z/Watd7SW/6nf39LUgvrJsUP/nc=")):
        expiry, _, user = username.partition(":")
        check("§8.2 vector %s" % username, rest_credentials(secret, int(expiry), user or None) == (username, password))
    secret = base64.b64encode(os.urandom(18)).decode()
    server = TurnServer(secret, verbose=args.verbose)
    try:
        port = server.start()
        check("turnserver answers STUN Binding and TCP on 127.0.0.1:%d" % port, True)
        now = int(time.time())
        good = rest_credentials(secret, now + 3600, os.urandom(16).hex())
        for tcp in (False, True):
            ok, detail = uclient_allocate("127.0.0.1", port, *good, tcp=tcp)
            check("correct credential allocates (turnutils_uclient, %s)" % ("TCP" if tcp else "UDP"), ok, detail)
        ok, detail = stun_allocate("127.0.0.1", port, *good)
        check("correct credential allocates (STUN Allocate)", ok and detail.startswith("127.0.0.1:"), detail)
        ok, detail = stun_allocate("127.0.0.1", port, *rest_credentials(secret, now + 3600))
        check("timestamp-only username allocates", ok, detail)
        wrong = (good[0], base64.b64encode(os.urandom(20)).decode())
        ok, detail = uclient_allocate("127.0.0.1", port, *wrong)
        check("wrong password refused (turnutils_uclient)", not ok, detail)
        ok, detail = stun_allocate("127.0.0.1", port, *wrong)
        check("wrong password refused 401 (STUN Allocate)", not ok and detail.startswith("401"), detail)
        expired = rest_credentials(secret, now - 5, os.urandom(16).hex())
        ok, detail = uclient_allocate("127.0.0.1", port, *expired)
        check("expired timestamp refused (turnutils_uclient)", not ok, detail)
        ok, detail = stun_allocate("127.0.0.1", port, *expired)
        check("expired timestamp refused 401 (STUN Allocate)", not ok and detail.startswith("401"), detail)
        other = rest_credentials("not-the-secret", now + 3600, os.urandom(16).hex())
        ok, detail = stun_allocate("127.0.0.1", port, *other)
        check("credential from another secret refused 401", not ok and detail.startswith("401"), detail)
    except RuntimeError as error:
        check("turnserver starts", False, str(error))
    finally:
        server.stop()
    check("turnserver stopped", server.process is None or server.process.poll() is not None)
    print("coturn_fixture selftest: %s" % ("all passed" if not failures else "%d failed" % len(failures)), flush=True)
    return 0 if not failures else 1


def main():
    parser = argparse.ArgumentParser(description="coturn on loopback for TURN REST credential tests.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve")
    p.add_argument("--secret", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--realm", default="tether.test")
    p.add_argument("--log")
    p.add_argument("--min-port", type=int, default=49152)
    p.add_argument("--max-port", type=int, default=65535)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--sessions", action="store_true")
    p = sub.add_parser("allocate")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--tcp", action="store_true")
    p.add_argument("--method", choices=("uclient", "stun"), default="uclient")
    p = sub.add_parser("credentials")
    p.add_argument("--secret", required=True)
    p.add_argument("--ttl", type=int, default=3600)
    p.add_argument("--expiry", type=int)
    p.add_argument("--user")
    p = sub.add_parser("selftest")
    p.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    if args.command == "serve":
        return serve(args)
    if args.command == "allocate":
        return allocate(args)
    if args.command == "credentials":
        expiry = args.expiry if args.expiry is not None else int(time.time()) + args.ttl
        username, password = rest_credentials(args.secret, expiry, args.user if args.user is not None else os.urandom(16).hex())
        print(username)
        print(password)
        return 0
    return selftest(args)


if __name__ == "__main__":
    sys.exit(main())

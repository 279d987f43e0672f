#!/usr/bin/env python3
"""Drives `tether call` and `tether answer` as a script would (pipes, one event per line)
through a real `tether signal`, over the real WebRTC data channel. Each scenario prints
`PASS <name>` or `FAIL <name>: <why>`; the exit status is 0 only if every scenario passed.

usage: call_cli.py --tether PATH [--scenario NAME]...   (chat, declined, busy, offline, relay)

`relay` runs its own `tether signal` in TURN_MODE=coturn in front of a real coturn on loopback
(Tests/Peers/coturn_fixture.py), and both processes take `--relay-only`.
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time


class Fail(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    def __init__(self, name, args):
        self.name = name
        self.lines = []
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        self.errors = []
        threading.Thread(target=self._read, args=(self.p.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._read, args=(self.p.stderr, self.errors), daemon=True).start()

    @staticmethod
    def _read(stream, into):
        for line in stream:
            into.append(line.rstrip("\n"))

    def wait_for(self, prefix, timeout=20, after=0, stream=None):
        """The first line starting with `prefix` among the lines from index `after` on (of
        standard output, or of `stream`)."""
        stream = self.lines if stream is None else stream
        end = time.time() + timeout
        while time.time() < end:
            for line in list(stream)[after:]:
                if line.startswith(prefix):
                    return line
            time.sleep(0.02)
        raise Fail("%s: no %r within %ss; stdout %r stderr %r" % (self.name, prefix, timeout, self.lines[-8:], self.errors[-4:]))

    def mark(self):
        """Where the next lines of standard output and standard error will start."""
        return len(self.lines), len(self.errors)

    def type(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def eof(self):
        self.p.stdin.close()

    def exit_status(self, timeout=15):
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise Fail("%s did not exit" % self.name)

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


class World:
    def __init__(self, tether, coturn=False, server_flags=()):
        self.tether = tether
        self.dir = tempfile.mkdtemp(prefix="tether-call-")
        self.port = free_port()
        self.turn = None
        self.procs = []
        arguments, environment = [tether, "signal", "--local", "--signal-port", str(self.port), *server_flags], None
        if coturn:
            self.turn = Coturn(self.dir)
            arguments.remove("--local")
            environment = dict(os.environ, TURN_MODE="coturn", TURN_SECRET=self.turn.secret, TURN_URLS=self.turn.url)
        self.server = subprocess.Popen(arguments, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=environment)
        if not self.server.stdout.readline().startswith("signal: listening on"):
            self.close()
            raise Fail("tether signal did not start")
        self.url = "ws://127.0.0.1:%d/signal" % self.port

    def identity(self, name):
        state = os.path.join(self.dir, name)
        out = subprocess.run([self.tether, "id", "--state", state], capture_output=True, text=True, check=True).stdout.split("\n")
        return state, out[0], out[1]

    def answer(self, name, state, *flags):
        p = Proc(name, [self.tether, "answer", "--signal", self.url, "--state", state, *flags])
        self.procs.append(p)
        return p

    def call(self, name, state, contact, *flags):
        p = Proc(name, [self.tether, "call", contact, "--signal", self.url, "--state", state, *flags])
        self.procs.append(p)
        return p

    def close(self):
        for p in self.procs:
            p.stop()
        if getattr(self, "server", None) is not None and self.server.poll() is None:
            self.server.terminate()
            self.server.wait()
        if self.turn is not None:
            self.turn.stop()


class Coturn:
    """coturn_fixture.py `serve` with a fresh REST secret, its turnserver log in `directory`."""

    def __init__(self, directory):
        self.secret = os.urandom(18).hex()
        self.log = os.path.join(directory, "turnserver.log")
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "coturn_fixture.py")
        self.p = subprocess.Popen([sys.executable, script, "serve", "--secret", self.secret, "--log", self.log, "--sessions"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("listening on "):
            self.stop()
            raise Fail("coturn did not start (needs Debian coturn): %r" % line)
        self.url = "turn:127.0.0.1:%d?transport=udp" % int(line.split()[-1])

    def log_lines(self):
        with open(self.log, errors="replace") as handle:
            return handle.read().splitlines()

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            self.p.wait()


def waiting(world, answerer, after=0):
    # `answer` says on stderr that it is registered and waiting (again after a call that ended
    # before it was secured).
    end = time.time() + 10
    while time.time() < end:
        if any("waiting for a call" in line for line in answerer.errors[after:]):
            return
        time.sleep(0.02)
    raise Fail("the answerer is not waiting: %r" % answerer.errors[-4:])


def check(condition, why):
    if not condition:
        raise Fail(why)


def scenario_chat(world):
    a_state, a_id, _ = world.identity("alice")
    b_state, b_id, b_link = world.identity("bob")
    bob = world.answer("bob", b_state)
    waiting(world, bob)
    alice = world.call("alice", a_state, b_link)
    check(alice.wait_for("calling ") == "calling " + b_id, "calling names the callee")
    check(bob.wait_for("incoming ") == "incoming " + a_id, "the invitation names the caller's ID")
    bob.type("yes")
    check(alice.wait_for("answered") == "answered", "answered")
    a_number = alice.wait_for("secured ")[len("secured "):]
    b_number = bob.wait_for("secured ")[len("secured "):]
    check(a_number == b_number and len(a_number.split(" ")) == 12, "safety numbers %r / %r" % (a_number, b_number))
    alice.type("hello Bob")
    check(bob.wait_for("message ") == "message hello Bob", "Bob got the text")
    alice.wait_for("receipt")
    bob.type("hi Alice \x1b[31m")
    check(alice.wait_for("message ") == "message hi Alice \ufffd[31m", "Alice got the text, control characters replaced")
    alice.type("/rotate")
    alice.type("after rotation")
    alice.wait_for("rotated 1")
    bob.wait_for("rotated 1")
    end = time.time() + 10
    while "message after rotation" not in bob.lines and time.time() < end:
        time.sleep(0.02)
    check("message after rotation" in bob.lines, "a text after the rotation arrived")
    alice.eof()
    check(alice.wait_for("ended ") == "ended hung up", "Alice hung up")
    check(bob.wait_for("ended ") == "ended the peer hung up", "Bob heard it")
    check(alice.exit_status() == 0 and bob.exit_status() == 0, "both exit 0 after a secured call")


def scenario_declined(world):
    a_state, _, _ = world.identity("carol")
    b_state, b_id, _ = world.identity("dave")
    dave = world.answer("dave", b_state)
    waiting(world, dave)
    carol = world.call("carol", a_state, b_id)
    dave.wait_for("incoming ")
    dave.type("no")
    check(carol.wait_for("ended ") == "ended the peer declined", "the caller hears the decline")
    check(carol.exit_status() == 1, "a declined call exits 1")
    check(any(line.startswith("tether: call:") and "declined" in line for line in carol.errors), "one reason line: %r" % carol.errors)
    check(dave.wait_for("ended ") == "ended declined", "the callee declined")


def scenario_busy(world):
    a_state, _, _ = world.identity("erin")
    b_state, b_id, _ = world.identity("frank")
    c_state, _, _ = world.identity("grace")
    frank = world.answer("frank", b_state)
    waiting(world, frank)
    erin = world.call("erin", a_state, b_id)
    frank.wait_for("incoming ")
    frank.type("yes")
    erin.wait_for("secured ")
    grace = world.call("grace", c_state, b_id)
    check(grace.wait_for("ended ") == "ended the peer is busy", "a third caller gets busy")
    check(grace.exit_status() == 1, "busy exits 1")
    erin.type("still on")
    check(frank.wait_for("message ") == "message still on", "the first call goes on")
    erin.eof()
    check(erin.exit_status() == 0 and frank.exit_status() == 0, "the first call ends cleanly")


def scenario_offline(world):
    a_state, _, _ = world.identity("heidi")
    _, nobody, _ = world.identity("ivan")   # made but never online
    heidi = world.call("heidi", a_state, nobody)
    check(heidi.wait_for("ended ", timeout=10) == "ended the peer is not online", "an offline callee ends the call at once")
    check(heidi.exit_status() == 1, "offline exits 1")


def scenario_relay(world):
    a_state, a_id, _ = world.identity("judy")
    b_state, b_id, b_link = world.identity("ken")
    # The TURN server listens on loopback only, which libnice does not reach from the other
    # interfaces' sockets: both gather on 127.0.0.1.
    ken = world.answer("ken", b_state, "--relay-only", "--ice-address", "127.0.0.1")
    waiting(world, ken)
    judy = world.call("judy", a_state, b_link, "--relay-only", "--ice-address", "127.0.0.1")
    check(ken.wait_for("incoming ") == "incoming " + a_id, "the invitation names the caller's ID")
    ken.type("yes")
    a_number = judy.wait_for("secured ")[len("secured "):]
    b_number = ken.wait_for("secured ")[len("secured "):]
    check(a_number == b_number and len(a_number.split(" ")) == 12, "safety numbers %r / %r" % (a_number, b_number))
    judy.type("through the relay")
    check(ken.wait_for("message ") == "message through the relay", "Ken got the text")
    ken.type("and back")
    check(judy.wait_for("message ") == "message and back", "Judy got the answer")
    # Relay-only sides offer relayed candidates only, so a secured call is already proof that
    # TURN carried it; coturn's own log is the witness from outside Tether: both processes
    # allocated with the credentials `tether signal` issued, and each permitted the other's
    # relayed address.
    log = world.turn.log_lines()
    users = {match.group(1) for line in log if "ALLOCATE processed, success" in line
             for match in [re.search(r"user <([^>]*)>", line)] if match}
    check(len(users) >= 2, "coturn saw successful allocations by two users: %r" % sorted(users))
    check(all(re.match(r"^\d+:[0-9a-f]{32}$", user) for user in users), "the users are §8.2 REST usernames: %r" % sorted(users))
    check(any("CREATE_PERMISSION processed, success" in line for line in log), "coturn created permissions for the peers")
    judy.eof()
    check(judy.wait_for("ended ") == "ended hung up", "Judy hung up")
    check(ken.wait_for("ended ") == "ended the peer hung up", "Ken heard it")
    check(judy.exit_status() == 0 and ken.exit_status() == 0, "both exit 0 after a secured call")


SCENARIOS = {"chat": scenario_chat, "declined": scenario_declined, "busy": scenario_busy, "offline": scenario_offline,
             "relay": scenario_relay}
COTURN_SCENARIOS = {"relay"}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tether", required=True)
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    arguments = parser.parse_args()
    failed = False
    for name in arguments.scenario or list(SCENARIOS):
        try:
            world = None
            world = World(arguments.tether, coturn=name in COTURN_SCENARIOS)
            SCENARIOS[name](world)
            print("PASS " + name, flush=True)
        except Fail as failure:
            failed = True
            print("FAIL %s: %s" % (name, failure), flush=True)
        finally:
            if world is not None:
                world.close()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

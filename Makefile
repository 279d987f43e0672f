# Tether — the two commands a new user needs:
#   make relay   run the companion relay locally (loopback, open admission)
#   make test    install what is missing, build, run every test
#   make demo    watch a Mac and a phone pair through a private relay, narrated
SWIFT ?= swift

.PHONY: docs call-keyboard-long bench-scale deb deb-lint deb-test build-deps fuzz soak vectors-long traceability bench-attack check-asan check-tsan check-rtc-heap bench-relay bench-storage bench-admission bench-failover chaos bench-push bench-push-soak bench-signal bench-rtc deps build test bench relay demo clean

deps:
	./scripts/install-deps

# What building and running needs, without the test tooling (tmux, zbar, PyPI packages).
build-deps:
	./scripts/install-deps --build

build: build-deps
	$(SWIFT) build

test: deps
	scripts/check-imports
	$(SWIFT) build --build-tests
	scripts/check-api
	scripts/docs --check-coverage --no-build
	$(SWIFT) test --parallel --xunit-output .build/test-results.xml
	@./scripts/test-summary .build/test-results.xml
	scripts/traceability
	scripts/module-graph --check
	scripts/check-unchecked-sendable
	scripts/fuzz --smoke
	scripts/check-by-version

# issue 33's keyboard cases at full size against chat_peer.py: 20 runs of 30 lines then EOF, a
# 10,000-line paste (about 5 minutes at the paced 32 texts a second), 520 and 2,000 receipts.
call-keyboard-long: deps
	$(SWIFT) build --build-tests
	TETHER_CALL_LONG=1 $(SWIFT) test --skip-build --filter CallKeyboardEndToEndTests

# DocC documentation of TetherClient, TetherCall, TetherRTC and the service modules, from their
# doc comments and the catalogs in docs/catalogs/ (scripts/docs): .build/docs/Tether.doccarchive,
# then its size, DocC's warnings and the public symbols without a doc comment.
# `scripts/docs --check-coverage` fails while TetherClient or TetherCall has one.
docs: build-deps
	scripts/docs

bench: deps
	$(SWIFT) build -c release --product tether-bench
	.build/release/tether-bench

# The relay beside the C floor relay (../shared/bench/TARGETS.md): open mode, abuse limits off,
# a fresh database in a temporary directory. SCENARIOS=abcde by default; OUT= keeps the results.
SCENARIOS ?= abcde
REPS ?= 3
bench-relay: build-deps
	$(SWIFT) build -c release --product tether
	$(MAKE) -C ../shared/bench
	cd ../shared/bench && ./compare-floor.sh --name tether-relay --reps $(REPS) --scenarios $(SCENARIOS) $(if $(OUT),--out $(OUT)) \
	  'cd $$(mktemp -d) && RELAY_WS_RATE_LIMIT=0 RELAY_MAX_FRAMES_PER_SEC=0 RELAY_MAX_SOCKETS_PER_IP=1000000 RELAY_MAX_TOTAL_SOCKETS=1000000 RELAY_DAILY_BYTE_QUOTA=1000000000000000 exec $(CURDIR)/.build/release/tether relay --local --relay-port {port}'

# How each service's costs move as the work grows (scripts/bench-scale): the relay with LEVELS
# parked Macs (RSS and idle CPU per parked Mac, a fresh pair's admission and RTT, time to close
# them all, RSS after), the signaling server with SIGNAL_LEVELS registered idle clients (RSS and
# idle CPU per client, registration and forwarding p99), the push relay over PUSH_LEVELS stored
# registrations (push p99, database size per registration). SERVICES picks among the three; a
# level past the descriptor limit the harness may raise is reported as not reached.
LEVELS ?= 1000,10000,19000,50000,100000,200000
SIGNAL_LEVELS ?= 1000,10000,18000,50000,100000
PUSH_LEVELS ?= 10000,100000,1000000
SERVICES ?= relay,signal,push
bench-scale: build-deps
	$(SWIFT) build -c release --product tether
	$(SWIFT) build -c release --product tether-signalbench
	$(MAKE) -C ../shared/bench
	$(MAKE) -s -C bench
	scripts/bench-scale --services $(SERVICES) --levels $(LEVELS) --signal-levels $(SIGNAL_LEVELS) --push-levels $(PUSH_LEVELS) $(if $(OUT),--out $(OUT))

# The storage-latency scenario (tether-relaybench run): 5,000 established rooms reconnect at once
# with signed joins while 100 spliced pairs ping-pong 64 B frames, once over the plain SQLite
# store and once with every store call 2 ms slower; prints the pairs' RTT p99 in each, their
# ratio (target <= 1.5) and the time until every room is back. RELAYBENCH_ARGS adds options
# (tether-relaybench run --help), e.g. RELAYBENCH_ARGS='--reps 3'.
RELAYBENCH_ARGS ?=
bench-storage: deps
	$(SWIFT) build -c release --product tether-relaybench
	.build/release/tether-relaybench run $(RELAYBENCH_ARGS)

# Admissions per second and p99 (signed joins of established rooms) on SQLite and on a
# PostgreSQL of the script's own, and PostgreSQL transactions (round trips) per admission.
bench-admission: deps
	$(SWIFT) build -c release --product tether-relaybench
	bench/admission-bench.sh

# Every normative rule of relay.md, push.md and signaling.md mapped to its tests
# (docs/traceability/); `make test` runs this check.
traceability:
	scripts/traceability

# The RFC 7748 X25519 vector iterated a million times (two minutes in a debug build), which the
# suite skips.
vectors-long: deps
	$(SWIFT) build --build-tests
	TETHER_LONG_VECTORS=1 $(SWIFT) test --skip-build --filter 'X25519Tests.testRFC7748Vectors'

# The whole suite under a sanitizer (issue 18), each in a build directory of its own so the
# normal build stays as it is. CHECK_FILTER= narrows it (a swift test --filter expression).
# LeakSanitizer is off by default: XCTest itself leaks at exit (a weak reference in
# awaitUsingExpectation, its suite objects), which fails every test process, even an empty
# passing one; the fuzz targets run with leak detection on.
check-asan: deps
	$(SWIFT) build --build-tests --sanitize=address --build-path .build/asan
	ASAN_OPTIONS=$${ASAN_OPTIONS:-detect_leaks=0} $(SWIFT) test --skip-build --sanitize=address --build-path .build/asan --parallel $(if $(CHECK_FILTER),--filter '$(CHECK_FILTER)') --xunit-output .build/asan-results.xml
	@./scripts/test-summary .build/asan-results.xml

# ThreadSanitizer (issue 18). On Linux it cannot see Swift's Synchronization.Mutex (futex calls
# in the uninstrumented standard library: two threads incrementing one Mutex(Int) are reported
# as a race): at 371dfcd, 153 reports in 35 test processes, every one inside a lock. So every lock
# is TetherSync's Locked, and TETHER_TSAN makes it tell the sanitizer each acquire and release;
# a report is a real race again. At df71caa: 1,045 tests, 0 reports, about 21 minutes beside the
# 10-run make test loop; one load figure (a ping flood's spare round trips) is not asserted here.
TSAN_FLAGS = -Xswiftc -DTETHER_TSAN
check-tsan: deps
	$(SWIFT) build --build-tests --sanitize=thread --build-path .build/tsan $(TSAN_FLAGS)
	TSAN_OPTIONS=$${TSAN_OPTIONS:-halt_on_error=0} $(SWIFT) test --skip-build --sanitize=thread --build-path .build/tsan $(TSAN_FLAGS) --parallel $(if $(CHECK_FILTER),--filter '$(CHECK_FILTER)') --xunit-output .build/tsan-results.xml
	@./scripts/test-summary .build/tsan-results.xml

# The WebRTC stack's heap check (issue 14): the 200-call leak test run RTC_HEAP_RUNS times (20)
# under glibc's malloc checking, which turns heap corruption into an abort at once ("corrupted
# double-linked list"). Before ICEThread held its context across a post, it failed about one
# run in six when two other processes keep both cores busy (start them yourself; the target
# adds no load). Logs of failed runs stay in .build/rtc-heap/.
RTC_HEAP_RUNS ?= 20
check-rtc-heap: deps
	$(SWIFT) build --build-tests
	scripts/rtc-heap-repro $(RTC_HEAP_RUNS)

# The soak (issue 18): SOAK_MINUTES (30) of 19,000 parked macs, 500 echoing pairs and 50
# connections a second of churn against a release relay; RSS and descriptors sampled each minute,
# their slopes and every error printed as one JSON line (SOAK_OUT= keeps it). SOAK_ARGS adds
# options: SOAK_ARGS="--service signal" soaks the signaling server instead (2,000 registered idle
# clients and 10 registrations a second of churn; bench/soak.py --help).
SOAK_MINUTES ?= 30
soak: deps
	$(SWIFT) build -c release --product tether
	$(MAKE) -C ../shared/bench
	.venv/bin/python bench/soak.py --minutes $(SOAK_MINUTES) $(if $(SOAK_OUT),--out $(SOAK_OUT)) $(SOAK_ARGS)

# Slow and idle attackers (issue 18): 3,000 heads sent a byte a second and 3,000 upgrades that
# never send a Hello, from 60 addresses, against a release relay with its default limits; a fresh
# pair's admission latency before and during the attack, and how and when each attacker was closed.
# ATTACK_ARGS="--service push" attacks tether push (slow heads and slow bodies beside a
# /v1/register every half second), "--service signal" tether signal (slow /signal heads and
# upgrades that never register beside a registration every 0.5 s). ATTACK_ARGS="--attack unread
# --service S [--variant V] [--sockets N]": clients that never read their replies (issue 29).
bench-attack: deps
	$(SWIFT) build -c release --product tether
	.venv/bin/python bench/attack.py $(ATTACK_ARGS)

# Shard failover time over 10 runs (median, max): three nodes on a PostgreSQL of the program's
# own, one killed with -9, until each of its rooms is admitted again on a survivor.
bench-failover: deps
	$(SWIFT) build -c release --product tether
	.venv/bin/python bench/failover-bench.py $(FAILOVER_ARGS)

# Chaos (relay.md §8, push.md, signaling.md): three relay nodes, two signal and two push nodes on a
# PostgreSQL of the program's own, with live clients; in a loop, kill -9 of a node, SIGSTOP of a
# node past its lease, SIGSTOP of PostgreSQL and a PostgreSQL restart, each followed by the checks:
# no acknowledged registration lost, no room served by two nodes, no bucket moved off a live node,
# every room served again within the bound, /readyz truthful, every request answered in time.
# One JSON line per fault, a summary, exit 1 on any violation. CHAOS_ARGS adds options
# (bench/chaos.py --help), e.g. CHAOS_ARGS='--fault pg-stall --trials 20 --stall-s 30'.
CHAOS_ARGS ?=
chaos: deps
	$(SWIFT) build -c release --product tether
	.venv/bin/python bench/chaos.py $(CHAOS_ARGS)

# The signaling server's benchmark (tether-signalbench run): a fresh `tether signal` per scenario
# on CPU 0, the clients on CPU 1; signals forwarded/s around 1,000 registered clients, p99
# latency at 20,000 signals/s offered, registration cost against one Ed25519 verify (openssl
# speed), RSS per idle registered client. SIGNALBENCH_ARGS adds options (tether-signalbench run --help).
SIGNALBENCH_ARGS ?=
bench-signal: build-deps
	$(SWIFT) build -c release --product tether
	$(SWIFT) build -c release --product tether-signalbench
	.build/release/tether-signalbench run --tether .build/release/tether $(SIGNALBENCH_ARGS)

# The WebRTC data channel beside aiortc on loopback (tether-rtcbench): setup time (median, p90
# over 20 calls), raw 16 KiB-message throughput, and the Noise secure channel over it (capped by
# §9.6's 40 frames a second). The aiortc side is Tests/Peers/rtc_bench_peer.py in .venv, so this
# needs `make deps`. RTCBENCH_ARGS adds options (tether-rtcbench --help).
RTCBENCH_ARGS ?=
bench-rtc: deps
	$(SWIFT) build -c release --product tether-rtcbench
	.build/release/tether-rtcbench $(RTCBENCH_ARGS)

# libFuzzer on every parser that reads the network or the disk (scripts/fuzz, harnesses and seed
# corpora in Fuzz/): each target for FUZZ_SECONDS, default 600; FUZZ_TARGETS="cbor websocket"
# runs only those (scripts/fuzz --list names them). `make test` runs each for 5 s (--smoke).
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?=
fuzz:
	FUZZ_TARGETS='$(FUZZ_TARGETS)' scripts/fuzz $(FUZZ_SECONDS)

relay: build-deps
	$(SWIFT) build -c release --product tether
	.build/release/tether relay --local

demo: build-deps
	$(SWIFT) build --product tether
	.build/debug/tether demo

# A .deb for a bare Debian server (scripts/make-deb): the binary with the Swift standard library
# linked in, hardened systemd units, example settings, a `tether` user. deb-test installs it into
# a clean debootstrap root and runs the deployment guide's own blocks against it (needs root and
# Debian's registry).
deb: build-deps
	scripts/make-deb

# lintian on both packages, at the error and warning levels (Debian's lintian package).
deb-lint: deb
	@command -v lintian >/dev/null || { echo "deb-lint: apt-get install lintian" >&2; exit 2; }
	lintian --fail-on error,warning dist/tether_*.deb dist/tether-dbgsym_*.deb

deb-test: deb
	@command -v debootstrap >/dev/null || { echo "deb-test: apt-get install debootstrap" >&2; exit 2; }
	scripts/deb-test

clean:
	rm -rf .build

# The push relay's benchmark (scripts/bench-push): closed-loop pushes/s on one core, open-loop
# latency at 5,000 pushes/s, APNs connections opened; bench-push-soak adds a 300 s RSS run.
bench-push: deps
	./scripts/bench-push

bench-push-soak: deps
	./scripts/bench-push 10 64 5000 300

// swift-tools-version:6.0
// Tether: self-hosted companion relay, push relay, signaling server and client SDK.
// No Swift package dependencies: the build machine can fetch none. C libraries come
// from Debian and are wrapped as system-library targets below.
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Tether",
    products: [
        .library(name: "TetherCrypto", targets: ["TetherCrypto"]),
        .library(name: "TetherEncoding", targets: ["TetherEncoding"]),
        .library(name: "TetherWire", targets: ["TetherWire"]),
        .library(name: "TetherAttest", targets: ["TetherAttest"]),
        .library(name: "TetherDevice", targets: ["TetherDevice"]),
        .library(name: "TetherClient", targets: ["TetherClient"]),
        .library(name: "TetherNoise", targets: ["TetherNoise"]),
        .library(name: "TetherNet", targets: ["TetherNet"]),
        .library(name: "TetherStore", targets: ["TetherStore"]),
        .library(name: "TetherService", targets: ["TetherService"]),
        .library(name: "TetherRelay", targets: ["TetherRelay"]),
        .library(name: "TetherPush", targets: ["TetherPush"]),
        .library(name: "TetherSignal", targets: ["TetherSignal"]),
        .library(name: "TetherCall", targets: ["TetherCall"]),
        .library(name: "TetherRTC", targets: ["TetherRTC"]),
        .executable(name: "tether", targets: ["tether"]),
        .executable(name: "tether-bench", targets: ["tether-bench"]),
        .executable(name: "tether-netbench", targets: ["tether-netbench"]),
        .executable(name: "tether-relaybench", targets: ["tether-relaybench"]),
        .executable(name: "tether-signalbench", targets: ["tether-signalbench"]),
        .executable(name: "tether-rtcbench", targets: ["tether-rtcbench"]),
    ],
    targets: [
        // MARK: C libraries (Debian: libssl-dev, libsqlite3-dev)
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL"),
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite"),
        // libsodium (Debian: libsodium-dev): the fast path of Ed25519 verification (TetherCrypto).
        .systemLibrary(name: "CSodium", path: "Sources/CSodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CPostgres", path: "Sources/CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // QR codes for the pairing link in the terminal (Debian: libqrencode-dev).
        .systemLibrary(name: "CQRencode", path: "Sources/CQRencode"),
        // libcurl with nghttp2 (Debian: libcurl4-openssl-dev): the push relay's HTTP/2 client to APNs.
        // A C target, not a bare system library: curl's setters are variadic and its callbacks C.
        .target(name: "CTetherCurl", dependencies: ["COpenSSL"], path: "Sources/CTetherCurl",
                linkerSettings: [.linkedLibrary("curl")]),
        // libnice (Debian: libnice-dev) for ICE, on its GLib main context; usrsctp (Debian:
        // libusrsctp-dev) for SCTP over DTLS. C targets: their setters are variadic and their
        // callbacks C function pointers.
        .systemLibrary(name: "CNice", path: "Sources/CNice", pkgConfig: "nice", providers: [.apt(["libnice-dev"])]),
        .target(name: "CTetherNice", dependencies: ["CNice"], path: "Sources/CTetherNice"),
        .target(name: "CTetherSCTP", path: "Sources/CTetherSCTP", linkerSettings: [.linkedLibrary("usrsctp")]),
        // Linux calls Glibc does not expose cleanly to Swift (epoll, eventfd, timerfd, accept4, sockopts).
        .target(name: "CTetherSystem", path: "Sources/CTetherSystem"),
        // The OpenSSL-in-C reference loop tether-bench measures wrapper overhead against.
        .target(name: "CTetherBenchFloor", dependencies: ["COpenSSL"], path: "Sources/CTetherBenchFloor"),

        // MARK: Leaves
        // Locks, paths and small value shapes every module shares.
        .target(name: "TetherSync", dependencies: ["CTetherSystem"], swiftSettings: strict),
        // Generic encodings (Base64, hex, JSON values, Punycode): no protocol in them, so the network
        // core and the stores take them without taking any protocol's messages.
        .target(name: "TetherEncoding", swiftSettings: strict),
        .target(name: "TetherCrypto", dependencies: ["COpenSSL", "CSodium"], swiftSettings: strict),
        // The messages of the relay, client, push and signaling protocols.
        .target(name: "TetherWire", dependencies: ["TetherEncoding", "TetherCrypto"], swiftSettings: strict),
        .target(name: "TetherNoise", dependencies: ["TetherSync", "TetherCrypto"], swiftSettings: strict),
        .target(name: "TetherAttest", dependencies: ["TetherCrypto"], swiftSettings: strict),
        .target(name: "TetherNet", dependencies: ["TetherSync", "TetherEncoding", "TetherCrypto", "CTetherSystem", "COpenSSL"],
                swiftSettings: strict),

        // MARK: The chassis every server shares
        // Settings table, log sink, metrics registry, admin listener, router, connection gate,
        // chores, signals: what a relay, a push relay and a signaling server all need, so none
        // copies it from another.
        .target(name: "TetherService", dependencies: ["TetherSync", "TetherEncoding", "TetherNet", "TetherCrypto", "CTetherSystem"], swiftSettings: strict),

        // MARK: Storage
        // The store protocols, their SQLite backend and the executor that keeps storage off the loops.
        .target(name: "TetherStore", dependencies: ["TetherSync", "TetherWire", "TetherCrypto", "CSQLite", "CPostgres", "CTetherSystem", "TetherEncoding"], swiftSettings: strict),
        // The store contract every backend's tests run unchanged (XCTest assertions; test-only).
        .target(name: "TetherStoreContract", dependencies: ["TetherSync", "TetherStore", "TetherWire"], swiftSettings: strict),

        // MARK: Services
        // What every part of the SDK on a device shares: the state directory (owner-only, atomic
        // writes) and the shipping clients' reconnect back-off.
        .target(name: "TetherDevice", dependencies: ["TetherSync", "TetherEncoding", "TetherCrypto"], swiftSettings: strict),
        .target(name: "TetherClient", dependencies: ["TetherSync", "TetherDevice", "TetherEncoding", "TetherNet", "TetherWire", "TetherCrypto", "TetherNoise", "TetherAttest"], swiftSettings: strict),
        .target(name: "TetherRelay", dependencies: ["TetherSync", "TetherService", "TetherNet", "TetherStore", "TetherWire", "TetherCrypto", "TetherAttest", "TetherEncoding"],
                swiftSettings: strict),

        // The push relay (push.md): Profile M and Profile I over one APNs client. A process of its
        // own, so the splice path can never load the APNs key.
        .target(name: "TetherPush", dependencies: ["TetherSync", "TetherService", "TetherNet", "TetherStore", "TetherWire", "TetherCrypto", "CTetherCurl", "TetherEncoding"],
                swiftSettings: strict),

        // The signaling server (signaling.md): signed call setup, presence and TURN credentials,
        // state in memory only.
        .target(name: "TetherSignal", dependencies: ["TetherSync", "TetherService", "TetherStore", "TetherNet", "TetherWire", "TetherCrypto", "TetherEncoding"],
                swiftSettings: strict),
        // The SDK's calls (signaling.md §3, §7, §9-§11): identity, signaling client, the call state
        // machine and the Noise KK secure channel, over any reliable ordered message transport.
        // It keeps keys in the SDK's state directory (TetherDevice: owner-only, atomic writes).
        .target(name: "TetherCall", dependencies: ["TetherSync", "TetherDevice", "TetherEncoding", "TetherNet", "TetherWire", "TetherCrypto", "TetherNoise"], swiftSettings: strict),

        // The WebRTC data channel for Linux (the SDK's media transport): ICE (libnice), DTLS 1.2
        // (OpenSSL), SCTP (usrsctp) and DCEP, and the data-only SDP; the glue only.
        .target(name: "TetherRTC", dependencies: ["TetherSync", "TetherCall", "TetherNet", "TetherWire", "TetherCrypto", "COpenSSL", "CNice", "CTetherNice", "CTetherSCTP", "TetherEncoding"],
                swiftSettings: strict),

        // MARK: Programs
        .executableTarget(name: "tether", dependencies: ["TetherSync", "TetherRelay", "TetherPush", "TetherSignal", "TetherCall", "TetherRTC", "TetherService", "TetherStore", "TetherClient", "TetherAttest", "TetherNet", "TetherWire", "TetherCrypto", "CQRencode", "CTetherSystem", "TetherDevice", "TetherEncoding"],
                          swiftSettings: strict),
        .executableTarget(name: "tether-bench", dependencies: ["TetherCrypto", "TetherWire", "TetherNoise", "CTetherBenchFloor"],
                          swiftSettings: strict),

        .executableTarget(name: "tether-netbench", dependencies: ["TetherNet", "TetherWire", "TetherCrypto", "TetherEncoding"],
                          swiftSettings: strict),
        // The storage-latency scenario: a relay over a deliberately slow store, a reconnect storm
        // of signed joins, and spliced pairs whose RTT must not notice (`make bench-storage`).
        .executableTarget(name: "tether-relaybench", dependencies: ["TetherSync", "TetherRelay", "TetherStore", "TetherClient", "TetherNet", "TetherWire", "TetherCrypto", "TetherEncoding"],
                          swiftSettings: strict),
        // The signaling server's benchmark: forwarding rate and latency, registrations against
        // the Ed25519 verify rate, RSS per idle client (`make bench-signal`).
        .executableTarget(name: "tether-signalbench", dependencies: ["TetherCall", "TetherNet", "TetherWire", "TetherCrypto", "TetherEncoding"],
                          swiftSettings: strict),
        // The WebRTC data channel beside aiortc on loopback: setup time, raw and secure-channel
        // throughput (`make bench-rtc`).
        .executableTarget(name: "tether-rtcbench", dependencies: ["TetherSync", "TetherRTC", "TetherCall", "TetherNet", "TetherWire", "TetherCrypto"],
                          swiftSettings: strict),

        // MARK: Examples (Examples/, each with a README): programs as an app developer writes them,
        // importing the SDK's modules and nothing else of Tether's; `make test` builds them.
        // A bot that answers every call and sends each text back (TetherCall over TetherRTC).
        .executableTarget(name: "example-echo-bot", dependencies: ["TetherCall", "TetherRTC", "TetherDevice", "TetherNet", "TetherWire"],
                          path: "Examples/EchoBot", exclude: ["README.md"], swiftSettings: strict),
        // The computer's side of a pairing, pushing a sealed wake-up through `tether push` (TetherClient).
        .executableTarget(name: "example-computer-side", dependencies: ["TetherClient", "TetherDevice", "TetherNet", "TetherWire"],
                          path: "Examples/ComputerSide", exclude: ["README.md"], swiftSettings: strict),

        // MARK: Test support and tests
        .target(name: "TetherTestSupport", dependencies: ["TetherSync", "TetherCrypto"], swiftSettings: strict),
        .testTarget(name: "TetherSyncTests", dependencies: ["TetherSync"], swiftSettings: strict),
        .testTarget(name: "TetherCryptoTests", dependencies: ["TetherCrypto", "CSodium", "TetherTestSupport"], swiftSettings: strict),
        .testTarget(name: "TetherWireTests", dependencies: ["TetherWire", "TetherCrypto", "TetherTestSupport", "TetherEncoding"], swiftSettings: strict),
        .testTarget(name: "TetherNoiseTests", dependencies: ["TetherNoise", "TetherCrypto", "TetherTestSupport"], swiftSettings: strict),
        .testTarget(name: "TetherNetTests", dependencies: ["TetherNet", "TetherCrypto", "TetherTestSupport", "TetherSync"], swiftSettings: strict),
        .testTarget(name: "TetherClientTests", dependencies: ["TetherClient", "TetherNet", "TetherWire", "TetherCrypto", "TetherAttest", "TetherTestSupport", "TetherDevice", "TetherEncoding"],
                    swiftSettings: strict),
        .testTarget(name: "TetherAttestTests", dependencies: ["TetherAttest", "TetherCrypto", "TetherWire", "TetherTestSupport", "TetherEncoding"], swiftSettings: strict),
        .testTarget(name: "TetherServiceTests", dependencies: ["TetherSync", "TetherService", "TetherNet", "TetherWire", "TetherCrypto", "TetherTestSupport", "TetherEncoding"], swiftSettings: strict),
        .testTarget(name: "TetherRelayTests", dependencies: ["TetherSync", "TetherRelay", "TetherAttest", "TetherService", "TetherStore", "CSQLite", "TetherNet", "TetherWire", "TetherCrypto", "TetherTestSupport", "TetherEncoding"], swiftSettings: strict),
        .testTarget(name: "TetherPushTests", dependencies: ["TetherSync", "TetherPush", "TetherClient", "TetherService", "TetherStore", "TetherNet", "TetherWire", "TetherCrypto", "TetherTestSupport", "TetherEncoding"],
                    swiftSettings: strict),
        .testTarget(name: "TetherSignalTests", dependencies: ["TetherSync", "TetherSignal", "TetherStore", "TetherCall", "TetherRTC", "TetherService", "TetherNet", "TetherWire", "TetherCrypto", "TetherTestSupport", "TetherEncoding"],
                    swiftSettings: strict),
        .testTarget(name: "TetherCallTests", dependencies: ["TetherSync", "TetherCall", "TetherNoise", "TetherNet", "TetherWire", "TetherCrypto", "TetherTestSupport", "TetherDevice", "TetherEncoding"],
                    swiftSettings: strict),
        .testTarget(name: "TetherRTCTests", dependencies: ["TetherSync", "CTetherSCTP", "TetherRTC", "TetherCall", "TetherNet", "TetherWire", "TetherCrypto", "TetherTestSupport", "TetherEncoding"],
                    swiftSettings: strict),
        .testTarget(name: "TetherStoreTests", dependencies: ["TetherStore", "TetherStoreContract", "TetherWire", "TetherCrypto", "CSQLite", "TetherTestSupport"], swiftSettings: strict),
        .testTarget(name: "CTetherSystemTests", dependencies: ["CTetherSystem", "CSQLite"], swiftSettings: strict),
        // The examples run as their READMEs say, against the real `tether` binary.
        .testTarget(name: "ExampleTests", dependencies: ["TetherTestSupport"], swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)

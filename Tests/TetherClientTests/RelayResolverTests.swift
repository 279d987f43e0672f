import Foundation
@testable import TetherClient
import TetherNet
import TetherTestSupport
import TetherWire
import XCTest
import TetherDevice

/// v2 resolution (client.md §5) against a real relay serving `/shardmap.json`.
final class RelayResolverTests: XCTestCase {
    private final class Floors: @unchecked Sendable {
        private let lock = NSLock()
        var values: [String: Int] = [:]
        var floor: RelayResolver.VersionFloor {
            RelayResolver.VersionFloor(load: { url in self.lock.withLock { self.values[url] } },
                                       store: { url, version in self.lock.withLock { self.values[url] = version } })
        }
    }

    func testTheOwnerOfTheBucketIsTheOriginAndTheVersionFloorRefusesARollback() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-resolver-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let mapFile = directory.appendingPathComponent("map.json")
        // Buckets 0…49999 on another host, the rest on this relay.
        let port = RelayProcess.freePort()   // known before start: the shard map names the relay by it
        try Data(#"{"version":5,"ranges":[{"low":0,"high":49999,"host":"relay-a.example"},{"low":50000,"high":65535,"host":"127.0.0.1:\#(port)"}]}"#.utf8)
            .write(to: mapFile)
        let relay = try RelayProcess(port: port, ["--relay-shard-map", mapFile.path])
        defer { relay.stop() }
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let resolverURL = "http://127.0.0.1:\(port)/shardmap.json"
        let floors = Floors()
        let resolver = RelayResolver(transport: .resolved(resolverURL: resolverURL), loop: group.loops[0], versionFloor: floors.floor)

        // client.md §4 vectors: bucket 57888 and 48136.
        let high = RoomName(responderStaticKey: [UInt8](repeating: 0xAB, count: 32), pairingID: "0123456789abcdef")
        let low = RoomName(responderStaticKey: [UInt8](repeating: 0xFF, count: 32), pairingID: "z")
        XCTAssertEqual(high.bucket, 57888)
        XCTAssertEqual(low.bucket, 48136)
        let origin = try await resolver.origin(for: high)
        XCTAssertEqual(origin, "http://127.0.0.1:\(port)", "a loopback owner of a loopback http resolver is reached over http")
        let other = try await resolver.origin(for: low)
        XCTAssertEqual(other, "https://relay-a.example")
        XCTAssertEqual(floors.values, [resolverURL: 5], "the adopted version is the new floor")

        // A cold start that has seen version 7 refuses the version 5 map.
        floors.values[resolverURL] = 7
        let cold = RelayResolver(transport: .resolved(resolverURL: resolverURL), loop: group.loops[0], versionFloor: floors.floor)
        do {
            _ = try await cold.origin(for: high)
            XCTFail("a rolled-back map was adopted")
        } catch {
            XCTAssertEqual(error, .staleMap(version: 5, floor: 7))
        }
        // v1 needs no map; a v1 link without relay= has no transport.
        let direct = try await RelayResolver(transport: .direct(relayOrigin: "https://r.example"), loop: group.loops[0]).origin(for: high)
        XCTAssertEqual(direct, "https://r.example")
        do {
            _ = try await RelayResolver(transport: .direct(relayOrigin: nil), loop: group.loops[0]).origin(for: high)
            XCTFail("no transport")
        } catch {
            XCTAssertEqual(error, .noTransport)
            XCTAssertEqual(error.description, "the pairing link names no relay (neither a relay origin nor a resolver): make a new link with `tether mac --relay https://HOST`")
        }
    }

    /// `resolver_standin.py`: one map, every request recorded.
    private final class StandIn {
        let process: PythonProcess
        let port: UInt16
        private let group: EventLoopGroup

        /// With `holdFrom`, map requests from that one on (1-based) wait for `release()`.
        init(map: String, holdFrom: Int? = nil) throws {
            process = try PythonProcess(script: "resolver_standin.py", arguments: [map] + (holdFrom.map { [String($0)] } ?? []), timeout: 120)
            let line = process.output.fileHandleForReading.readFirstLine()
            guard line.hasPrefix("port "), let port = UInt16(line.dropFirst(5).trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw Vectors.Failure.notFound("resolver stand-in: \(line)")
            }
            self.port = port
            group = try EventLoopGroup(count: 1)
        }

        deinit {
            process.process.terminate()
            group.shutdown()
        }

        func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

        private func call(_ method: String, _ path: String, body: [UInt8] = []) async throws -> [UInt8] {
            let result: Result<HTTPClient.Response, NetError> = await withCheckedContinuation { continuation in
                HTTPClient.request(method, url(path), body: method == "POST" ? body : nil, on: group.loops[0]) { continuation.resume(returning: $0) }
            }
            return try result.get().body
        }

        /// Every request the client sent so far: method, target, headers.
        func requests() async throws -> [(target: String, headers: [String: String])] {
            let body = try await call("GET", "/_log")
            let entries = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(body)) as? [[String: Any]])
            return entries.map { entry in
                let pairs = (entry["headers"] as? [[String]]) ?? []
                return ((entry["target"] as? String) ?? "", Dictionary(pairs.map { ($0[0].lowercased(), $0[1]) }) { $0 + ", " + $1 })
            }
        }

        /// Returns once `count` requests have arrived (a test failure after 5 s).
        func waitFor(requests count: Int, file: StaticString = #filePath, line: UInt = #line) async throws {
            try await eventually("\(count) requests at the stand-in", within: 5, file: file, line: line) { try await requests().count >= count }
        }

        func hold() async throws { _ = try await call("POST", "/_hold") }
        func serve(map: String) async throws { _ = try await call("POST", "/_map", body: Array(map.utf8)) }
        func release() async throws { _ = try await call("POST", "/_release") }
    }

    private static let map = #"{"version":3,"ranges":[{"low":0,"high":65535,"host":"relay-a.example"}]}"#
    private static let room = RoomName(responderStaticKey: [UInt8](repeating: 0xAB, count: 32), pairingID: "0123456789abcdef")

    /// relay.md §8.2: the resolver URL is fetched as it is (path and query, nothing appended),
    /// with no `User-Agent`, `x-relay-room` or `Origin`; a redirect is not followed but fails as
    /// a non-2xx answer, a 404 fails, and a resolver that never answers fails after 15 s.
    func testTheMapIsFetchedVerbatimWithoutRedirectsOrIdentifyingHeaders() async throws {
        let standIn = try StandIn(map: Self.map)
        let clock = ManualClock()
        let group = try EventLoopGroup(count: 1, clock: clock)
        defer { group.shutdown() }
        let loop = group.loops[0]
        func resolver(_ path: String) -> RelayResolver { RelayResolver(transport: .resolved(resolverURL: standIn.url(path)), loop: loop) }

        let origin = try await resolver("/v2/shardmap.json?tenant=a&x=%2F").origin(for: Self.room)
        XCTAssertEqual(origin, "https://relay-a.example")
        var requests = try await standIn.requests()
        XCTAssertEqual(requests.map(\.target), ["/v2/shardmap.json?tenant=a&x=%2F"], "the URL verbatim, nothing appended")
        let headers = try XCTUnwrap(requests.first?.headers)
        XCTAssertEqual(headers["host"], "127.0.0.1:\(standIn.port)")
        for name in ["user-agent", "x-relay-room", "origin"] { XCTAssertNil(headers[name], "\(name) sent: \(headers)") }

        do {
            _ = try await resolver("/moved").origin(for: Self.room)
            XCTFail("a redirect was followed")
        } catch { XCTAssertEqual(error, .resolverRefused(status: 302)) }
        do {
            _ = try await resolver("/gone").origin(for: Self.room)
            XCTFail("a 404 gave a map")
        } catch { XCTAssertEqual(error, .resolverRefused(status: 404)) }
        requests = try await standIn.requests()
        XCTAssertEqual(requests.map(\.target), ["/v2/shardmap.json?tenant=a&x=%2F", "/moved", "/gone"], "the 302's Location was not fetched")

        // A resolver that never answers: the loop's clock is moved by hand past 15 s.
        let outcome = Outcome()
        let silent = resolver("/silent")
        async let resolved: Void = Self.resolve(silent, into: outcome)
        try await standIn.waitFor(requests: 4)
        let last = try await standIn.requests().last?.target
        XCTAssertEqual(last, "/silent")
        func advance(_ ms: UInt64) async {
            clock.advance(by: .milliseconds(ms))
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in loop.execute { loop.runTimers(); done.resume() } }
        }
        await advance(14_900)
        try await Task.sleep(nanoseconds: 100_000_000)   // must be a sleep: time for a wrong early give-up to show
        XCTAssertFalse(outcome.done, "still waiting at 14.9 s")
        await advance(200)
        await resolved
        XCTAssertEqual(outcome.error, .resolverUnreachable("\(NetError.timedOut)"), "given up at 15 s")
    }

    /// relay.md §8.2: with a map cached, `origin(for:)` answers from the cache at once (even
    /// while the resolver is slow) and fetches a newer map behind it; `forceFresh` fetches
    /// first.
    func testACachedMapAnswersAtOnceAndRefreshesBehindWhileForceFreshFetchesFirst() async throws {
        let standIn = try StandIn(map: Self.map)
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let resolver = RelayResolver(transport: .resolved(resolverURL: standIn.url("/map.json")), loop: group.loops[0])
        let cold = try await resolver.origin(for: Self.room)
        XCTAssertEqual(cold, "https://relay-a.example")
        var count = try await standIn.requests().count
        XCTAssertEqual(count, 1)

        try await standIn.hold()
        let started = Date()
        let cached = try await resolver.origin(for: Self.room)
        XCTAssertEqual(cached, "https://relay-a.example")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1, "answered from the cache, not after the held fetch")
        try await standIn.waitFor(requests: 2)
        count = try await standIn.requests().count
        XCTAssertEqual(count, 2, "the background refresh")
        try await standIn.release()

        let forced = try await resolver.origin(for: Self.room, forceFresh: true)
        XCTAssertEqual(forced, "https://relay-a.example")
        let targets = try await standIn.requests().map(\.target)
        XCTAssertEqual(targets, ["/map.json", "/map.json", "/map.json"], "forceFresh fetched")
    }

    /// A client waiting out its back-off on a v2 link watches the map: when a failover publishes
    /// a new owner for its room, it returns within about a second to reconnect there, instead of
    /// at the end of a back-off of 16 s or more; a map that does not change lets the wait run out.
    func testAWaitingClientReturnsAsSoonAsTheMapNamesANewOwner() async throws {
        let standIn = try StandIn(map: Self.map)
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-map-watch-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let context = EndpointContext(loop: group.loops[0], state: try StateDirectory(directory)) { _ in }
        let resolver = RelayResolver(transport: .resolved(resolverURL: standIn.url("/map.json")), loop: group.loops[0])
        _ = try await resolver.origin(for: Self.room)

        var started = Date()
        await context.pause(.milliseconds(2_500), watching: resolver, Self.room)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 2.4, "the same owner: the whole wait")

        let failover = Task {
            try await Task.sleep(nanoseconds: 2_000_000_000)   // must be a sleep: the map changes 2 s into the wait under test
            try await standIn.serve(map: #"{"version":4,"ranges":[{"low":0,"high":65535,"host":"relay-b.example"}]}"#)
        }
        started = Date()
        await context.pause(.seconds(60), watching: resolver, Self.room)
        let waited = Date().timeIntervalSince(started)
        try await failover.value
        XCTAssertGreaterThanOrEqual(waited, 2)
        XCTAssertLessThan(waited, 4, "back within about a second of the new map")
        let owner = try await resolver.origin(for: Self.room)
        XCTAssertEqual(owner, "https://relay-b.example")
    }

    private final class Events: @unchecked Sendable {
        private let lock = NSLock()
        private var events: [EndpointEvent] = []
        func add(_ event: EndpointEvent) { lock.withLock { events.append(event) } }
        var disconnects: Int { lock.withLock { events.filter { if case .disconnected = $0 { true } else { false } }.count } }
    }

    /// relay.md §8.2: before each reconnect attempt the phone fetches the map afresh and waits
    /// for it: while the resolver holds that second fetch, no attempt is made (a background
    /// refresh would not hold it back). The map's owner is a loopback port nobody listens on, so every
    /// attempt fails at once as a transient error.
    func testAPhoneFetchesTheMapAfreshBeforeEachReconnectAttempt() async throws {
        let closed = RefusingPort()
        let standIn = try StandIn(map: #"{"version":1,"ranges":[{"low":0,"high":65535,"host":"127.0.0.1:\#(closed.port)"}]}"#, holdFrom: 2)
        defer { withExtendedLifetime(closed) {} }   // refusing until the test ends
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-resolver-phone-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let state = try StateDirectory(directory)
        try state.storePhonePairing(try PairingLink(transport: .resolved(resolverURL: standIn.url("/map.json")),
                                                    responderStaticKey: [UInt8](repeating: 0xAB, count: 32), pairingID: "reconnect",
                                                    allowLoopbackHTTP: true))
        try state.storeRoomSecret(RoomSecret.generate())
        let events = Events()
        let phone = PhoneEndpoint(context: EndpointContext(loop: group.loops[0], state: state) { events.add($0) })
        let running = Task { try? await phone.run() }
        defer { running.cancel() }

        try await standIn.waitFor(requests: 1)
        await eventually("the first attempt failed", within: 5) { events.disconnects >= 1 }
        XCTAssertEqual(events.disconnects, 1, "the first attempt failed")
        try await standIn.waitFor(requests: 2)   // the retry's fetch, within the 3 s backoff bound
        let count = try await standIn.requests().count
        XCTAssertEqual(count, 2, "the reconnect fetched the map")
        try await Task.sleep(nanoseconds: 500_000_000)   // must be a sleep: "no attempt for 0.5 s" is the check
        XCTAssertEqual(events.disconnects, 1, "no attempt while the fresh map is awaited")
        try await standIn.release()
        await eventually("the attempt followed the fetch", within: 5) { events.disconnects >= 2 }
        XCTAssertEqual(events.disconnects, 2, "the attempt followed the fetch")
    }

    private static func resolve(_ resolver: RelayResolver, into outcome: Outcome) async {
        do {
            _ = try await resolver.origin(for: room)
            outcome.set(nil)
        } catch { outcome.set(error) }
    }

    private final class Outcome: @unchecked Sendable {
        private let lock = NSLock()
        private var value: ResolveError??
        func set(_ error: ResolveError?) { lock.withLock { value = .some(error) } }
        var done: Bool { lock.withLock { value != nil } }
        var error: ResolveError? { lock.withLock { value ?? nil } }
    }
}

@testable import TetherRelay
import TetherNet
import TetherStore
import TetherWire
import TetherSync
import XCTest

/// relay.md §8.4 with leases (Tether definition): a survivor never answers 421 naming a node whose
/// lease lapsed — clients would re-resolve to the dead node and back off — but 503 `owner
/// unavailable` with `Retry-After: 1`, until the failover round moves the room.
final class LapsedOwnerTests: XCTestCase {
    private let high = RoomName(header: String(repeating: "0", count: 60) + "ff00")!    // bucket 65280

    func testARoomOfALapsedOwnerIsAnswered503NotA421NamingTheDeadNode() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        var configuration = RelayConfiguration()
        configuration.origin = "https://a.example"
        let server = RelayServer(configuration: configuration, group: group, store: InMemoryRoomStore()) { _ in }
        XCTAssertTrue(server.sharding.adopt(try ShardMap(version: 2, ranges: [.init(low: 0, high: 32767, host: "a.example"),
                                                                           .init(low: 32768, high: 65535, host: "b.example")])))
        XCTAssertEqual(server.route(high, ingress: .client).refusal?.status, 421, "no leases: every owner counts as reachable")
        XCTAssertEqual(server.route(high, ingress: .client).refusal?.headers["x-relay-owner"], "b.example")

        server.sharding.setLiveHosts(["a.example", "b.example"], at: server.clock.monotonic())
        XCTAssertEqual(server.route(high, ingress: .client).refusal?.status, 421)

        server.sharding.setLiveHosts(["a.example"], at: server.clock.monotonic() - .seconds(4))
        XCTAssertEqual(server.route(high, ingress: .client).refusal?.status, 421, "a stale list of live hosts shows nobody lapsed")

        server.sharding.setLiveHosts(["a.example"], at: server.clock.monotonic())
        let refused = try XCTUnwrap(server.route(high, ingress: .client).refusal)
        XCTAssertEqual(refused.status, 503)
        XCTAssertEqual(refused.body, Array("owner unavailable".utf8))
        XCTAssertEqual(refused.headers["Retry-After"], "1")
        XCTAssertNil(refused.headers["x-relay-owner"], "the dead node is never named")
    }

    /// Self-fencing: a node whose last successful renewal began a whole TTL ago (a paused process,
    /// a VM that stood still) may have lost its buckets already; it admits nothing — not even a
    /// room its old map gives it — until a renewal succeeds again.
    func testANodeWhoseOwnLeaseMayHaveLapsedAdmitsNoRoomUntilItRenews() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        var configuration = RelayConfiguration()
        configuration.origin = "https://a.example"
        let server = RelayServer(configuration: configuration, group: group, store: InMemoryRoomStore()) { _ in }
        let own = RoomName(header: String(repeating: "0", count: 64))!
        XCTAssertNil(server.route(own, ingress: .client).refusal, "no leases: never fenced")
        server.leaseSurelyLiveUntil.store((server.clock.monotonic() + .seconds(1)).nanoseconds, ordering: .relaxed)
        XCTAssertNil(server.route(own, ingress: .client).refusal)
        server.leaseSurelyLiveUntil.store((server.clock.monotonic() - .milliseconds(1)).nanoseconds, ordering: .relaxed)
        XCTAssertEqual(server.route(own, ingress: .client).refusal?.status, 503)
        XCTAssertEqual(server.route(high, ingress: .client).refusal?.status, 503)
    }

    /// A v1 cluster: a room another live node owns is passed on, not refused; one another node
    /// passed here is never passed again; the cluster fields are believed only with the secret.
    func testAV1ClusterPassesForeignRoomsOnOnceAndBelievesOnlyItsOwnSecret() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        var configuration = RelayConfiguration()
        configuration.origin = "https://relay.example"
        let secret = String(repeating: "k", count: 40)
        configuration.cluster = RelayClusterSettings(node: "10.0.0.1:8788", secret: Array(secret.utf8))
        let server = RelayServer(configuration: configuration, group: group, store: InMemoryRoomStore()) { _ in }
        XCTAssertTrue(server.sharding.adopt(try ShardMap(version: 2, ranges: [.init(low: 0, high: 32767, host: "10.0.0.1:8788"),
                                                                           .init(low: 32768, high: 65535, host: "10.0.0.2:8788")])))
        guard case let .forward(owner) = server.route(high, ingress: .client) else { return XCTFail("passed on") }
        XCTAssertEqual(owner, "10.0.0.2:8788")
        XCTAssertEqual(server.route(high, ingress: .node(clientIP: "192.0.2.1")).refusal?.status, 503, "never passed twice")
        XCTAssertEqual(server.route(RoomName(header: String(repeating: "0", count: 64))!, ingress: .node(clientIP: "192.0.2.1")).refusal, nil)

        var head = HTTPRequestHead(method: "GET", target: "/")
        head.headers.add(RelayServer.clusterClientField, "198.51.100.7")      // a client posing as a node
        head.headers.add(RelayServer.clusterSecretField, "guess")
        XCTAssertNil(server.nodeIngress(head), "a wrong secret")
        let passed = server.passedHead(head, clientIP: "192.0.2.1", keepingHopByHop: true)
        XCTAssertEqual(passed.headers.values(RelayServer.clusterClientField), ["192.0.2.1"], "the client's own copy is dropped")
        XCTAssertEqual(server.nodeIngress(passed), .node(clientIP: "192.0.2.1"))
        var twice = passed
        twice.headers.add(RelayServer.clusterSecretField, secret)
        XCTAssertNil(server.nodeIngress(twice), "exactly one secret")
        var long = head
        long.headers.remove(RelayServer.clusterSecretField)
        long.headers.remove(RelayServer.clusterClientField)
        long.headers.add(RelayServer.clusterSecretField, secret)
        long.headers.add(RelayServer.clusterClientField, String(repeating: "1", count: 65))
        XCTAssertNil(server.nodeIngress(long), "a client key is an address, not a payload")
        XCTAssertEqual(RelayServer.nodeAddress("[::1]:8788")?.host, "::1")
        XCTAssertEqual(RelayServer.nodeAddress("10.0.0.2:8788")?.port, 8788)
    }
}

import Dispatch
import Synchronization
import TetherNet
import TetherService
import TetherSync
import XCTest

final class ConnectionGateTests: XCTestCase {
    private let clock = ManualClock()
    private let second = Duration.seconds(1)

    private func gate(_ configure: (inout ConnectionGate.Limits) -> Void, clientIP: ClientIPResolver = ClientIPResolver()) -> ConnectionGate {
        var limits = ConnectionGate.Limits()
        configure(&limits)
        return ConnectionGate(clientIP: clientIP, limits: limits, clock: clock)
    }

    private func reason(_ result: Result<SocketLease, GateRefusal>) -> String {
        switch result {
        case .success: "admitted"
        case let .failure(refusal): refusal.reason
        }
    }

    func testTheSocketRateLimitCountsEveryAttemptAndItsWindowRunsOnTheMonotonicClock() {
        let gate = gate {
            $0.socketRate = .init(limit: 2, window: .seconds(60))
            $0.socketRateRefusal = .text(429, "slow down")
        }
        var leases: [SocketLease] = []
        for _ in 0..<2 { leases.append(try! gate.admitSocket(ip: "a").get()) }
        guard case let .failure(refusal) = gate.admitSocket(ip: "a") else { return XCTFail("the third is over the limit") }
        XCTAssertEqual(refusal, GateRefusal(reason: "rate_limited", response: .text(429, "slow down")))
        XCTAssertEqual(reason(gate.admitSocket(ip: "b")), "admitted", "addresses are independent")
        clock.advance(by: second * 60)
        XCTAssertEqual(reason(gate.admitSocket(ip: "a")), "rate_limited", "exactly one window later is the same window")
        clock.advance(by: .milliseconds(1))
        XCTAssertEqual(reason(gate.admitSocket(ip: "a")), "admitted")
    }

    func testThePerIPCapHoldsUntilASocketIsReleased() throws {
        let gate = gate { $0.maxSocketsPerIP = 2 }
        let first = try gate.admitSocket(ip: "a").get()
        let second = try gate.admitSocket(ip: "a").get()
        guard case let .failure(refusal) = gate.admitSocket(ip: "a") else { return XCTFail() }
        XCTAssertEqual(refusal, GateRefusal(reason: "ip_cap", response: .text(429, "too many connections")))
        XCTAssertEqual(reason(gate.admitSocket(ip: "b")), "admitted")
        first.release()
        first.release()
        XCTAssertEqual(gate.openSockets(for: "a"), 1, "released once however often it is called")
        XCTAssertEqual(reason(gate.admitSocket(ip: "a")), "admitted")
        _ = second
    }

    func testConnectionsStillSendingTheirHeadsAreCappedPerAddressApartFromItsSockets() throws {
        let gate = gate { $0.maxSocketsPerIP = 2 }
        let a = try SocketAddress(host: "192.0.2.1", port: 40_000), a2 = try SocketAddress(host: "192.0.2.1", port: 40_001)
        let b = try SocketAddress(host: "192.0.2.2", port: 40_000)
        XCTAssertNil(gate.admitConnection(peer: a))
        XCTAssertNil(gate.admitConnection(peer: a2), "counted by address, not by port")
        XCTAssertEqual(gate.admitConnection(peer: a), GateRefusal(reason: "ip_cap", response: .text(429, "too many connections")))
        XCTAssertNil(gate.admitConnection(peer: b), "addresses are independent")
        // At its socket cap an address's next head is still read: some refusals come before the cap's.
        let sockets = try (0..<2).map { _ in try gate.admitSocket(ip: "192.0.2.2").get() }
        XCTAssertNil(gate.admitConnection(peer: b))
        XCTAssertEqual(gate.openConnections(from: b), 2)
        gate.connectionLeft(peer: a)
        XCTAssertEqual(gate.openConnections(from: a), 1)
        XCTAssertNil(gate.admitConnection(peer: a), "a place came back")
        _ = sockets
    }

    /// relay.md §2.3: the upgrade rate limit counts every upgrade that passes the gate, those the
    /// per-IP cap refuses included. A connection refused at accept is such an upgrade to its
    /// client, so it counts too, and once the window's budget is spent it is answered `rate limited`.
    func testConnectionsRefusedAtAcceptSpendTheAddresssUpgradeBudget() throws {
        let gate = gate {
            $0.socketRate = .init(limit: 3, window: .seconds(60))
            $0.maxSocketsPerIP = 1
        }
        let a = try SocketAddress(host: "192.0.2.1", port: 40_000)
        XCTAssertNil(gate.admitConnection(peer: a))
        let socket = try gate.admitSocket(ip: "192.0.2.1").get()
        gate.connectionLeft(peer: a)
        XCTAssertNil(gate.admitConnection(peer: a))
        XCTAssertEqual(gate.admitConnection(peer: a)?.reason, "ip_cap", "the second attempt of the window, refused at accept")
        XCTAssertEqual(reason(gate.admitSocket(ip: "192.0.2.1")), "ip_cap", "the third, refused after its head")
        XCTAssertEqual(gate.admitConnection(peer: a), GateRefusal(reason: "rate_limited", response: .text(429, "rate limited")))
        socket.release()
        gate.connectionLeft(peer: a)
        XCTAssertEqual(reason(gate.admitSocket(ip: "192.0.2.1")), "rate_limited", "the budget stays spent after the places come back")
        clock.advance(by: second * 61)
        XCTAssertEqual(reason(gate.admitSocket(ip: "192.0.2.1")), "admitted")
    }

    /// signaling.md §13.1 checks capacity and the per-IP cap before the rate, and counts only
    /// what reaches the rate check: a connection refused at accept at the per-IP cap spends nothing.
    func testConnectionsRefusedAtAcceptBeforeTheRateCheckSpendNothing() throws {
        let gate = gate {
            $0.socketCheckOrder = [.total, .perIP, .rate]
            $0.socketRate = .init(limit: 1, window: .seconds(60))
            $0.maxSocketsPerIP = 1
        }
        let a = try SocketAddress(host: "192.0.2.1", port: 40_000)
        XCTAssertNil(gate.admitConnection(peer: a))
        for _ in 0..<5 { XCTAssertEqual(gate.admitConnection(peer: a)?.reason, "ip_cap") }
        gate.connectionLeft(peer: a)
        XCTAssertEqual(reason(gate.admitSocket(ip: "192.0.2.1")), "admitted")
    }

    func testBehindATrustedProxyConnectionsAreNotCountedBeforeTheirHeads() throws {
        let gate = gate({ $0.maxSocketsPerIP = 1 }, clientIP: ClientIPResolver(trustProxy: true))
        let proxy = try SocketAddress(host: "127.0.0.1", port: 40_000)
        for _ in 0..<5 { XCTAssertNil(gate.admitConnection(peer: proxy), "the proxy carries every client") }
        XCTAssertEqual(gate.openConnections(from: proxy), 0)
    }

    func testTheTotalCapAndThenTheServicesOwnCheckComeAfterTheRateLimit() throws {
        let gate = gate {
            $0.socketRate = .init(limit: 2)
            $0.maxTotalSockets = 1
        }
        let held = try gate.admitSocket(ip: "a").get()
        XCTAssertEqual(reason(gate.admitSocket(ip: "b")), "total_cap")
        held.release()
        let roomCap = GateRefusal(reason: "room_cap", response: .text(503, "capacity"))
        let checked = Atomic(0)
        XCTAssertEqual(reason(gate.admitSocket(ip: "a") { checked.add(1, ordering: .relaxed); return roomCap }), "room_cap")
        XCTAssertEqual(gate.openSockets, 0, "a refused socket takes no place")
        XCTAssertEqual(reason(gate.admitSocket(ip: "a") { checked.add(1, ordering: .relaxed); return nil }), "rate_limited",
                       "the refused attempts counted toward the rate")
        XCTAssertEqual(checked.load(ordering: .relaxed), 1, "the service check runs only once the gate's own checks pass")
    }

    func testAForgottenLeaseGivesItsPlaceBackWhenFreed() throws {
        let gate = gate { $0.maxTotalSockets = 1 }
        do {
            let lease = try gate.admitSocket(ip: "a").get()
            XCTAssertEqual(lease.ip, "a")
            XCTAssertEqual(gate.openSockets, 1)
        }
        XCTAssertEqual(gate.openSockets, 0)
        XCTAssertEqual(gate.addressesWithSockets, 0)
    }

    func testLeasesCarryTheirArrivalOrder() throws {
        let gate = gate { _ in }
        let arrivals = try (0..<3).map { try gate.admitSocket(ip: "ip\($0)").get() }.map(\.arrival)
        XCTAssertEqual(arrivals, [1, 2, 3])
    }

    func testNamedRequestLimitersAreIndependentAndAnswerAsTheServiceSays() {
        let gate = gate {
            $0.requestLimits["attest"] = .init(.init(limit: 1), refusal: .text(429, "rate limited"))
            $0.requestLimits["register"] = .init(.off)
            $0.socketRate = .init(limit: 1)
        }
        XCTAssertNil(gate.admitRequest("attest", ip: "a"))
        XCTAssertEqual(gate.admitRequest("attest", ip: "a"), GateRefusal(reason: "attest", response: .text(429, "rate limited")))
        XCTAssertNil(gate.admitRequest("attest", ip: "b"))
        XCTAssertTrue((0..<100).allSatisfy { _ in gate.admitRequest("register", ip: "a") == nil }, "0 is off")
        XCTAssertEqual(reason(gate.admitSocket(ip: "a")), "admitted", "requests do not count against sockets")
    }

    func testTheClientIPIsDerivedAsFarAsTheProxiesAreTrusted() throws {
        let peer = try SocketAddress(host: "127.0.0.1", port: 9)
        let headers = HTTPHeaders([("CF-Connecting-IP", "1.1.1.1"), ("X-Forwarded-For", "6.6.6.6, 2.2.2.2")])
        let head = HTTPRequestHead(method: "GET", target: "/", headers: headers)
        XCTAssertEqual(gate { _ in }.clientIP(head, peer: peer), "127.0.0.1")
        XCTAssertEqual(gate({ _ in }, clientIP: ClientIPResolver(trustProxy: true)).clientIP(head, peer: peer), "2.2.2.2")
        XCTAssertEqual(gate({ _ in }, clientIP: ClientIPResolver(trustCloudflare: true)).clientIP(head, peer: peer), "1.1.1.1")
        XCTAssertEqual(gate { _ in }.clientIP(HTTPRequestHead(method: "GET", target: "/"), peer: nil), "unknown")
    }

    func testAdmissionsFromEveryLoopAtOnceNeverOvershootTheCaps() {
        let gate = gate {
            $0.maxTotalSockets = 100
            $0.maxSocketsPerIP = 30
        }
        let leases = Locked<[SocketLease]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for _ in 0..<50 {
                if case let .success(lease) = gate.admitSocket(ip: "ip\(thread % 4)") { leases.withLock { $0.append(lease) } }
            }
        }
        XCTAssertEqual(leases.withLock { $0.count }, 100)
        XCTAssertEqual(gate.openSockets, 100)
        for ip in 0..<4 { XCTAssertLessThanOrEqual(gate.openSockets(for: "ip\(ip)"), 30) }
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            while let lease = leases.withLock({ $0.popLast() }) { lease.release() }
        }
        XCTAssertEqual(gate.openSockets, 0)
        XCTAssertEqual(gate.addressesWithSockets, 0)
    }
    func testEachRefusalIsReportedWithWhatWasRefusedAndWhyButNotWho() {
        let reported = Locked<[String]>([])
        var limits = ConnectionGate.Limits()
        limits.maxSocketsPerIP = 1
        limits.requestLimits["attest"] = .init(.init(limit: 1))
        let gate = ConnectionGate(limits: limits, clock: clock) { what, refusal in reported.withLock { $0.append("\(what) \(refusal.reason) \(refusal.response.status)") } }
        let lease = try? gate.admitSocket(ip: "192.0.2.7").get()
        _ = gate.admitSocket(ip: "192.0.2.7")
        XCTAssertNil(gate.admitRequest("attest", ip: "192.0.2.7"))
        _ = gate.admitRequest("attest", ip: "192.0.2.7")
        XCTAssertEqual(reported.withLock { $0 }, ["upgrade ip_cap 429", "request attest 429"])
        XCTAssertFalse(reported.withLock { $0 }.joined().contains("192.0.2.7"))
        lease?.release()
    }
}

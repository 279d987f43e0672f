import TetherService
import TetherSync
import XCTest

final class FixedWindowLimiterTests: XCTestCase {
    private let second = Duration.seconds(1)
    private let t0 = MonotonicInstant.zero

    func testTheHitAfterTheLimitIsRefusedAndRefusedHitsStillCount() {
        var limiter = FixedWindowLimiter<String>(limit: 3, window: second * 60)
        XCTAssertEqual((0..<5).map { _ in limiter.hit("ip", now: t0) }, [true, true, true, false, false])
        XCTAssertTrue(limiter.hit("other", now: t0), "keys are independent")
    }

    func testWindowRestartsOnlyWhenStrictlyMoreThanTheWindowHasPassed() {
        var limiter = FixedWindowLimiter<String>(limit: 1, window: second * 60)
        XCTAssertTrue(limiter.hit("ip", now: t0 + second * 10))
        XCTAssertFalse(limiter.hit("ip", now: t0 + second * 70), "exactly one window later is still the same window")
        XCTAssertTrue(limiter.hit("ip", now: t0 + second * 70 + .nanoseconds(1)))
        XCTAssertFalse(limiter.hit("ip", now: t0 + second * 70 + .nanoseconds(2)))
    }

    /// relay.md §2.5: each limiter map holds at most 50,000 keys, by default and in the gate.
    func testTheDefaultKeyCapIsFiftyThousand() {
        XCTAssertEqual(FixedWindowLimiter<String>(limit: 30, window: second * 60).maxKeys, 50_000)
        XCTAssertEqual(ConnectionGate.Limits().maxTrackedIPs, 50_000)
    }

    func testZeroLimitIsOff() {
        var limiter = FixedWindowLimiter<String>(limit: 0, window: second)
        XCTAssertTrue((0..<1000).allSatisfy { _ in limiter.hit("ip", now: t0) })
        XCTAssertEqual(limiter.keyCount, 0)
    }

    func testAtCapacityExpiredWindowsGoFirstThenTheOldestInserted() {
        var limiter = FixedWindowLimiter<Int>(limit: 1, window: second * 10, maxKeys: 3)
        XCTAssertTrue(limiter.hit(1, now: t0))
        XCTAssertTrue(limiter.hit(2, now: t0 + second * 5))
        XCTAssertTrue(limiter.hit(3, now: t0 + second * 6))
        // At t = 12 s key 1's window has expired: it is swept, the others stay.
        XCTAssertTrue(limiter.hit(4, now: t0 + second * 12))
        XCTAssertEqual(limiter.keyCount, 3)
        XCTAssertFalse(limiter.hit(2, now: t0 + second * 12), "key 2 kept its count")
        // Nothing expired at t = 13 s: the oldest inserted (2) is evicted and briefly fails open.
        XCTAssertTrue(limiter.hit(5, now: t0 + second * 13))
        XCTAssertEqual(limiter.keyCount, 3)
        XCTAssertTrue(limiter.hit(2, now: t0 + second * 13), "evicted, so it starts over")
    }

    func testMemoryStaysBoundedUnderManyDistinctKeys() {
        var limiter = FixedWindowLimiter<Int>(limit: 5, window: second, maxKeys: 1000)
        for key in 0..<100_000 { _ = limiter.hit(key, now: t0 + .nanoseconds(key)) }
        XCTAssertLessThanOrEqual(limiter.keyCount, 1000)
    }
}

final class ClientIPResolverTests: XCTestCase {
    func testWithoutTrustFlagsForwardedHeadersAreIgnored() {
        let resolver = ClientIPResolver()
        XCTAssertEqual(resolver.clientIP(cfConnectingIP: "1.1.1.1", forwardedFor: "2.2.2.2", peer: "127.0.0.1"), "127.0.0.1")
        XCTAssertEqual(resolver.clientIP(cfConnectingIP: nil, forwardedFor: nil, peer: nil), "unknown")
        XCTAssertTrue(resolver.shouldWarnBehindProxy(boundToLoopback: true))
        XCTAssertFalse(resolver.shouldWarnBehindProxy(boundToLoopback: false))
    }

    func testTrustProxyTakesTheConfiguredHopFromTheRightAndIgnoresCloudflare() {
        let one = ClientIPResolver(trustProxy: true)
        XCTAssertEqual(one.clientIP(cfConnectingIP: "9.9.9.9", forwardedFor: "6.6.6.6, 1.2.3.4 , 5.6.7.8", peer: "127.0.0.1"), "5.6.7.8")
        let two = ClientIPResolver(trustProxy: true, trustedHops: 2)
        XCTAssertEqual(two.clientIP(cfConnectingIP: nil, forwardedFor: "6.6.6.6, 1.2.3.4 , 5.6.7.8", peer: nil), "1.2.3.4")
        let many = ClientIPResolver(trustProxy: true, trustedHops: 9)
        XCTAssertEqual(many.clientIP(cfConnectingIP: nil, forwardedFor: "6.6.6.6, 5.6.7.8", peer: nil), "5.6.7.8",
                       "beyond the chain: the rightmost, never the client-written leftmost")
        XCTAssertEqual(one.clientIP(cfConnectingIP: nil, forwardedFor: " , ", peer: "10.0.0.1"), "10.0.0.1", "an empty chain falls back to the peer")
    }

    func testTrustCloudflarePrefersCFConnectingIP() {
        let resolver = ClientIPResolver(trustCloudflare: true)
        XCTAssertEqual(resolver.clientIP(cfConnectingIP: " 1.1.1.1 ", forwardedFor: "2.2.2.2", peer: "127.0.0.1"), "1.1.1.1")
        XCTAssertEqual(resolver.clientIP(cfConnectingIP: nil, forwardedFor: "2.2.2.2, 3.3.3.3", peer: "127.0.0.1"), "3.3.3.3")
        XCTAssertFalse(resolver.shouldWarnBehindProxy(boundToLoopback: true))
    }
}

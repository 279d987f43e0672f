import Dispatch
import Foundation
import Synchronization
import TetherCrypto
import TetherNet
@testable import TetherPush
import TetherService
import TetherStore
import TetherWire
import XCTest

/// A push relay in-process on an ephemeral port, over an in-memory store and APNs double, driven
/// with real HTTP/1.1 requests.
final class PushServerHarness {
    let group: EventLoopGroup
    let store: any PushStore
    let transport: InMemoryHTTP2Transport
    let server: PushServer
    let port: UInt16
    let time = TestTime()
    let log = TestLog()

    init(profiles: PushProfiles = [.mytty, .iterm2], store: any PushStore = InMemoryPushStore(), registerLimit: Int = 10) throws {
        var configuration = PushConfiguration()
        configuration.port = 0
        configuration.profiles = profiles
        configuration.teamID = "ABCDE12345"
        configuration.keyID = "FGHIJ67890"
        configuration.key = P256.PrivateKey()
        configuration.registerLimit = registerLimit
        group = try EventLoopGroup(count: 1)
        self.store = store
        transport = InMemoryHTTP2Transport()
        let (time, log) = (time, log)
        server = try PushServer(configuration: configuration, group: group, store: store, transport: transport,
                                clock: ServiceClock(monotonicMs: { time.ms.load(ordering: .relaxed) }, wallMs: { time.ms.load(ordering: .relaxed) }),
                                storeLanes: 2, log: { line in log.lines.withLock { $0.append(line) } })
        port = try server.start()
    }

    deinit {
        server.shutdown()
        group.shutdown()
    }

    var nowSeconds: UInt64 { time.ms.load(ordering: .relaxed) / 1000 }

    /// One request on a connection of its own; returns status and body text.
    func request(_ path: String, method: String = "POST", body: String? = nil, headers: [(String, String)] = []) -> (status: Int, body: String) {
        HTTP.call(group.loops[0], method, "http://127.0.0.1:\(port)\(path)", body: body, headers: headers)
    }

    /// Registers a Profile M device; returns its push id and secret bytes.
    func registerMytty(_ token: String = String(repeating: "ab", count: 32), environment: String = "production") throws -> (String, [UInt8]) {
        let answer = request("/v1/register", body: #"{"deviceToken":"\#(token)","environment":"\#(environment)"}"#)
        XCTAssertEqual(answer.status, 200, answer.body)
        let json = try XCTUnwrap(JSONValue.parse(Array(answer.body.utf8)))
        return (try XCTUnwrap(json.string("pushID")), try Base64.decode(try XCTUnwrap(json.string("relaySecret"))))
    }

    /// A signed Profile M push.
    func pushMytty(_ pushID: String, secret: [UInt8], body: String, timestamp: String? = nil, signature: String? = nil) -> (status: Int, body: String) {
        let stamp = timestamp ?? String(nowSeconds)
        let signed = signature ?? MyttyPush.requestSignature(relaySecret: secret, timestamp: stamp, body: Array(body.utf8))
        return request("/v1/push", body: body, headers: [("content-type", "application/json"), ("x-mytty-push-id", pushID),
                                                          ("x-mytty-timestamp", stamp), ("x-mytty-signature", signed)])
    }
}

final class PushServerTests: XCTestCase {
    let alert = #"{"macID":"MAC-1","ciphertext":"c2VhbGVk","collapseID":"s-1","title":"Mytty","placeholder":"Approval requested"}"#

    func testAMyttyRegistrationThenASignedPushReachesAPNsAndRenewsTheRegistration() throws {
        let relay = try PushServerHarness()
        let (pushID, secret) = try relay.registerMytty(environment: "sandbox")
        XCTAssertNotNil(try relay.store.mytty(pushID: pushID, now: 0))
        relay.time.ms.add(86_400_000, ordering: .relaxed)
        XCTAssertEqual(relay.pushMytty(pushID, secret: secret, body: alert).body, #"{"ok":true}"#)
        let sent = try XCTUnwrap(relay.transport.requests.first)
        XCTAssertEqual(sent.url, "https://api.sandbox.push.apple.com/3/device/" + String(repeating: "ab", count: 32))
        XCTAssertEqual(sent.headers.map(\.name), ["authorization", "apns-topic", "apns-push-type", "apns-priority", "apns-collapse-id"])
        XCTAssertEqual(sent.headers[1].value, "com.m-tkg.mytty.remote")
        XCTAssertEqual(String(decoding: sent.body, as: UTF8.self),
                       #"{"aps":{"alert":{"title":"Mytty","body":"Approval requested"},"sound":"default","mutable-content":1,"interruption-level":"time-sensitive","thread-id":"mytty-attention"},"m":"MAC-1","c":"c2VhbGVk"}"#)
        // Renewed (after the answer, on the registration's lane): alive 180 days after the
        // delivery, not after the registration.
        relay.server.storage.drain()
        let renewedUntil = relay.time.ms.load(ordering: .relaxed) + MyttyProfile.registrationLifetimeMs
        XCTAssertNotNil(try relay.store.mytty(pushID: pushID, now: renewedUntil - 1))
        XCTAssertNil(try relay.store.mytty(pushID: pushID, now: renewedUntil))
    }

    func testMyttyPushesAreRefusedInTheReferencesOrder() throws {
        let relay = try PushServerHarness()
        let (pushID, secret) = try relay.registerMytty()
        let now = relay.nowSeconds
        // Step 1 before step 2: bad credentials with an oversized body are 401, not 413.
        let huge = String(repeating: "x", count: 5_000)
        XCTAssertEqual(relay.pushMytty(pushID, secret: secret, body: huge, timestamp: String(now - 301)).status, 401)
        XCTAssertEqual(relay.pushMytty(pushID, secret: secret, body: huge).status, 413)
        XCTAssertEqual(relay.pushMytty(pushID, secret: secret, body: huge).body, #"{"error":"payload too large"}"#)
        XCTAssertEqual(relay.pushMytty(pushID, secret: secret, body: alert, timestamp: String(now - 300)).status, 200, "inclusive window")
        XCTAssertEqual(relay.pushMytty(pushID, secret: secret, body: alert, timestamp: "NaN").status, 401)
        let unknown = relay.pushMytty(UUID().uuidString.lowercased(), secret: secret, body: alert)
        let forged = relay.pushMytty(pushID, secret: [UInt8](repeating: 1, count: 32), body: alert)
        XCTAssertEqual(unknown.status, 401)
        XCTAssertEqual(unknown.body, forged.body, "an unknown id answers exactly like a bad signature")
        XCTAssertEqual(relay.pushMytty(pushID, secret: secret, body: #"{"macID":"m"}"#).body, #"{"error":"invalid payload"}"#)
        XCTAssertEqual(relay.pushMytty(pushID, secret: secret, body: "not json").body, #"{"error":"invalid payload"}"#)
        XCTAssertEqual(relay.transport.requests.count, 1, "only the one valid push reached APNs")
        XCTAssertEqual(relay.request("/v1/push", method: "GET").status, 404)
        XCTAssertEqual(relay.request("/v1/other").body, #"{"error":"not found"}"#)
    }

    func testAPermanentAPNsFailureDeletesTheRegistrationAndATransientOneKeepsIt() throws {
        let relay = try PushServerHarness()
        let (pushID, secret) = try relay.registerMytty()
        relay.transport.answer { _ in .response(status: 429, body: Array(#"{"reason":"TooManyRequests"}"#.utf8)) }
        XCTAssertEqual(relay.pushMytty(pushID, secret: secret, body: alert).body, #"{"error":"TooManyRequests","status":429}"#)
        XCTAssertNotNil(try relay.store.mytty(pushID: pushID, now: 0))
        relay.transport.answer { _ in .failed(reason: "Timeout was reached", refused: false) }
        XCTAssertEqual(relay.pushMytty(pushID, secret: secret, body: alert).body, #"{"error":"apns unreachable","status":0}"#)
        XCTAssertNotNil(try relay.store.mytty(pushID: pushID, now: 0))
        relay.transport.answer { _ in .response(status: 400, body: Array(#"{"reason":"BadDeviceToken"}"#.utf8)) }
        XCTAssertEqual(relay.pushMytty(pushID, secret: secret, body: alert).body, #"{"error":"BadDeviceToken","status":400}"#)
        XCTAssertNil(try relay.store.mytty(pushID: pushID, now: 0))
        XCTAssertEqual(relay.pushMytty(pushID, secret: secret, body: alert).status, 401, "gone")
    }

    func testITermRegistrationsArePersistedSkippedWhenUnchangedAndRateLimitedPerAddress() throws {
        let relay = try PushServerHarness(registerLimit: 3)
        let token = String(repeating: "cd", count: 32)
        let hash = Hex.encode(SHA256.hash([UInt8](repeating: 7, count: 32)))
        let body = #"{"token":"\#(token)","secretHash":"\#(hash)","sandbox":true}"#
        XCTAssertEqual(relay.request("/register", body: body).body, #"{"ok":true}"#)
        XCTAssertEqual(try relay.store.iterm(token: token, now: 0)?.sandbox, true)
        XCTAssertEqual(relay.request("/register", body: body).body, #"{"ok":true,"skipped":true}"#)
        XCTAssertEqual(relay.request("/register", body: "{").body, #"{"error":"invalid json"}"#, "the third request, counted")
        XCTAssertAnswer(relay.request("/register", body: body), 429, #"{"error":"rate limited"}"#)
        relay.time.ms.add(60_001, ordering: .relaxed)
        XCTAssertEqual(relay.request("/register", body: body).status, 200, "a new window")
    }

    func testITermPushesFollowTheSettledCheckOrder() throws {
        let relay = try PushServerHarness()
        let token = String(repeating: "cd", count: 32)
        let secret = [UInt8](repeating: 0xAB, count: 32)
        XCTAssertEqual(relay.request("/register", body: #"{"token":"\#(token)","secretHash":"\#(Hex.encode(SHA256.hash(secret)))"}"#).status, 200)
        func push(_ secretText: String?, collapse: String = "00000000000000000000000000000000") -> (status: Int, body: String) {
            let secretField = secretText.map { #","secret":"\#($0)""# } ?? ""
            return relay.request("/push/mutable", body: #"{"token":"\#(token)"\#(secretField),"collapse":"\#(collapse)","nonce":"AAAA"}"#)
        }
        XCTAssertEqual(relay.request("/push", method: "GET").body, #"{"error":"POST only"}"#)
        XCTAssertEqual(relay.request("/nowhere", method: "GET").status, 405, "method first")
        XCTAssertEqual(relay.request("/nowhere").body, #"{"error":"no such endpoint"}"#)
        XCTAssertEqual(relay.request("/push", body: String(repeating: "a", count: 4_097)).body, #"{"error":"request too large"}"#)
        XCTAssertEqual(relay.request("/push/mutable", body: #"{"token":"\#(String(repeating: "ef", count: 32))","secret":"x","collapse":"ab"}"#).body,
                       #"{"error":"unknown device token"}"#)
        XCTAssertEqual(push("x", collapse: "XYZ").body, #"{"error":"invalid collapse"}"#, "fields before the token lookup")
        XCTAssertEqual(push(nil).body, #"{"error":"bad secret"}"#)
        XCTAssertEqual(push(Hex.encode(secret).uppercased()).body, #"{"error":"bad secret"}"#)
        XCTAssertEqual(push(Hex.encode([UInt8](repeating: 0xAC, count: 32))).body, #"{"error":"bad secret"}"#)
        for _ in 0..<10 { XCTAssertEqual(push(Hex.encode(secret)).body, #"{"ok":true}"#) }
        XCTAssertEqual(push(Hex.encode(secret)).body, #"{"error":"rate limited"}"#, "the 11th authenticated push in a minute")
        XCTAssertEqual(relay.transport.requests.count, 10)
        let sent = relay.transport.requests[0]
        XCTAssertEqual(sent.url, "https://api.push.apple.com/3/device/\(token)")
        XCTAssertEqual(sent.headers[1].value, "com.googlecode.iterm2.companion")
        XCTAssertEqual(sent.headers.last?.value, "00000000000000000000000000000000")
        relay.time.ms.add(60_001, ordering: .relaxed)
        relay.transport.answer { _ in .response(status: 410, body: Array(#"{"reason":"Unregistered","timestamp":1}"#.utf8)) }
        XCTAssertEqual(push(Hex.encode(secret)).body, #"{"error":"APNs 410: {\"reason\":\"Unregistered\",\"timestamp\":1}"}"#)
        XCTAssertEqual(push(Hex.encode(secret)).body, #"{"error":"unknown device token"}"#, "deleted")
    }

    func testWithOneProfileEnabledItAnswersEveryPath() throws {
        let mytty = try PushServerHarness(profiles: [.mytty])
        XCTAssertEqual(mytty.request("/register", body: "{}").body, #"{"error":"not found"}"#)
        let iterm = try PushServerHarness(profiles: [.iterm2])
        XCTAssertEqual(iterm.request("/v1/register", body: "{}").body, #"{"error":"no such endpoint"}"#)
        XCTAssertEqual(iterm.request("/v1/register", method: "GET").body, #"{"error":"POST only"}"#)
    }

    func testAStoreThatCannotWriteIsAnsweredHonestlyAndCounted() throws {
        let store = InMemoryPushStore()
        store.setFailure(StoreError("disk full"))
        let relay = try PushServerHarness(store: store)
        XCTAssertAnswer(relay.request("/v1/register", body: #"{"deviceToken":"\#(String(repeating: "a", count: 64))","environment":"sandbox"}"#),
                        503, #"{"error":"storage unavailable"}"#)
        XCTAssertAnswer(relay.request("/v1/register", body: #"{"deviceToken":"\#(String(repeating: "b", count: 64))","environment":"sandbox"}"#),
                        503, #"{"error":"storage unavailable"}"#)
        relay.server.storage.drain()
        XCTAssertEqual(relay.server.metrics.storageErrors.value, 3, "the start-up sweep and both registrations")
        XCTAssertEqual(relay.server.metrics.processExceptions.value, 0, "an outage is not a process fault")
        XCTAssertEqual(relay.server.readiness.failing(), ["storage"])
        XCTAssertEqual(relay.log.lines.withLock { $0 }.filter { $0.hasPrefix("push: storage") },
                       ["push: storage unavailable: disk full; answering what needs it with an error until it returns"], "one line per outage")
        store.setFailure(nil)
        relay.server.probeStorage()
        relay.server.storage.drain()
        XCTAssertEqual(relay.server.readiness.failing(), [])
        XCTAssertEqual(relay.log.lines.withLock { $0 }.last, "push: storage available again (3 calls failed meanwhile)")
    }

    func testMetricsUseTheSettledNamesAndLogsHoldNoTokenOrID() throws {
        let relay = try PushServerHarness()
        relay.server.verbose = true
        let (pushID, secret) = try relay.registerMytty()
        _ = relay.pushMytty(pushID, secret: secret, body: alert)
        let exposition = relay.server.metrics.registry.render()
        for name in ["pushrelay_http_requests_total 2", "pushrelay_register_total 1", "pushrelay_register_written_total 1", "pushrelay_push_total 1",
                     "pushrelay_push_delivered_total 1", "pushrelay_devices 1", #"pushrelay_apns_outcomes_total{reason="delivered"} 1"#,
                     "pushrelay_apns_latency_seconds_count 1"] {
            XCTAssertTrue(exposition.contains(name + "\n"), name)
        }
        let text = relay.log.lines.withLock { $0 }.joined(separator: "\n")
        XCTAssertFalse(text.contains(pushID))
        XCTAssertFalse(text.contains("abab"))
    }
}

func XCTAssertAnswer(_ answer: (status: Int, body: String), _ status: Int, _ body: String, _ message: String = "",
                     file: StaticString = #filePath, line: UInt = #line) {
    XCTAssertEqual(answer.status, status, "\(message) \(answer.body)", file: file, line: line)
    XCTAssertEqual(answer.body, body, message, file: file, line: line)
}

final class TestTime: Sendable {
    let ms = Atomic<UInt64>(1_700_000_000_000)
}

final class TestLog: Sendable {
    let lines = Mutex<[String]>([])
}

final class RenewalThrottleTests: XCTestCase {
    func testARegistrationIsRenewedAtMostHourlyAndForgottenWhenDeleted() {
        var throttle = RenewalThrottle(capacity: 3)
        XCTAssertTrue(throttle.shouldRenew("a", now: 1_000))
        XCTAssertFalse(throttle.shouldRenew("a", now: 1_000 + RenewalThrottle.interval - 1))
        XCTAssertTrue(throttle.shouldRenew("a", now: 1_000 + RenewalThrottle.interval))
        throttle.forget("a")
        XCTAssertTrue(throttle.shouldRenew("a", now: 1_000 + RenewalThrottle.interval + 1))
    }

    func testARegistrationRenewedForMonthsKeepsTheThrottleBounded() {
        var throttle = RenewalThrottle(capacity: 100)
        for hour in 0..<10_000 {
            XCTAssertTrue(throttle.shouldRenew("a", now: UInt64(hour) * RenewalThrottle.interval))
            throttle.forget("b")
        }
        XCTAssertLessThanOrEqual(throttle.orderCount, 2 + 1_024 + 1)
    }

    func testPastItsCapacityTheOldestEntriesGoAndAreRenewedAgain() {
        var throttle = RenewalThrottle(capacity: 3)
        for id in ["a", "b", "c", "d"] { XCTAssertTrue(throttle.shouldRenew(id, now: 10)) }
        XCTAssertTrue(throttle.shouldRenew("a", now: 11), "evicted: renewed again (a write, never a missed renewal)")
        XCTAssertFalse(throttle.shouldRenew("d", now: 11))
    }
}

import Dispatch
import Foundation
import Synchronization
import TetherCrypto
import TetherNet
@testable import TetherPush
import TetherService
import TetherStore
import TetherTestSupport
import TetherSync
import TetherWire
import XCTest
import TetherEncoding

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

    init(profiles: PushProfiles = [.mytty, .iterm2], store: any PushStore = InMemoryPushStore(), registerLimit: Int = 10,
         configure: (inout PushConfiguration) -> Void = { _ in }) throws {
        var configuration = PushConfiguration()
        configuration.port = 0
        configuration.profiles = profiles
        configuration.teamID = "ABCDE12345"
        configuration.keyID = "FGHIJ67890"
        configuration.key = P256.PrivateKey()
        configuration.registerLimit = registerLimit
        configure(&configuration)
        group = try EventLoopGroup(count: 1)
        self.store = store
        transport = InMemoryHTTP2Transport()
        let (time, log) = (time, log)
        server = try PushServer(configuration: configuration, group: group, store: store, transport: transport,
                                clock: ServiceClock(monotonic: { .milliseconds(time.ms.load(ordering: .relaxed)) }, wall: { .milliseconds(time.ms.load(ordering: .relaxed)) }),
                                storeLanes: 2, log: { line in log.lines.withLock { $0.append(line) } })
        port = try server.start()
    }

    deinit {
        server.shutdown()
        group.shutdown()
    }

    var nowSeconds: UInt64 { time.ms.load(ordering: .relaxed) / 1000 }

    /// Waits for storage work the server queues after its answer (a renewal): drains the lanes
    /// until `condition` holds, or fails the test after five seconds.
    func waitUntilStored(_ what: String, file: StaticString = #filePath, line: UInt = #line, _ condition: () -> Bool) {
        eventually(what, within: 5, poll: 0.002, file: file, line: line) {
            server.storage.drain()
            return condition()
        }
    }

    /// One request on a connection of its own; returns status and body text.
    func request(_ path: String, method: String = "POST", body: String? = nil, headers: [(String, String)] = []) -> (status: Int, body: String) {
        HTTP.call(group.loops[0], method, "http://127.0.0.1:\(port)\(path)", body: body, headers: headers)
    }

    /// The same, with the response's header fields.
    func exchange(_ path: String, method: String = "POST", body: String? = nil, headers: [(String, String)] = []) -> (status: Int, headers: HTTPHeaders, body: String) {
        HTTP.exchange(group.loops[0], method, "http://127.0.0.1:\(port)\(path)", body: body, headers: headers)
    }

    /// Registers a Profile I device (secret hash of `secret`); returns the answer.
    @discardableResult
    func registerITerm(_ token: String, secret: [UInt8], sandbox: Bool = false, headers: [(String, String)] = []) -> (status: Int, body: String) {
        request("/register", body: #"{"token":"\#(token)","secretHash":"\#(Hex.encode(SHA256.hash(secret)))","sandbox":\#(sandbox)}"#, headers: headers)
    }

    /// A Profile I wakeup.
    func wakeITerm(_ token: String, secret: [UInt8]) -> (status: Int, body: String) {
        request("/push/mutable", body: #"{"token":"\#(token)","secret":"\#(Hex.encode(secret))","collapse":"00000000000000000000000000000000"}"#)
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
        // delivery, not after the registration. The renewal is queued only once the answer has
        // been written, so the client can read the answer before it is queued: wait for it.
        let renewedUntil = relay.time.ms.load(ordering: .relaxed) + UInt64(MyttyProfile.registrationLifetime.millisecondsClamped)
        relay.waitUntilStored("the registration renewed after the delivery") {
            (try? relay.store.mytty(pushID: pushID, now: renewedUntil - 1)) != nil
        }
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

    /// Issue 29: Profile M `/v1/register` is limited per client IP (`PUSH_REGISTER_RATE_LIMIT`,
    /// a Tether setting: the Worker keeps none, and each registration is a row kept 180 days),
    /// every request counting, answered 429 `rate limited` as Profile I answers its own, counted.
    func testMyttyRegistrationsAreLimitedPerAddressAndTheLimitCanBeTurnedOff() throws {
        let relay = try PushServerHarness { $0.registerRateLimit = 3 }
        let body = #"{"deviceToken":"\#(String(repeating: "ab", count: 32))","environment":"production"}"#
        XCTAssertEqual(relay.request("/v1/register", body: body).status, 200)
        XCTAssertEqual(relay.request("/v1/register", body: "{").body, #"{"error":"invalid deviceToken"}"#, "the second request, counted")
        XCTAssertEqual(relay.request("/v1/register", body: body).status, 200)
        XCTAssertAnswer(relay.request("/v1/register", body: body), 429, #"{"error":"rate limited"}"#)
        XCTAssertEqual(relay.server.metrics.rateLimited.value, 1)
        XCTAssertEqual(relay.server.metrics.registersRejected.value, 2)
        XCTAssertEqual(relay.request("/register", body: "{").body, #"{"error":"invalid json"}"#, "Profile I's limit is its own")
        relay.time.ms.add(60_001, ordering: .relaxed)
        XCTAssertEqual(relay.request("/v1/register", body: body).status, 200, "a new window")

        let unlimited = try PushServerHarness { $0.registerRateLimit = 0 }
        for _ in 0..<200 { XCTAssertEqual(unlimited.request("/v1/register", body: body).status, 200) }
        XCTAssertEqual(try PushServerHarness().server.configuration.registerRateLimit, 60, "the default")
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

/// The rules of push.md pinned one by one (answers' form, limits, lifetimes, APNs failure classes).
extension PushServerTests {
    /// push.md §2.1 (Profile M) and §3.7 (Profile I): every answer, success or error, is a JSON
    /// object with `content-type: application/json`.
    func testEveryAnswerIsJSONWithAJSONContentType() throws {
        let relay = try PushServerHarness()
        var answers: [(String, (status: Int, headers: HTTPHeaders, body: String))] = []
        let register = relay.exchange("/v1/register", body: #"{"deviceToken":"\#(String(repeating: "ab", count: 32))","environment":"production"}"#)
        answers.append(("M register", register))
        let json = try XCTUnwrap(JSONValue.parse(Array(register.body.utf8)))
        let (pushID, secret) = (try XCTUnwrap(json.string("pushID")), try Base64.decode(try XCTUnwrap(json.string("relaySecret"))))
        func signed(_ body: String) -> [(String, String)] {
            let stamp = String(relay.nowSeconds)
            return [("x-mytty-push-id", pushID), ("x-mytty-timestamp", stamp),
                    ("x-mytty-signature", MyttyPush.requestSignature(relaySecret: secret, timestamp: stamp, body: Array(body.utf8)))]
        }
        answers.append(("M push", relay.exchange("/v1/push", body: alert, headers: signed(alert))))
        answers.append(("M invalid deviceToken", relay.exchange("/v1/register", body: "not json")))
        answers.append(("M 401", relay.exchange("/v1/push", body: alert)))
        answers.append(("M 404", relay.exchange("/v1/elsewhere", method: "GET")))
        let huge = String(repeating: "x", count: 5_000)
        answers.append(("M 413", relay.exchange("/v1/push", body: huge, headers: signed(huge))))
        relay.transport.answer { _ in .response(status: 400, body: Array(#"{"reason":"BadDeviceToken"}"#.utf8)) }
        answers.append(("M 502", relay.exchange("/v1/push", body: alert, headers: signed(alert))))
        relay.transport.answer { _ in .response(status: 200, body: []) }

        let token = String(repeating: "cd", count: 32)
        let itermSecret = [UInt8](repeating: 3, count: 32)
        let registerBody = #"{"token":"\#(token)","secretHash":"\#(Hex.encode(SHA256.hash(itermSecret)))"}"#
        answers.append(("I register", relay.exchange("/register", body: registerBody)))
        answers.append(("I skipped", relay.exchange("/register", body: registerBody)))
        answers.append(("I invalid json", relay.exchange("/register", body: "[")))
        answers.append(("I invalid token", relay.exchange("/register", body: #"{"token":"x","secretHash":"\#(String(repeating: "0", count: 64))"}"#)))
        answers.append(("I request too large", relay.exchange("/push", body: huge)))
        answers.append(("I 405", relay.exchange("/push", method: "GET")))
        answers.append(("I 404", relay.exchange("/nowhere")))
        let wake = #"{"token":"\#(token)","secret":"\#(Hex.encode(itermSecret))","collapse":"00"}"#
        answers.append(("I push", relay.exchange("/push/mutable", body: wake)))
        answers.append(("I bad secret", relay.exchange("/push/mutable", body: #"{"token":"\#(token)","secret":"00","collapse":"00"}"#)))
        answers.append(("I unknown device token", relay.exchange("/push/mutable", body: #"{"token":"\#(String(repeating: "ef", count: 32))","secret":"00","collapse":"00"}"#)))
        relay.transport.answer { _ in .response(status: 500, body: Array(#"{"reason":"InternalServerError"}"#.utf8)) }
        answers.append(("I 502", relay.exchange("/push/mutable", body: wake)))
        relay.transport.answer { _ in .response(status: 200, body: []) }
        for _ in 0..<9 { _ = relay.exchange("/push/mutable", body: wake) }
        answers.append(("I 429", relay.exchange("/push/mutable", body: wake)))

        XCTAssertEqual(answers.map(\.1.status), [200, 200, 400, 401, 404, 413, 502, 200, 200, 400, 400, 400, 405, 404, 200, 403, 403, 502, 429],
                       answers.map { "\($0.0): \($0.1.body)" }.joined(separator: "\n"))
        for (name, answer) in answers {
            XCTAssertEqual(answer.headers["content-type"], "application/json", name)
            guard case .object? = JSONValue.parse(Array(answer.body.utf8)) else { return XCTFail("\(name): not a JSON object: \(answer.body)") }
        }
    }

    /// push.md §4.5: a request bug (here 400 `BadCollapseId`) keeps the registration and is
    /// answered 502 with APNs' status and reason, after one APNs request (no retry).
    func testARequestBugAnswers502AndKeepsTheRegistration() throws {
        let relay = try PushServerHarness()
        let (pushID, secret) = try relay.registerMytty()
        let token = String(repeating: "cd", count: 32)
        let itermSecret = [UInt8](repeating: 5, count: 32)
        XCTAssertEqual(relay.registerITerm(token, secret: itermSecret).status, 200)
        relay.transport.answer { _ in .response(status: 400, body: Array(#"{"reason":"BadCollapseId"}"#.utf8)) }
        XCTAssertAnswer(relay.pushMytty(pushID, secret: secret, body: alert), 502, #"{"error":"BadCollapseId","status":400}"#)
        XCTAssertEqual(relay.transport.requests.count, 1, "no retry")
        relay.server.storage.drain()
        XCTAssertNotNil(try relay.store.mytty(pushID: pushID, now: 0))
        XCTAssertAnswer(relay.wakeITerm(token, secret: itermSecret), 502, #"{"error":"APNs 400: {\"reason\":\"BadCollapseId\"}"}"#)
        XCTAssertEqual(relay.transport.requests.count, 2, "no retry")
        relay.server.storage.drain()
        XCTAssertNotNil(try relay.store.iterm(token: token, now: 0))
        relay.transport.answer { _ in .response(status: 200, body: []) }
        XCTAssertEqual(relay.pushMytty(pushID, secret: secret, body: alert).status, 200, "still registered")
        XCTAssertEqual(relay.wakeITerm(token, secret: itermSecret).status, 200, "still registered")
    }

    /// push.md §1.1: the signature covers the timestamp header's exact text, not the number
    /// re-printed (`0` + now is 11 digits, within `^[0-9]{1,12}$`).
    func testTheSignatureCoversTheTimestampHeaderTextAsSent() throws {
        let relay = try PushServerHarness()
        let (pushID, secret) = try relay.registerMytty()
        let now = String(relay.nowSeconds)
        XCTAssertAnswer(relay.pushMytty(pushID, secret: secret, body: alert, timestamp: "0" + now), 200, #"{"ok":true}"#)
        let reprinted = MyttyPush.requestSignature(relaySecret: secret, timestamp: now, body: Array(alert.utf8))
        XCTAssertAnswer(relay.pushMytty(pushID, secret: secret, body: alert, timestamp: "0" + now, signature: reprinted), 401, #"{"error":"unauthorized"}"#)
    }

    /// push.md §1.1: registration bodies are capped like pushes, at 4,096 UTF-16 units.
    func testRegistrationBodiesAreCappedLikePushes() throws {
        let relay = try PushServerHarness()
        func padded(_ json: String, to units: Int) -> String {
            var body = json
            body.insert(contentsOf: String(repeating: " ", count: units - json.utf16.count), at: body.index(before: body.endIndex))
            return body
        }
        let mytty = #"{"deviceToken":"\#(String(repeating: "ab", count: 32))","environment":"production"}"#
        let iterm = #"{"token":"\#(String(repeating: "cd", count: 32))","secretHash":"\#(String(repeating: "0", count: 64))"}"#
        XCTAssertEqual(padded(mytty, to: 4_096).utf16.count, 4_096)
        XCTAssertEqual(relay.request("/v1/register", body: padded(mytty, to: 4_096)).status, 200, "4,096 units are parsed")
        XCTAssertAnswer(relay.request("/v1/register", body: padded(mytty, to: 4_097)), 413, #"{"error":"payload too large"}"#)
        XCTAssertAnswer(relay.request("/register", body: padded(iterm, to: 4_096)), 200, #"{"ok":true}"#, "4,096 units are parsed")
        XCTAssertAnswer(relay.request("/register", body: padded(iterm, to: 4_097)), 400, #"{"error":"request too large"}"#)
        // Units, not bytes: 1,366 three-byte characters are 4,098 bytes but 1,366 units.
        let wide = padded(#"{"deviceToken":"\#(String(repeating: "ab", count: 32))","environment":"production","x":"\#(String(repeating: "€", count: 1_366))"}"#, to: 4_096)
        XCTAssertGreaterThan(wide.utf8.count, 4_096)
        XCTAssertEqual(relay.request("/v1/register", body: wide).status, 200)
    }

    /// push.md §1.1: the Content-Type is never checked; the body is parsed as JSON whatever it says.
    func testTheContentTypeIsNeverChecked() throws {
        let relay = try PushServerHarness()
        let plain = [("content-type", "text/plain")]
        let register = relay.request("/v1/register", body: #"{"deviceToken":"\#(String(repeating: "ab", count: 32))","environment":"sandbox"}"#, headers: plain)
        XCTAssertEqual(register.status, 200, register.body)
        let json = try XCTUnwrap(JSONValue.parse(Array(register.body.utf8)))
        let (pushID, secret) = (try XCTUnwrap(json.string("pushID")), try Base64.decode(try XCTUnwrap(json.string("relaySecret"))))
        let stamp = String(relay.nowSeconds)
        XCTAssertAnswer(relay.request("/v1/push", body: alert, headers: plain + [
            ("x-mytty-push-id", pushID), ("x-mytty-timestamp", stamp),
            ("x-mytty-signature", MyttyPush.requestSignature(relaySecret: secret, timestamp: stamp, body: Array(alert.utf8))),
        ]), 200, #"{"ok":true}"#)
        XCTAssertAnswer(relay.registerITerm(String(repeating: "cd", count: 32), secret: [UInt8](repeating: 1, count: 32), headers: plain), 200, #"{"ok":true}"#)
    }

    /// push.md §1.1, §3.7: an APNs that cannot be reached answers Profile I 502 `APNs 0:
    /// unreachable` and keeps the registration; the next push goes through.
    func testAnUnreachableAPNsKeepsTheITermRegistration() throws {
        let relay = try PushServerHarness()
        let token = String(repeating: "cd", count: 32)
        let secret = [UInt8](repeating: 2, count: 32)
        XCTAssertEqual(relay.registerITerm(token, secret: secret).status, 200)
        relay.transport.answer { _ in .failed(reason: "Timeout was reached", refused: false) }
        XCTAssertAnswer(relay.wakeITerm(token, secret: secret), 502, #"{"error":"APNs 0: unreachable"}"#)
        XCTAssertEqual(relay.transport.requests.count, 1, "a request that may have arrived is never sent twice")
        relay.server.storage.drain()
        XCTAssertNotNil(try relay.store.iterm(token: token, now: 0))
        relay.transport.answer { _ in .response(status: 200, body: []) }
        XCTAssertAnswer(relay.wakeITerm(token, secret: secret), 200, #"{"ok":true}"#)
    }

    /// push.md §2.2, §2.7, §3.2, §6: Profile M lives 180 days (15,552,000 s), Profile I 90 days
    /// (7,776,000 s) and is rewritten after half of that.
    func testRegistrationsLiveTheReferencesLifetimes() throws {
        XCTAssertEqual(MyttyProfile.registrationLifetime, .seconds(15_552_000))
        XCTAssertEqual(ITermProfile.registrationLifetime, .seconds(7_776_000))
        XCTAssertEqual(ITermProfile.rewriteAge, .seconds(3_888_000))
        let relay = try PushServerHarness()
        let t = relay.time.ms.load(ordering: .relaxed)
        let (pushID, _) = try relay.registerMytty()
        let token = String(repeating: "cd", count: 32)
        let secret = [UInt8](repeating: 4, count: 32)
        XCTAssertEqual(relay.registerITerm(token, secret: secret).status, 200)
        relay.server.storage.drain()
        let day: UInt64 = 86_400_000
        XCTAssertNotNil(try relay.store.mytty(pushID: pushID, now: t + 180 * day - 1))
        XCTAssertNil(try relay.store.mytty(pushID: pushID, now: t + 180 * day))
        XCTAssertNotNil(try relay.store.iterm(token: token, now: t + 90 * day - 1))
        XCTAssertNil(try relay.store.iterm(token: token, now: t + 90 * day))
        // An unchanged re-registration is skipped until the record is 45 days old, then rewritten.
        relay.time.ms.store(t + 45 * day - 1, ordering: .relaxed)
        XCTAssertEqual(relay.registerITerm(token, secret: secret).body, #"{"ok":true,"skipped":true}"#)
        relay.time.ms.store(t + 45 * day, ordering: .relaxed)
        XCTAssertEqual(relay.registerITerm(token, secret: secret).body, #"{"ok":true}"#)
        relay.server.storage.drain()
        XCTAssertNotNil(try relay.store.iterm(token: token, now: t + 135 * day - 1))
    }

    /// push.md §4.3, §2.7: after a 410 deleted a Profile I token, the phone's next `/register`
    /// writes it again (not skipped) and pushes are delivered.
    func testATokenDeletedByA410CanRegisterAgain() throws {
        let relay = try PushServerHarness()
        let token = String(repeating: "cd", count: 32)
        let secret = [UInt8](repeating: 6, count: 32)
        XCTAssertEqual(relay.registerITerm(token, secret: secret).body, #"{"ok":true}"#)
        relay.transport.answer { _ in .response(status: 410, body: Array(#"{"reason":"Unregistered","timestamp":1700000000000}"#.utf8)) }
        XCTAssertEqual(relay.wakeITerm(token, secret: secret).status, 502)
        XCTAssertAnswer(relay.wakeITerm(token, secret: secret), 403, #"{"error":"unknown device token"}"#)
        relay.transport.answer { _ in .response(status: 200, body: []) }
        XCTAssertAnswer(relay.registerITerm(token, secret: secret), 200, #"{"ok":true}"#, "written again, not skipped")
        XCTAssertAnswer(relay.wakeITerm(token, secret: secret), 200, #"{"ok":true}"#)
    }

    /// push.md §4.5: a configuration failure keeps the registration, logs one operator line
    /// (no token, push id or IP) and is counted.
    func testAConfigurationFailureIsLoggedOnceAndCounted() throws {
        let relay = try PushServerHarness()
        let (pushID, secret) = try relay.registerMytty()
        relay.transport.answer { _ in .response(status: 403, body: Array(#"{"reason":"InvalidProviderToken"}"#.utf8)) }
        XCTAssertAnswer(relay.pushMytty(pushID, secret: secret, body: alert), 502, #"{"error":"InvalidProviderToken","status":403}"#)
        XCTAssertAnswer(relay.pushMytty(pushID, secret: secret, body: alert), 502, #"{"error":"InvalidProviderToken","status":403}"#)
        relay.server.storage.drain()
        XCTAssertNotNil(try relay.store.mytty(pushID: pushID, now: 0))
        let lines = relay.log.lines.withLock { $0 }.filter { $0.contains("configuration") }
        XCTAssertEqual(lines, ["push: APNs refuses the relay's configuration: InvalidProviderToken (403); "
                               + "every push fails until APNS_KEY_ID, APNS_TEAM_ID, the key or the topic is fixed"])
        let text = relay.log.lines.withLock { $0 }.joined(separator: "\n")
        XCTAssertFalse(text.contains(pushID))
        XCTAssertFalse(text.contains("abab"))
        XCTAssertFalse(text.contains("127.0.0.1"))
        let exposition = relay.server.metrics.registry.render()
        XCTAssertTrue(exposition.contains(#"pushrelay_apns_outcomes_total{reason="InvalidProviderToken"} 2"# + "\n"), exposition)
        XCTAssertTrue(exposition.contains("pushrelay_push_apns_error_total 2\n"), exposition)
    }

    /// push.md §6: housekeeping prunes expired registrations and sets the device gauge to what
    /// is left.
    func testHousekeepingPrunesExpiredRegistrationsAndRefreshesTheDeviceGauge() throws {
        let relay = try PushServerHarness()
        relay.server.storage.drain()
        let (live, _) = try relay.registerMytty()
        let now = relay.time.ms.load(ordering: .relaxed)
        try relay.store.putMytty(MyttyRegistration(deviceToken: String(repeating: "ef", count: 32), environment: .production,
                                                   relaySecret: Base64.encode([UInt8](repeating: 1, count: 32))),
                                 pushID: "expired", expiresAt: now - 1)
        try relay.store.putITerm(ITermRegistration(secretHash: String(repeating: "0", count: 64), sandbox: false, registeredAt: 0),
                                 token: String(repeating: "12", count: 32), expiresAt: now - 1)
        relay.server.metrics.devices.set(3)
        relay.server.housekeeping()
        relay.server.storage.drain()
        XCTAssertNil(try relay.store.mytty(pushID: "expired", now: 0), "pruned, not only unread")
        XCTAssertNil(try relay.store.iterm(token: String(repeating: "12", count: 32), now: 0))
        XCTAssertNotNil(try relay.store.mytty(pushID: live, now: 0))
        XCTAssertEqual(relay.server.metrics.devices.value, 1)
    }

    /// push.md §1.1: behind a trusted proxy, `/register`'s limit is per client IP from
    /// `X-Forwarded-For`.
    func testTheRegisterLimitKeysByTheTrustedClientIP() throws {
        let relay = try PushServerHarness(registerLimit: 1) { $0.clientIP = ClientIPResolver(trustProxy: true) }
        let secret = [UInt8](repeating: 8, count: 32)
        XCTAssertEqual(relay.registerITerm(String(repeating: "a1", count: 32), secret: secret, headers: [("x-forwarded-for", "198.51.100.1")]).status, 200)
        XCTAssertEqual(relay.registerITerm(String(repeating: "a2", count: 32), secret: secret, headers: [("x-forwarded-for", "198.51.100.2")]).status, 200)
        XCTAssertAnswer(relay.registerITerm(String(repeating: "a3", count: 32), secret: secret, headers: [("x-forwarded-for", "198.51.100.1")]),
                        429, #"{"error":"rate limited"}"#)
    }

    /// Issue 18: one address holds at most PUSH_MAX_CONNECTIONS_PER_IP open connections, heads
    /// still arriving included; the next is answered 429 at accept and counted, and a place comes
    /// back when a connection closes.
    func testAnAddressHoldsAtMostItsConnectionCapAndTheNextIsRefused429AtAccept() throws {
        let relay = try PushServerHarness { $0.maxConnectionsPerIP = 2 }
        func connect() throws -> Int32 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = relay.port.bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            XCTAssertEqual(connected, 0)
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            return fd
        }
        func answer(_ fd: Int32) -> String {
            var bytes = [UInt8](repeating: 0, count: 512)
            let count = read(fd, &bytes, bytes.count)
            return count > 0 ? String(decoding: bytes[..<count], as: UTF8.self) : ""
        }
        let first = try connect(), second = try connect()
        func send(_ fd: Int32, _ text: String) { _ = Array(text.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
        send(first, "POST /v1/re")   // a head still arriving holds its place
        let third = try connect()
        let refusal = answer(third)
        XCTAssertTrue(refusal.hasPrefix("HTTP/1.1 429"), refusal)
        XCTAssertTrue(refusal.lowercased().contains("content-type: application/json"), refusal)
        XCTAssertTrue(refusal.hasSuffix(#"{"error":"too many connections"}"#), refusal)
        close(third)
        close(second)
        var served = ""
        try eventually("a place came back when a connection closed: \(served)", within: 2, poll: 0.02) {
            let fourth = try connect()
            send(fourth, "GET /v1/none HTTP/1.1\r\nHost: x\r\n\r\n")
            served = answer(fourth)
            close(fourth)
            return served.hasPrefix("HTTP/1.1 404")
        }
        close(first)
        // At least the one refused above; a retry that came before the closes were seen adds to it.
        let refused = relay.server.metrics.registry.render().split(separator: "\n").first { $0.hasPrefix("pushrelay_connections_refused_total ") }
        XCTAssertGreaterThanOrEqual(refused.flatMap { Int($0.split(separator: " ")[1]) } ?? 0, 1)
    }

    /// push.md §1.1: the 14 metric names are on the admin listener, and `/metrics` is not
    /// served on the public port (either profile's unknown-route answer).
    func testEveryListedMetricIsOnTheAdminListenerOnly() throws {
        let relay = try PushServerHarness { $0.adminPort = 0 }
        let admin = try XCTUnwrap(relay.server.adminPort)
        let scrape = HTTP.call(relay.group.loops[0], "GET", "http://127.0.0.1:\(admin)/metrics")
        XCTAssertEqual(scrape.status, 200)
        let names = Set(scrape.body.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { $0.split(whereSeparator: { $0 == " " || $0 == "{" }).first.map(String.init) })
        for name in ["pushrelay_http_requests_total", "pushrelay_http_errors_total", "pushrelay_register_total", "pushrelay_register_written_total",
                     "pushrelay_register_skipped_total", "pushrelay_register_rejected_total", "pushrelay_push_total", "pushrelay_push_delivered_total",
                     "pushrelay_push_bad_secret_total", "pushrelay_push_unknown_token_total", "pushrelay_push_apns_error_total",
                     "pushrelay_rate_limited_total", "pushrelay_process_exceptions_total", "pushrelay_devices"] {
            XCTAssertTrue(names.contains(name), name)
        }
        XCTAssertAnswer(relay.request("/metrics", method: "GET"), 405, #"{"error":"POST only"}"#, "both profiles: Profile I's route rule")
        XCTAssertAnswer(relay.request("/metrics"), 404, #"{"error":"no such endpoint"}"#)
        let mytty = try PushServerHarness(profiles: [.mytty])
        XCTAssertAnswer(mytty.request("/metrics", method: "GET"), 404, #"{"error":"not found"}"#)
        let iterm = try PushServerHarness(profiles: [.iterm2])
        XCTAssertAnswer(iterm.request("/metrics"), 404, #"{"error":"no such endpoint"}"#)
    }

    /// The push relay drains through its chassis runtime: shutdown turns `/readyz` to
    /// `not ready: accepting` on the admin listener's check, ahead of the relay's `storage`.
    func testShutdownTurnsAcceptingOffAheadOfTheStorageCheck() throws {
        let relay = try PushServerHarness()
        XCTAssertEqual(relay.server.readiness.failing(), [])
        relay.server.shutdown()
        XCTAssertEqual(relay.server.readiness.failing(), ["accepting"])
    }

    /// push.md §5: `APNS_TOPIC` is the `apns-topic` of Profile M requests (and
    /// `APNS_TOPIC_ITERM2` of Profile I's).
    func testTheConfiguredTopicsAreSentToAPNs() throws {
        let relay = try PushServerHarness { $0.topic = "com.example.app"; $0.topicITerm2 = "com.example.iterm" }
        let (pushID, secret) = try relay.registerMytty()
        XCTAssertEqual(relay.pushMytty(pushID, secret: secret, body: alert).status, 200)
        let token = String(repeating: "cd", count: 32)
        XCTAssertEqual(relay.registerITerm(token, secret: secret).status, 200)
        XCTAssertEqual(relay.wakeITerm(token, secret: secret).status, 200)
        XCTAssertEqual(relay.transport.requests.map { $0.headers[1] }, [HTTPField("apns-topic", "com.example.app"), HTTPField("apns-topic", "com.example.iterm")])
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
    let lines = Locked<[String]>([])
}

final class RenewalThrottleTests: XCTestCase {
    func testARegistrationIsRenewedAtMostHourlyAndForgottenWhenDeleted() {
        var throttle = RenewalThrottle(capacity: 3)
        XCTAssertTrue(throttle.shouldRenew("a", now: .milliseconds(1_000)))
        XCTAssertFalse(throttle.shouldRenew("a", now: .milliseconds(1_000) + RenewalThrottle.interval - .milliseconds(1)))
        XCTAssertTrue(throttle.shouldRenew("a", now: .milliseconds(1_000) + RenewalThrottle.interval))
        throttle.forget("a")
        XCTAssertTrue(throttle.shouldRenew("a", now: .milliseconds(1_000) + RenewalThrottle.interval + .milliseconds(1)))
    }

    func testARegistrationRenewedForMonthsKeepsTheThrottleBounded() {
        var throttle = RenewalThrottle(capacity: 100)
        for hour in 0..<10_000 {
            XCTAssertTrue(throttle.shouldRenew("a", now: .zero + RenewalThrottle.interval * hour))
            throttle.forget("b")
        }
        XCTAssertLessThanOrEqual(throttle.orderCount, 2 + 1_024 + 1)
    }

    func testPastItsCapacityTheOldestEntriesGoAndAreRenewedAgain() {
        var throttle = RenewalThrottle(capacity: 3)
        for id in ["a", "b", "c", "d"] { XCTAssertTrue(throttle.shouldRenew(id, now: .milliseconds(10))) }
        XCTAssertTrue(throttle.shouldRenew("a", now: .milliseconds(11)), "evicted: renewed again (a write, never a missed renewal)")
        XCTAssertFalse(throttle.shouldRenew("d", now: .milliseconds(11)))
    }
}

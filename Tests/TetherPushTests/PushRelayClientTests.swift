import Foundation
import Synchronization
import TetherClient
import TetherCrypto
import TetherNet
import TetherPush
import TetherStore
import TetherSync
import TetherWire
import XCTest
import TetherEncoding

/// The SDK's push calls against an in-process push relay: what the phone registers, what the Mac
/// sends, and what the phone's extension opens, byte for byte with the relay's view.
final class PushRelayClientTests: XCTestCase {
    func testAPhoneRegistersAMacPushesASealedAlertAndTheExtensionOpensIt() async throws {
        let relay = try PushServerHarness()
        let client = PushRelayClient(baseURL: "http://127.0.0.1:\(relay.port)/", loop: relay.group.loops[0])
        let registration = try await client.registerMytty(deviceToken: String(repeating: "ab", count: 32), sandbox: true)
        XCTAssertEqual(registration.relaySecret.count, 32)
        let deviceSecret = SecureRandom.bytes(32)
        let alert = Array(#"{"title":"Approval requested","body":"rm -rf build?","paneID":"p-1"}"#.utf8)
        try await client.pushMytty(to: registration, macID: "MAC-UUID", alert: alert, deviceSecret: deviceSecret,
                                   collapseID: "pane-1", placeholder: "Approval requested", now: Date(timeIntervalSince1970: Double(relay.nowSeconds)))
        let payload = try XCTUnwrap(JSONValue.parse(try XCTUnwrap(relay.transport.requests.first).body))
        XCTAssertEqual(payload.string("m"), "MAC-UUID")
        // The phone's notification service extension: the ciphertext opens with the pairing's secret only.
        let sealed = try XCTUnwrap(payload.string("c"))
        XCTAssertEqual(try MyttyPush.openAlert(sealed, deviceSecret: deviceSecret), alert)
        XCTAssertThrowsError(try MyttyPush.openAlert(sealed, deviceSecret: SecureRandom.bytes(32)))
    }

    func testAnITermWakeupCarriesANonceOnlyThePairedPhoneOpensAndRefusalsAreTyped() async throws {
        let relay = try PushServerHarness()
        let client = PushRelayClient(baseURL: "http://127.0.0.1:\(relay.port)", loop: relay.group.loops[0])
        let token = [UInt8](repeating: 0x5A, count: 32)
        let secret = SecureRandom.bytes(32)
        let isNew = try await client.registerITerm(token: token, secret: secret, sandbox: false)
        XCTAssertTrue(isNew)
        let again = try await client.registerITerm(token: token, secret: secret, sandbox: false)
        XCTAssertFalse(again, "unchanged: skipped")
        let roomSecret = try RoomSecret(bytes: [UInt8](repeating: 7, count: 32))
        let nonce = PushNonce.generate()
        try await client.wakeITerm(token: token, secret: secret, sealedNonce: PushNonce.seal(nonce, roomSecret: roomSecret))
        let payload = try XCTUnwrap(JSONValue.parse(try XCTUnwrap(relay.transport.requests.last).body))
        XCTAssertEqual(try PushNonce.open(try XCTUnwrap(payload.string("n")), roomSecret: roomSecret), nonce)
        XCTAssertEqual(relay.transport.requests.last?.headers.last?.value, CollapseToken.wakeup)
        do {
            try await client.notifyITerm(token: token, secret: SecureRandom.bytes(32), title: "t", body: "b")
            XCTFail("a wrong secret must be refused")
        } catch {
            XCTAssertEqual(error, .refused(status: 403, error: "bad secret", apnsStatus: nil))
        }
        relay.transport.answer { _ in .response(status: 400, body: Array(#"{"reason":"BadDeviceToken"}"#.utf8)) }
        do {
            try await client.notifyITerm(token: token, secret: secret, title: "t", body: "b")
            XCTFail("APNs refused it")
        } catch {
            XCTAssertEqual(error, .refused(status: 502, error: #"APNs 400: {"reason":"BadDeviceToken"}"#, apnsStatus: 400))
        }
    }

    /// push.md §2.2: each registration is a new lowercase UUIDv4 `pushID` (the phone re-registers
    /// on every launch) and every one of them can push; `sandbox` picks APNs' sandbox host.
    func testEachRegistrationIsANewPushIDAndSandboxPicksTheSandboxHost() async throws {
        let relay = try PushServerHarness()
        let client = PushRelayClient(baseURL: "http://127.0.0.1:\(relay.port)", loop: relay.group.loops[0])
        let token = String(repeating: "ab", count: 32)
        let first = try await client.registerMytty(deviceToken: token, sandbox: true)
        let second = try await client.registerMytty(deviceToken: token, sandbox: false)
        XCTAssertNotEqual(first.pushID, second.pushID)
        for registration in [first, second] {
            XCTAssertEqual(registration.pushID, registration.pushID.lowercased())
            XCTAssertEqual(UUID(uuidString: registration.pushID)?.uuidString.lowercased(), registration.pushID, "canonical UUID form")
            let characters = Array(registration.pushID)
            XCTAssertEqual(characters[14], "4", "version 4")
            XCTAssertTrue("89ab".contains(characters[19]), "RFC 4122 variant")
        }
        let now = Date(timeIntervalSince1970: Double(relay.nowSeconds))
        for registration in [first, second] {
            try await client.pushMytty(to: registration, macID: "MAC", alert: Array("{}".utf8), deviceSecret: SecureRandom.bytes(32),
                                       collapseID: "c", placeholder: "p", now: now)
        }
        XCTAssertEqual(relay.transport.requests.map(\.url), ["https://api.sandbox.push.apple.com/3/device/\(token)",
                                                             "https://api.push.apple.com/3/device/\(token)"])
    }

    /// push.md §2.4, §2.5: a refused Mytty push throws the relay's status and error (and APNs'
    /// status for a 502).
    func testAMyttyPushRefusalIsTypedWithItsStatus() async throws {
        let relay = try PushServerHarness()
        let client = PushRelayClient(baseURL: "http://127.0.0.1:\(relay.port)", loop: relay.group.loops[0])
        let registration = try await client.registerMytty(deviceToken: String(repeating: "ab", count: 32), sandbox: false)
        let now = Date(timeIntervalSince1970: Double(relay.nowSeconds))
        let forged = try await pushRefusal(client, PushRelayClient.MyttyRegistration(pushID: registration.pushID, relaySecret: SecureRandom.bytes(32)), now)
        XCTAssertEqual(forged, .refused(status: 401, error: "unauthorized", apnsStatus: nil))
        relay.transport.answer { _ in .response(status: 400, body: Array(#"{"reason":"BadDeviceToken"}"#.utf8)) }
        let dead = try await pushRefusal(client, registration, now)
        XCTAssertEqual(dead, .refused(status: 502, error: "BadDeviceToken", apnsStatus: 400))
    }

    private func pushRefusal(_ client: PushRelayClient, _ registration: PushRelayClient.MyttyRegistration, _ now: Date) async throws -> PushRelayError? {
        do {
            try await client.pushMytty(to: registration, macID: "MAC", alert: Array("{}".utf8), deviceSecret: SecureRandom.bytes(32),
                                       collapseID: "c", placeholder: "p", now: now)
            return nil
        } catch {
            return error
        }
    }

    /// push.md §3.1 (client.md §1): every Profile I call says `User-Agent: iTerm2Companion`, and a
    /// redirect is never followed but reported.
    func testITermCallsSendTheCompanionUserAgentAndFollowNoRedirect() async throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let relay = RecordingRelay()
        var configuration = HTTPServer.Configuration()
        configuration.port = 0
        let server = HTTPServer(group: group, configuration: configuration, delegate: relay)
        let port = try server.start()
        defer { server.shutdown(grace: .seconds(1)) }
        let client = PushRelayClient(baseURL: "http://127.0.0.1:\(port)", loop: group.loops[0])
        let (token, secret) = ([UInt8](repeating: 1, count: 32), [UInt8](repeating: 2, count: 32))
        try await client.registerITerm(token: token, secret: secret, sandbox: false)
        try await client.wakeITerm(token: token, secret: secret, sealedNonce: nil)
        try await client.notifyITerm(token: token, secret: secret, title: "t", body: "b")
        XCTAssertEqual(relay.heads.withLock { $0 }.map { String($0.path) }, ["/register", "/push/mutable", "/push"])
        XCTAssertEqual(relay.heads.withLock { $0 }.map { $0.headers.values("user-agent") }, [["iTerm2Companion"], ["iTerm2Companion"], ["iTerm2Companion"]])
        relay.redirect.store(true, ordering: .relaxed)
        do {
            try await client.wakeITerm(token: token, secret: secret, sealedNonce: nil)
            XCTFail("a redirect is not a success")
        } catch {
            guard case .refused(302, _, nil) = error else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(relay.heads.withLock { $0 }.count, 4, "the Location was not followed")
    }
}

/// A push relay stand-in that records each request head and answers `{"ok":true}`, or a 302 to
/// itself once `redirect` is set.
private final class RecordingRelay: HTTPServerDelegate {
    let heads = Locked<[HTTPRequestHead]>([])
    let redirect = Atomic<Bool>(false)

    func respond(to request: HTTPServerRequest) -> HTTPResponse {
        heads.withLock { $0.append(request.head) }
        guard redirect.load(ordering: .relaxed) else { return .json(200, Array(#"{"ok":true}"#.utf8)) }
        var headers = HTTPHeaders()
        headers.add("Location", "/register")
        return HTTPResponse(status: 302, headers: headers, body: Array(#"{"error":"moved"}"#.utf8))
    }
}

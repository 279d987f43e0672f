import Foundation
import TetherClient
import TetherCrypto
import TetherNet
import TetherPush
import TetherStore
import TetherWire
import XCTest

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
}

import TetherCrypto
import TetherNet
@testable import TetherPush
import TetherStore
import TetherWire
import TetherSync
import XCTest
import TetherEncoding

final class MyttyProfileTests: XCTestCase {
    func testDeviceTokensFollowTheReferenceCases() {
        // push.md §2.2 [test].
        XCTAssertTrue(MyttyProfile.isValidDeviceToken(String(repeating: "a", count: 64)))
        XCTAssertTrue(MyttyProfile.isValidDeviceToken(String(repeating: "A1", count: 32)))
        XCTAssertFalse(MyttyProfile.isValidDeviceToken(String(repeating: "a", count: 31)))
        XCTAssertFalse(MyttyProfile.isValidDeviceToken(String(repeating: "a", count: 201)))
        XCTAssertFalse(MyttyProfile.isValidDeviceToken(String(repeating: "a", count: 63) + "z"))
        XCTAssertEqual(MyttyProfile.registration(from: Array(#"{"deviceToken":null,"environment":"sandbox"}"#.utf8)).failure?.answer, MyttyProfile.invalidDeviceToken)
        XCTAssertEqual(MyttyProfile.registration(from: Array("not json".utf8)).failure?.answer, MyttyProfile.invalidDeviceToken)
        let token = String(repeating: "a", count: 64)
        XCTAssertEqual(MyttyProfile.registration(from: Array(#"{"deviceToken":"\#(token)","environment":"staging"}"#.utf8)).failure?.answer,
                       MyttyProfile.invalidEnvironment)
        XCTAssertEqual(MyttyProfile.registration(from: Array(#"{"deviceToken":"\#(token)","environment":"production"}"#.utf8)).success?.environment,
                       .production)
    }

    func testANewRegistrationIsALowercaseUUIDv4AndThirtyTwoSecretBytes() throws {
        let (pushID, secret) = MyttyProfile.newRegistration(random: SecureRandom.bytes)
        let pattern = try NSRegularExpression(pattern: "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
        XCTAssertEqual(pattern.numberOfMatches(in: pushID, range: NSRange(pushID.startIndex..., in: pushID)), 1, pushID)
        XCTAssertEqual(try Base64.decode(secret).count, 32)
        XCTAssertEqual(MyttyProfile.uuid([UInt8](repeating: 0xFF, count: 16)), "ffffffff-ffff-4fff-bfff-ffffffffffff")
    }

    private func head(_ headers: [(String, String)]) -> HTTPRequestHead {
        HTTPRequestHead(method: "POST", target: "/v1/push", version: .http11, headers: HTTPHeaders(headers))
    }

    func testCredentialsNeedBothHeadersAndADecimalTimestampWithinFiveMinutesInclusive() {
        let now: UInt64 = 1_700_000_000
        func check(_ timestamp: String?, id: String? = "p", signature: String? = "s") -> Bool {
            var fields: [(String, String)] = []
            if let id { fields.append(("x-mytty-push-id", id)) }
            if let timestamp { fields.append(("x-mytty-timestamp", timestamp)) }
            if let signature { fields.append(("x-mytty-signature", signature)) }
            return MyttyProfile.credentials(head(fields), nowSeconds: now) != nil
        }
        XCTAssertTrue(check("1700000000"))
        XCTAssertTrue(check("1699999700"), "exactly 300 s behind")
        XCTAssertTrue(check("1700000300"), "exactly 300 s ahead")
        XCTAssertFalse(check("1699999699"))
        XCTAssertFalse(check("1700000301"))
        for bad in ["NaN", "", "1e9", "-1", "1700000000.0", " 1700000000", "1234567890123", "0x10"] { XCTAssertFalse(check(bad), bad) }
        XCTAssertFalse(check(nil))
        XCTAssertFalse(check("1700000000", id: nil))
        XCTAssertFalse(check("1700000000", id: ""))
        XCTAssertFalse(check("1700000000", signature: nil))
    }

    func testTheSignatureMatchesTheVectorLowercaseOnlyAndAnUnknownIDNeverPasses() throws {
        // push.md §2.9.
        let secret = Base64.encode([UInt8](repeating: 9, count: 32))
        let registration = MyttyRegistration(deviceToken: String(repeating: "a", count: 64), environment: .production, relaySecret: secret)
        let body = Array(#"{"macID":"m"}"#.utf8)
        let good = MyttyProfile.Credentials(pushID: "p", timestamp: "1700000000", signature: "b9689929193047028a1eb888c93cbf5c147c3333dc6fb0cd7bda1b02dc4af3d4")
        XCTAssertTrue(MyttyProfile.isAuthentic(good, body: body, registration: registration))
        XCTAssertFalse(MyttyProfile.isAuthentic(good, body: body, registration: nil))
        XCTAssertFalse(MyttyProfile.isAuthentic(.init(pushID: "p", timestamp: "1700000000", signature: good.signature.uppercased()), body: body, registration: registration))
        XCTAssertFalse(MyttyProfile.isAuthentic(.init(pushID: "p", timestamp: "1700000001", signature: good.signature), body: body, registration: registration))
        XCTAssertFalse(MyttyProfile.isAuthentic(good, body: Array(#"{"macID":"other"}"#.utf8), registration: registration))
        XCTAssertFalse(MyttyProfile.isAuthentic(.init(pushID: "p", timestamp: "1700000000", signature: String(good.signature.dropLast())), body: body, registration: registration))
    }

    func testThePayloadIsTheReferencesBytesAndTheAnswersItsWords() throws {
        let registration = MyttyRegistration(deviceToken: "ab", environment: .sandbox, relaySecret: "")
        let body = Array(#"{"macID":"mac-1","ciphertext":"c2VhbGVk","collapseID":"s-1","title":"Mytty","placeholder":"An agent needs you"}"#.utf8)
        let notification = try XCTUnwrap(MyttyProfile.notification(body: body, registration: registration, topic: "com.m-tkg.mytty.remote").success)
        XCTAssertEqual(String(decoding: notification.payload, as: UTF8.self),
                       #"{"aps":{"alert":{"title":"Mytty","body":"An agent needs you"},"sound":"default","mutable-content":1,"interruption-level":"time-sensitive","thread-id":"mytty-attention"},"m":"mac-1","c":"c2VhbGVk"}"#)
        XCTAssertEqual(notification.collapseID, "s-1")
        XCTAssertEqual(notification.environment, .sandbox)
        let bare = try XCTUnwrap(MyttyProfile.notification(body: Array(#"{"macID":"m","ciphertext":"c","title":7}"#.utf8), registration: registration, topic: "t").success)
        XCTAssertEqual(String(decoding: bare.payload, as: UTF8.self),
                       #"{"aps":{"alert":{"title":"Mytty","body":""},"sound":"default","mutable-content":1,"interruption-level":"time-sensitive","thread-id":"mytty-attention"},"m":"m","c":"c"}"#)
        XCTAssertNil(bare.collapseID)
        for invalid in [#"{"macID":"m"}"#, #"{"ciphertext":"c"}"#, #"{"macID":1,"ciphertext":"c"}"#, "[]", "nope"] {
            XCTAssertEqual(MyttyProfile.notification(body: Array(invalid.utf8), registration: registration, topic: "t").failure?.answer, MyttyProfile.invalidPayload, invalid)
        }
        XCTAssertEqual(MyttyProfile.answer(.rejected(status: 400, reason: "BadDeviceToken", failureClass: .tokenPermanent, body: [])).json,
                       #"{"error":"BadDeviceToken","status":400}"#)
        XCTAssertEqual(MyttyProfile.answer(.rejected(status: 500, reason: nil, failureClass: .transient, body: [])).json, #"{"error":"apns rejected","status":500}"#)
        XCTAssertEqual(MyttyProfile.answer(.unreachable("x")), PushAnswer(502, #"{"error":"apns unreachable","status":0}"#))
    }

    func testBodiesAreMeasuredInUTF16UnitsOfTheirUTF8() {
        XCTAssertFalse(BodySize.isTooLarge([UInt8](repeating: 0x61, count: 4_096)))
        XCTAssertTrue(BodySize.isTooLarge([UInt8](repeating: 0x61, count: 4_097)))
        let threeByte = Array("€".utf8)   // one UTF-16 unit
        XCTAssertFalse(BodySize.isTooLarge(Array((0..<4_096).map { _ in threeByte }.joined())))
        XCTAssertTrue(BodySize.isTooLarge(Array((0..<4_097).map { _ in threeByte }.joined())))
        let fourByte = Array("😀".utf8)   // two units
        XCTAssertTrue(BodySize.isTooLarge(Array((0..<2_049).map { _ in fourByte }.joined())))
        XCTAssertFalse(BodySize.isTooLarge(Array((0..<2_048).map { _ in fourByte }.joined())))
    }
}

final class ITermProfileTests: XCTestCase {
    private let token = String(repeating: "ab", count: 32)
    private let secret = [UInt8](repeating: 7, count: 32)

    func testRegistrationFieldsAreCheckedInTheSettledWay() {
        let hash = Hex.encode(SHA256.hash(secret))
        func parse(_ json: String) -> Result<ITermProfile.Registration, PushRefusal> { ITermProfile.registration(from: Array(json.utf8)) }
        XCTAssertEqual(parse(#"{"token":"\#(token)","secretHash":"\#(hash)"}"#).success, .init(token: token, secretHash: hash, sandbox: false))
        XCTAssertEqual(parse(#"{"token":"\#(token)","secretHash":"\#(hash)","sandbox":true}"#).success?.sandbox, true)
        XCTAssertEqual(parse("[1]").failure?.answer, ITermProfile.invalidJSON)
        XCTAssertEqual(parse(#"{"token":"\#(token.uppercased())","secretHash":"\#(hash)"}"#).failure?.answer.json, #"{"error":"invalid token"}"#)
        XCTAssertEqual(parse(#"{"token":"abc","secretHash":"\#(hash)"}"#).failure?.answer.json, #"{"error":"invalid token"}"#)
        XCTAssertEqual(parse(#"{"token":"\#(token)","secretHash":"\#(hash.uppercased())"}"#).failure?.answer.json, #"{"error":"invalid secretHash"}"#)
        XCTAssertEqual(parse(#"{"token":"\#(token)","secretHash":"\#(hash)","sandbox":"yes"}"#).failure?.answer.json, #"{"error":"invalid sandbox"}"#)
    }

    func testAnUnchangedRegistrationIsRewrittenOnlyOnceHalfItsLifeHasPassed() {
        let registration = ITermProfile.Registration(token: token, secretHash: "h", sandbox: false)
        let stored = ITermRegistration(secretHash: "h", sandbox: false, registeredAt: 1_000)
        XCTAssertTrue(ITermProfile.needsWrite(registration, stored: nil, now: .milliseconds(2_000)))
        XCTAssertFalse(ITermProfile.needsWrite(registration, stored: stored, now: WallInstant.milliseconds(1_000) + ITermProfile.rewriteAge - .milliseconds(1)))
        XCTAssertTrue(ITermProfile.needsWrite(registration, stored: stored, now: WallInstant.milliseconds(1_000) + ITermProfile.rewriteAge))
        XCTAssertTrue(ITermProfile.needsWrite(.init(token: token, secretHash: "other", sandbox: false), stored: stored, now: .milliseconds(2_000)))
        XCTAssertTrue(ITermProfile.needsWrite(.init(token: token, secretHash: "h", sandbox: true), stored: stored, now: .milliseconds(2_000)))
    }

    func testPushFieldsNonceAndPayloadsAreTheReferences() throws {
        let mutable = try XCTUnwrap(ITermProfile.push(.mutable, from: Array(#"{"token":"\#(token)","secret":"s","collapse":"00000000000000000000000000000000","nonce":"AAAA/+=="}"#.utf8)).success)
        XCTAssertEqual(mutable.notification.collapse, "00000000000000000000000000000000")
        XCTAssertEqual(String(decoding: mutable.notification.payload, as: UTF8.self),
                       #"{"aps":{"mutable-content":1,"alert":{"title":"iTerm2 Buddy","body":"Your agent has an update."}},"n":"AAAA/+=="}"#)
        let noNonce = try XCTUnwrap(ITermProfile.push(.mutable, from: Array(#"{"token":"\#(token)","collapse":"ab"}"#.utf8)).success)
        XCTAssertEqual(String(decoding: noNonce.notification.payload, as: UTF8.self),
                       #"{"aps":{"mutable-content":1,"alert":{"title":"iTerm2 Buddy","body":"Your agent has an update."}}}"#)
        XCTAssertNil(noNonce.secret, "a missing secret is refused later, as bad secret")
        for (json, field) in [(#"{"token":"\#(token)","collapse":""}"#, "collapse"), (#"{"token":"\#(token)","collapse":"AB"}"#, "collapse"),
                              (#"{"token":"\#(token)","collapse":"\#(String(repeating: "a", count: 65))"}"#, "collapse"),
                              (#"{"token":"\#(token)","collapse":"ab","nonce":"a=b"}"#, "nonce"), (#"{"token":"\#(token)","collapse":"ab","nonce":"==="}"#, "nonce"),
                              (#"{"token":"\#(token)","collapse":"ab","nonce":""}"#, "nonce"), (#"{"token":"\#(token)","collapse":"ab","nonce":7}"#, "nonce")] {
            XCTAssertEqual(ITermProfile.push(.mutable, from: Array(json.utf8)).failure?.answer.json, #"{"error":"invalid \#(field)"}"#, json)
        }
        let plain = try XCTUnwrap(ITermProfile.push(.plain, from: Array(#"{"token":"\#(token)","secret":"s","title":"T \"q\"","body":"B"}"#.utf8)).success)
        XCTAssertEqual(String(decoding: plain.notification.payload, as: UTF8.self), #"{"aps":{"alert":{"title":"T \"q\"","body":"B"},"sound":"default"}}"#)
        XCTAssertNil(plain.notification.collapse)
        XCTAssertEqual(ITermProfile.push(.plain, from: Array(#"{"token":"\#(token)","body":"B"}"#.utf8)).failure?.answer.json, #"{"error":"invalid title"}"#)
        XCTAssertEqual(ITermProfile.push(.plain, from: Array(#"{"token":"\#(token)","title":"T"}"#.utf8)).failure?.answer.json, #"{"error":"invalid body"}"#)
    }

    func testTheSecretMustBeLowercaseHexOfBytesHashingToTheStoredHash() {
        let secret = [UInt8](repeating: 0xAB, count: 32)
        let stored = ITermRegistration(secretHash: Hex.encode(SHA256.hash(secret)), sandbox: false, registeredAt: 0)
        XCTAssertTrue(ITermProfile.isSecretValid(Hex.encode(secret), for: stored))
        XCTAssertFalse(ITermProfile.isSecretValid(Hex.encode(secret).uppercased(), for: stored), "§1.1: lowercase")
        XCTAssertFalse(ITermProfile.isSecretValid(nil, for: stored))
        XCTAssertFalse(ITermProfile.isSecretValid(Hex.encode([UInt8](repeating: 8, count: 32)), for: stored))
        XCTAssertFalse(ITermProfile.isSecretValid(String(Hex.encode(secret).dropLast(2)), for: stored))
    }

    /// push.md §3.2: a token is 32–256 lowercase hex characters.
    func testTokenLengthBoundsAre32And256() {
        let hash = Hex.encode(SHA256.hash(secret))
        func registration(_ token: String) -> PushAnswer? {
            ITermProfile.registration(from: Array(#"{"token":"\#(token)","secretHash":"\#(hash)"}"#.utf8)).failure?.answer
        }
        for length in [32, 33, 255, 256] {
            XCTAssertNil(registration(String(repeating: "a", count: length)), "\(length)")
            XCTAssertTrue(ITermProfile.isValidToken(String(repeating: "0", count: length)))
        }
        for length in [31, 257] {
            XCTAssertEqual(registration(String(repeating: "a", count: length))?.json, #"{"error":"invalid token"}"#, "\(length)")
        }
        XCTAssertEqual(ITermProfile.push(.mutable, from: Array(#"{"token":"\#(String(repeating: "a", count: 257))","collapse":"ab"}"#.utf8)).failure?.answer.json,
                       #"{"error":"invalid token"}"#)
    }

    /// push.md §3.5: `collapse` is 1–64 lowercase hex characters, `nonce` 1–256 characters.
    func testCollapseAndNonceLengthBounds() {
        func push(collapse: String, nonce: String? = nil) -> Result<ITermProfile.Push, PushRefusal> {
            let nonceField = nonce.map { #","nonce":"\#($0)""# } ?? ""
            return ITermProfile.push(.mutable, from: Array(#"{"token":"\#(token)","collapse":"\#(collapse)"\#(nonceField)}"#.utf8))
        }
        XCTAssertEqual(push(collapse: "a").success?.notification.collapse, "a")
        XCTAssertEqual(push(collapse: String(repeating: "f", count: 64)).success?.notification.collapse, String(repeating: "f", count: 64))
        XCTAssertEqual(push(collapse: String(repeating: "f", count: 65)).failure?.answer.json, #"{"error":"invalid collapse"}"#)
        XCTAssertNotNil(push(collapse: "ab", nonce: "A").success)
        XCTAssertNotNil(push(collapse: "ab", nonce: String(repeating: "A", count: 254) + "==").success, "256 characters")
        XCTAssertNotNil(push(collapse: "ab", nonce: String(repeating: "A", count: 256)).success)
        XCTAssertEqual(push(collapse: "ab", nonce: String(repeating: "A", count: 257)).failure?.answer.json, #"{"error":"invalid nonce"}"#)
        XCTAssertEqual(push(collapse: "ab", nonce: String(repeating: "A", count: 255) + "==").failure?.answer.json, #"{"error":"invalid nonce"}"#, "257 with padding")
    }

    func testAPNsFailuresAreQuotedWithTheirBody() {
        XCTAssertEqual(ITermProfile.answer(.rejected(status: 400, reason: "BadDeviceToken", failureClass: .tokenPermanent, body: Array(#"{"reason":"BadDeviceToken"}"#.utf8))).json,
                       #"{"error":"APNs 400: {\"reason\":\"BadDeviceToken\"}"}"#)
        XCTAssertEqual(ITermProfile.answer(.unreachable("x")).json, #"{"error":"APNs 0: unreachable"}"#)
        XCTAssertEqual(ITermProfile.answer(.delivered).json, #"{"ok":true}"#)
    }
}

extension Result {
    var success: Success? { if case let .success(value) = self { value } else { nil } }
    var failure: Failure? { if case let .failure(error) = self { error } else { nil } }
}

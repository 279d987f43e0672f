import TetherCrypto
import TetherTestSupport
import TetherWire
import XCTest
import TetherEncoding

final class PushCryptoTests: XCTestCase {
    private let secret7 = try! RoomSecret(bytes: [UInt8](repeating: 0x07, count: 32))

    func testSealedPushNonceVector() throws {
        XCTAssertEqual(Hex.encode(PushNonce.key(for: secret7)), "fcf299a3499d9f91e2643b912a7eee7d2ccae351a037f09022c510e047961cc9")
        let sealed = PushNonce.seal("deadbeefcafe", roomSecret: secret7, aeadNonce: [UInt8](repeating: 0, count: 12))
        XCTAssertEqual(sealed, "AAAAAAAAAAAAAAAAe9ksC/pAknVECcZp/SgwKy8g15wMmLrs7EW4jg==")
        XCTAssertEqual(Hex.encode(try Base64.decode(sealed)),
                       "000000000000000000000000" + "7bd92c0bfa4092754409c669" + "fd28302b2f20d79c0c98baecec45b88e")
        XCTAssertEqual(try PushNonce.open(sealed, roomSecret: secret7), "deadbeefcafe")
    }

    func testPushNonceFailsClosedAndSealsAreFresh() throws {
        let sealed = PushNonce.seal("deadbeefcafe", roomSecret: secret7, aeadNonce: [UInt8](repeating: 0, count: 12))
        let other = try RoomSecret(bytes: [UInt8](repeating: 0x09, count: 32))
        XCTAssertThrowsError(try PushNonce.open(sealed, roomSecret: other))
        XCTAssertThrowsError(try PushNonce.open("garbage", roomSecret: secret7))
        XCTAssertThrowsError(try PushNonce.open("YWJjZGVm", roomSecret: secret7))
        XCTAssertThrowsError(try PushNonce.open("", roomSecret: secret7))
        let nonce = PushNonce.generate()
        XCTAssertTrue(Hex.isLowercase(nonce, count: 32))
        let a = PushNonce.seal(nonce, roomSecret: secret7), b = PushNonce.seal(nonce, roomSecret: secret7)
        XCTAssertNotEqual(a, b)
        XCTAssertEqual(try PushNonce.open(a, roomSecret: secret7), nonce)
        XCTAssertEqual(try PushNonce.open(b, roomSecret: secret7), nonce)
    }

    func testCollapseTokens() {
        XCTAssertEqual(CollapseToken.forChat("chat-1", roomSecret: secret7), "fe735a9a2a2ccfea051d8466ad390fb9")
        XCTAssertEqual(CollapseToken.forAlert(threadKey: "sess-1", roomSecret: secret7), "59beb7edc68c2b908774f048f6651876")
        XCTAssertEqual(CollapseToken.wakeup, "00000000000000000000000000000000")
    }

    func testMyttyRequestSignature() {
        let secret = [UInt8](repeating: 0x09, count: 32)
        XCTAssertEqual(Base64.encode(secret), "CQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQk=")
        let body = Array(#"{"macID":"m"}"#.utf8)
        let signature = MyttyPush.requestSignature(relaySecret: secret, timestamp: "1700000000", body: body)
        XCTAssertEqual(signature, "b9689929193047028a1eb888c93cbf5c147c3333dc6fb0cd7bda1b02dc4af3d4")
        XCTAssertNotEqual(MyttyPush.requestSignature(relaySecret: secret, timestamp: "1700000001", body: body), signature)
        XCTAssertNotEqual(MyttyPush.requestSignature(relaySecret: secret, timestamp: "1700000000", body: Array(#"{"macID":"other"}"#.utf8)), signature)
        XCTAssertNotEqual(MyttyPush.requestSignature(relaySecret: [UInt8](repeating: 0x0a, count: 32), timestamp: "1700000000", body: body), signature)
        XCTAssertTrue(MyttyPush.isValidRequestSignature(signature, relaySecret: secret, timestamp: "1700000000", body: body))
        XCTAssertTrue(MyttyPush.isValidRequestSignature(signature.uppercased(), relaySecret: secret, timestamp: "1700000000", body: body))
        XCTAssertFalse(MyttyPush.isValidRequestSignature(signature, relaySecret: secret, timestamp: "1700000001", body: body))
        XCTAssertFalse(MyttyPush.isValidRequestSignature(String(signature.dropLast(2)), relaySecret: secret, timestamp: "1700000000", body: body))
        XCTAssertFalse(MyttyPush.isValidRequestSignature("zz", relaySecret: secret, timestamp: "1700000000", body: body))
    }

    func testMyttyAlertSealingVector() throws {
        let key = [UInt8](repeating: 0x03, count: 32)
        let sealed = try MyttyPush.sealAlert(Array(#"{"title":"t","body":"b"}"#.utf8), deviceSecret: key, nonce: Array(0..<12))
        XCTAssertEqual(sealed, "AAECAwQFBgcICQoLPJMCJbuMOCwL5xKEy8vlmtupXAQbvYBlK2S/leavaU6Z1sLgtAuzqQ==")
        XCTAssertEqual(Hex.encode(try Base64.decode(sealed)),
                       "000102030405060708090a0b3c930225bb8c382c0be71284cbcbe59adba95c041bbd80652b64bf95e6af694e99d6c2e0b40bb3a9")
        XCTAssertEqual(String(decoding: try MyttyPush.openAlert(sealed, deviceSecret: key), as: UTF8.self), #"{"title":"t","body":"b"}"#)
        XCTAssertThrowsError(try MyttyPush.openAlert(sealed, deviceSecret: [UInt8](repeating: 0x04, count: 32)))
        XCTAssertNotEqual(try MyttyPush.sealAlert([1], deviceSecret: key), try MyttyPush.sealAlert([1], deviceSecret: key))
        XCTAssertThrowsError(try MyttyPush.sealAlert([1], deviceSecret: [1, 2, 3]))
    }
}

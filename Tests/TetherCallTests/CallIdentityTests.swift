import TetherCall
import TetherCrypto
import TetherWire
import TetherSync
import XCTest
import TetherEncoding

/// The identity of signaling.md §3 against the §12 vectors: the ID, the agreement key, the
/// identity signature, and the registration and signal signatures it makes.
final class CallIdentityTests: XCTestCase {
    static func alice() -> CallIdentity {
        try! CallIdentity(stored: [UInt8](repeating: 0xA1, count: 32) + [UInt8](repeating: 0xA2, count: 32))
    }

    static func bob() -> CallIdentity {
        try! CallIdentity(stored: [UInt8](repeating: 0xB1, count: 32) + [UInt8](repeating: 0xB2, count: 32))
    }

    func testStoredKeysGiveTheVectorIDAgreementKeyAndIdentitySignature() {
        let alice = Self.alice()
        XCTAssertEqual(alice.id.canonical, "BC7CBCB5636375FA1D82434D466724D92377F53B980695DD49D26D0CE12205A5")
        XCTAssertEqual(Base64.encode(alice.agreementPublicKey), "PFxs4t2Z4Q0sPeBddzqhXj5tlx7U5BOJyTtLvdoXchI=")
        XCTAssertEqual(Base64.encode(alice.identitySignature),
                       "+iHvQBv1lRcBf3NP7Ikc6XP6rk4WIPi0CI4EQYLbKLUnF+Q1Mcfgg2bOcpOJ96MniQqfJUOJrmSHtlLv9gIzBA==")
        XCTAssertEqual(Base64.encode(Self.bob().identitySignature),
                       "v0qL5E6KFoiSF9N9BFsgF6C9V/m2aspkpcq8XwLm8QyBx4Myccpex0LfEMw/FDTzqKoHy8oWLXkp+AqGOmJtAA==")
        XCTAssertEqual(alice.stored, [UInt8](repeating: 0xA1, count: 32) + [UInt8](repeating: 0xA2, count: 32))
    }

    func testRegistrationAndSignalSignaturesMatchTheVectors() {
        let alice = Self.alice(), bob = Self.bob()
        let register = alice.register(challenge: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
        XCTAssertEqual(Base64.encode(register.signature),
                       "vxWMP5xC1mNuXW2j8MSGyxDZEYKPKcpn1UbwX+WaUzYCF20I/oPsd97RE9qCxKF7zMnI01/dlNCUQYNNlL9uCg==")
        let call = CallUUID("6f1c2b8a-3d4e-4f50-9a61-7b8c9d0e1f20")!
        let channel = bob.signal(.channel, to: alice.id, call: call, body: "e30=")
        XCTAssertEqual(Base64.encode(channel.signature),
                       "ZvDNeMl7trkdBBuMXVUhaHP8WlDhYH5q+WumZ0RsFdO+eimW0JghzyS8NLoa/S4ah9EjE9W7cPADmOoEue9RDA==")
        XCTAssertTrue(IdentityVerification.isAuthentic(channel))
        let forged = SignalMessage(kind: .close, from: channel.from, to: channel.to, call: call, body: channel.body, signature: channel.signature)
        XCTAssertFalse(IdentityVerification.isAuthentic(forged))
    }

    func testAPeersAgreementKeyIsUsedOnlyWhenItsSignatureVerifiesUnderTheSelectedID() {
        let alice = Self.alice(), bob = Self.bob()
        XCTAssertNotNil(IdentityVerification.agreementKey(alice.agreementPublicKey, signature: alice.identitySignature,
                                                          of: alice.id, local: bob.agreementKey))
        // Alice's key presented under Bob's ID, or with one bit of the signature flipped: refused.
        XCTAssertNil(IdentityVerification.agreementKey(alice.agreementPublicKey, signature: alice.identitySignature,
                                                       of: bob.id, local: bob.agreementKey))
        var flipped = alice.identitySignature
        flipped[10] ^= 1
        XCTAssertNil(IdentityVerification.agreementKey(alice.agreementPublicKey, signature: flipped, of: alice.id, local: bob.agreementKey))
    }

    func testAnAllZeroOrLowOrderAgreementKeyIsRefusedEvenWhenSigned() {
        let signer = Ed25519.PrivateKey()
        let bob = Self.bob()
        // 0 and a point of order 8 (RFC 7748 test point): a signature cannot make them usable.
        for key in [[UInt8](repeating: 0, count: 32),
                    try! Hex.decode("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800")] {
            let signature = signer.signature(for: SignalingTranscript.identityBinding(agreementKey: key))
            XCTAssertNil(IdentityVerification.agreementKey(key, signature: signature, of: SignalingID(key: signer.publicKey.rawRepresentation),
                                                           local: bob.agreementKey))
        }
    }

    func testStoredBytesOfTheWrongLengthAreRefused() {
        XCTAssertThrowsError(try CallIdentity(stored: [UInt8](repeating: 1, count: 63)))
        let fresh = CallIdentity()
        XCTAssertEqual(try CallIdentity(stored: fresh.stored).id, fresh.id)
    }
}

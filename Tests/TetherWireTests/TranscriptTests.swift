import TetherCrypto
import TetherTestSupport
import TetherWire
import XCTest
import TetherEncoding

final class TranscriptTests: XCTestCase {
    private let exampleOrigin = "https://relay.example.com"
    private var roomA: RoomName { RoomName(header: String(repeating: "a", count: 64))! }

    /// client.md §7: roomSecret 5a×32, nonce 11×32, room a×64, origin https://relay.example.com.
    func testClientJoinAndDeleteVectors() throws {
        let secret = try RoomSecret(bytes: [UInt8](repeating: 0x5a, count: 32))
        let key = secret.joinSigningKey()
        XCTAssertEqual(Hex.encode(key.seed), "2ed296b4ce48b25a674e1e9a11747e1c25947f1f18b999ea7c563cf7f545b458")
        XCTAssertEqual(Hex.encode(secret.verifier), "e8ae9d508920b51e35eefa8feaa2bd51cdb2fc0f3fa5dedbfe290ea047f914db")
        XCTAssertEqual(Base64.encode(secret.verifier), "6K6dUIkgtR417vqP6qK9Uc2y/A8/pd7b/ikOoEf5FNs=")

        let nonce = [UInt8](repeating: 0x11, count: 32)
        let phone = JoinTranscript(role: .phone, nonce: nonce, room: roomA, origin: exampleOrigin)
        XCTAssertEqual(Hex.encode(phone.bytes),
                       "00000011697465726d322d72656c61792d6a6f696e0000000101000000010200000020" + String(repeating: "11", count: 32)
                       + "00000040" + String(repeating: "61", count: 64) + "0000001968747470733a2f2f72656c61792e6578616d706c652e636f6d")
        let phoneSignature = key.signature(for: phone.bytes)
        XCTAssertEqual(Hex.encode(phoneSignature),
                       "35e708e19ea014e154bfaab8c87ec62c6735ffbcde09da96718e66e7c00bb4006c934b7e02743a821f55865a92360c1f26e34a357dfc35ad87fa98754eb8950e")
        XCTAssertEqual(Base64.encode(phoneSignature), "NecI4Z6gFOFUv6q4yH7GLGc1/7zeCdqWcY5m58ALtABsk0t+AnQ6gh9VhlqSNgwfJuNKNX38Na2H+ph1TriVDg==")
        let mac = JoinTranscript(role: .mac, nonce: nonce, room: roomA, origin: exampleOrigin)
        XCTAssertEqual(Hex.encode(key.signature(for: mac.bytes)),
                       "d4b0091484aa081a1dd8abb2f1a70e222b52004f8ab2816ccb085828ee037c3962572a180e9aaf47d2805e6c323b6cfa3ae4885cea460c15ce721f952d67a80a")

        let delete = DeleteTranscript(challenge: nonce, room: roomA, origin: exampleOrigin)
        XCTAssertEqual(Hex.encode(delete.bytes),
                       "00000013697465726d322d72656c61792d64656c6574650000000101" + "00000020" + String(repeating: "11", count: 32)
                       + "00000040" + String(repeating: "61", count: 64) + "0000001968747470733a2f2f72656c61792e6578616d706c652e636f6d")
        XCTAssertEqual(Hex.encode(key.signature(for: delete.bytes)),
                       "ffb5a6e8901614e1b997e971fceb10bc1f1f3bc158328c6df31734d7277b6b1b2c670cbfd78fc2ec4a24bebe7d8ca400de5e5a62dcc0cc87cbbda9cd16a95400")
    }

    /// relay.md §3.6: key from seed 01×32, nonce 00…1f, room a×64, origin https://relay.example.
    func testRelayTranscriptVectors() throws {
        let origin = "https://relay.example"
        let nonce = Array(UInt8(0)..<32)
        XCTAssertEqual(Base64.encode(nonce), "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
        let key = try Ed25519.PrivateKey(seed: [UInt8](repeating: 1, count: 32))
        XCTAssertEqual(Base64.encode(key.publicKey.rawRepresentation), "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w=")

        let mac = JoinTranscript(role: .mac, nonce: nonce, room: roomA, origin: origin)
        XCTAssertEqual(mac.bytes.count, 160)
        XCTAssertEqual(mac.bytes.count, 139 + origin.utf8.count)
        XCTAssertEqual(Hex.encode(mac.bytes),
                       "00000011697465726d322d72656c61792d6a6f696e" + "0000000101" + "0000000101"
                       + "00000020000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f" + "00000040" + String(repeating: "61", count: 64)
                       + "00000015" + "68747470733a2f2f72656c61792e6578616d706c65")
        let phone = JoinTranscript(role: .phone, nonce: nonce, room: roomA, origin: origin)
        XCTAssertEqual(Hex.encode(phone.bytes), Hex.encode(mac.bytes).replacingOccurrences(of: "00000001010000000101", with: "00000001010000000102"))
        XCTAssertEqual(Base64.encode(key.signature(for: mac.bytes)),
                       "L8SYKRURuoZS1+iSdJ7hDEjeQSBjBOkTTG6DA+US/DrCVH9oNtrbkFyE9+iCEV3xIeX3H/zkibKX2Hp2M7JcCA==")
        XCTAssertEqual(Base64.encode(key.signature(for: phone.bytes)),
                       "DzwIolF3wdK3dLLj/lBlxFnaUHwC80FrTeVo005N8UAJQuLZ8bo8m5TelIxYtC8cpPG5c4uAf0tjqeuwMNP1BQ==")

        let delete = DeleteTranscript(challenge: nonce, room: roomA, origin: origin)
        XCTAssertEqual(delete.bytes.count, 157)
        XCTAssertEqual(Hex.encode(delete.bytes),
                       "00000013697465726d322d72656c61792d64656c657465" + "0000000101" + "00000020" + Hex.encode(nonce)
                       + "00000040" + String(repeating: "61", count: 64) + "00000015" + Hex.encode(Array(origin.utf8)))
        XCTAssertEqual(Base64.encode(key.signature(for: delete.bytes)),
                       "leoMO+Tn8Gtxq/vE/keuQeZDfLylRbWE2sfYgpA4Lw03+eWYF7ExEFUem0ksxIR6e9J8WNhvNqapZpSa28HaDw==")

        let preimage = AttestClientData.preimage(challenge: nonce, origin: origin)
        XCTAssertEqual(preimage.count, 84)
        XCTAssertEqual(Hex.encode(preimage), "00000013697465726d322d72656c61792d617474657374" + "00000020" + Hex.encode(nonce) + "00000015" + Hex.encode(Array(origin.utf8)))
        XCTAssertEqual(Hex.encode(AttestClientData.hash(challenge: nonce, origin: origin)),
                       "01968d22bab9bcf66b102e9713fffe30ce9d4612cbc50d65e59c9e485d0360a9")
    }

    func testClientDataHashOfHelloChallenge() throws {
        let challenge = try Base64.decodeForgiving("aGVsbG8=")
        XCTAssertEqual(Hex.encode(AttestClientData.hash(challenge: challenge, origin: "https://relay.example")),
                       "61b5302d10e36cccdfb95cfe46800ac27d18d282176c5578675f4b3726bff4d4")
    }

    func testSignaturesDoNotVerifyAcrossRoomsOriginsNoncesOrRoles() throws {
        let key = RoomSecret.generate().joinSigningKey()
        let nonce = SecureRandom.bytes(32)
        let signed = JoinTranscript(role: .phone, nonce: nonce, room: roomA, origin: exampleOrigin)
        let signature = key.signature(for: signed.bytes)
        XCTAssertTrue(key.publicKey.isValidSignature(signature, for: signed.bytes))
        let roomB = RoomName(header: String(repeating: "b", count: 64))!
        let others = [
            JoinTranscript(role: .phone, nonce: nonce, room: roomB, origin: exampleOrigin).bytes,
            JoinTranscript(role: .phone, nonce: nonce, room: roomA, origin: exampleOrigin + "/").bytes,
            JoinTranscript(role: .phone, nonce: SecureRandom.bytes(32), room: roomA, origin: exampleOrigin).bytes,
            JoinTranscript(role: .mac, nonce: nonce, room: roomA, origin: exampleOrigin).bytes,
            DeleteTranscript(challenge: nonce, room: roomA, origin: exampleOrigin).bytes,
        ]
        for other in others { XCTAssertFalse(key.publicKey.isValidSignature(signature, for: other)) }
        XCTAssertThrowsError(try Ed25519.PublicKey(rawRepresentation: [UInt8](repeating: 1, count: 5)), "a 5-byte verifier")
        XCTAssertThrowsError(try RoomSecret(bytes: [1, 2, 3]))
    }

    func testSASVectorsAndEntryRules() throws {
        XCTAssertEqual(Hex.encode(try HKDF.deriveKey(inputKeyMaterial: [UInt8](repeating: 0x77, count: 32), info: Array("iterm2-sas-v1".utf8), outputByteCount: 8)),
                       "3c89b7c5d40c3fb3")
        XCTAssertEqual(SAS.derive(handshakeHash: [UInt8](repeating: 0x77, count: 32)), "048883", "leading zero kept")
        let h = try Hex.decode("abed9f5c307c4d181a07a70e657287736b38e6591c30c251c6be4b77b48b2444")
        XCTAssertEqual(Hex.encode(try HKDF.deriveKey(inputKeyMaterial: h, info: Array("iterm2-sas-v1".utf8), outputByteCount: 8)), "4bc379afd87b7f20")
        XCTAssertEqual(SAS.derive(handshakeHash: h), "382944")

        XCTAssertTrue(SAS.matches(entry: "048883", expected: "048883"))
        XCTAssertTrue(SAS.matches(entry: "  048883\n", expected: "048883"), "surrounding whitespace trimmed")
        XCTAssertFalse(SAS.matches(entry: "048884", expected: "048883"))
        XCTAssertFalse(SAS.matches(entry: "48883", expected: "048883"))
        XCTAssertFalse(SAS.matches(entry: "0488830", expected: "048883"))
        XCTAssertFalse(SAS.matches(entry: "048 883", expected: "048883"))
        XCTAssertFalse(SAS.matches(entry: "04888３", expected: "048883"), "non-ASCII digit")
        XCTAssertFalse(SAS.isComplete("12345a"))
    }

    func testEndToEndPairingVectorKeysRoomAndPrologue() throws {
        let mac = try X25519.PrivateKey(rawRepresentation: try Hex.decode("a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"))
        XCTAssertEqual(Hex.encode(mac.publicKey.rawRepresentation), "605a725d2a4adfeeb1a29e17edd621c1b7593ee8cdbc44ac6c4ab6e2f805d23c")
        XCTAssertEqual(Base64.encodeURL(mac.publicKey.rawRepresentation), "YFpyXSpK3-6xop4X7dYhwbdZPujNvESsbEq24vgF0jw")
        let phone = try X25519.PrivateKey(rawRepresentation: try Hex.decode("202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"))
        XCTAssertEqual(Hex.encode(phone.publicKey.rawRepresentation), "358072d6365880d1aeea329adf9121383851ed21a28e3b75e965d0d2cd166254")
        let link = try PairingLink(transport: .direct(relayOrigin: "https://relay.example.com"),
                                   responderStaticKey: mac.publicKey.rawRepresentation, pairingID: "0123456789abcdef")
        XCTAssertEqual(link.roomName.hex, "029e3efc3d0422b4622a9e3625ee7a8834a4f67a1789c3531b84ba1fdeb2c4b5")
        XCTAssertEqual(link.roomName.bucket, 50357)
        XCTAssertEqual(Hex.encode(link.noisePrologue), "697465726d322d636f6d70616e696f6e2f76312f7069643a30313233343536373839616263646566")
        XCTAssertEqual(Hex.encode(PairingLink.noisePrologue(pairingID: "f7c2a1b9")),
                       "697465726d322d636f6d70616e696f6e2f76312f7069643a6637633261316239")
    }
}

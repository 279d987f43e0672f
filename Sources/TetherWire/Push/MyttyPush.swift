import TetherCrypto
import TetherEncoding

/// The Mytty push relay's cryptography (push.md §2.4, §2.8).
public enum MyttyPush {
    /// The request signature: lowercase hex of HMAC-SHA256(relaySecret, "<timestamp>.<body>"),
    /// over the exact body bytes sent.
    public static func requestSignature(relaySecret: [UInt8], timestamp: String, body: [UInt8]) -> String {
        Hex.encode(HMAC.authenticationCode(.sha256, key: relaySecret, data: Array("\(timestamp).".utf8) + body))
    }

    /// Checks a received signature (hex, either case) in constant time.
    public static func isValidRequestSignature(_ signature: String, relaySecret: [UInt8], timestamp: String, body: [UInt8]) -> Bool {
        guard let received = try? Hex.decode(signature), received.count == 32 else { return false }
        let expected = HMAC.authenticationCode(.sha256, key: relaySecret, data: Array("\(timestamp).".utf8) + body)
        return constantTimeEquals(received, expected)
    }

    public enum SealFailure: Error, Equatable, Sendable {
        case invalidKey
        case cannotOpen
    }

    /// Seals an alert (the `PushRelayAlert` JSON) for the phone under the 32-byte device secret:
    /// AES-256-GCM, fresh random 12-byte nonce, no associated data; standard base64 of
    /// nonce ‖ ciphertext ‖ tag (CryptoKit's combined form).
    public static func sealAlert(_ plaintext: [UInt8], deviceSecret: [UInt8]) throws(SealFailure) -> String {
        try sealAlert(plaintext, deviceSecret: deviceSecret, nonce: SecureRandom.bytes(AEAD.nonceByteCount))
    }

    /// Seals with a caller-chosen nonce (test vectors only).
    public static func sealAlert(_ plaintext: [UInt8], deviceSecret: [UInt8], nonce: [UInt8]) throws(SealFailure) -> String {
        guard let sealed = try? AEAD.seal(.aes256GCM, key: deviceSecret, nonce: nonce, plaintext: plaintext) else { throw .invalidKey }
        return Base64.encode(nonce + sealed)
    }

    public static func openAlert(_ sealed: String, deviceSecret: [UInt8]) throws(SealFailure) -> [UInt8] {
        guard let bytes = try? Base64.decode(sealed), bytes.count >= AEAD.nonceByteCount + AEAD.tagByteCount else { throw .cannotOpen }
        guard let plaintext = try? AEAD.open(.aes256GCM, key: deviceSecret, nonce: Array(bytes[..<AEAD.nonceByteCount]),
                                             combined: bytes[AEAD.nonceByteCount...]) else { throw .cannotOpen }
        return plaintext
    }
}

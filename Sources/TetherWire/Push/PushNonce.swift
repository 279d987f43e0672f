import TetherCrypto
import TetherEncoding

/// The sealed push nonce of the iTerm2 push path (client.md §15): the only secret an iTerm2
/// push carries. The Mac seals a 32-hex-character nonce under a key derived from `roomSecret`;
/// the phone's extension opens it and echoes the plaintext to prove the wake-up was solicited.
public enum PushNonce {
    public enum Failure: Error, Equatable, Sendable {
        /// Not base64, too short, wrong key, or altered.
        case cannotOpen
    }

    /// Wire: standard base64 of AEAD nonce (12) ‖ ciphertext ‖ tag (16).
    static let overhead = AEAD.nonceByteCount + AEAD.tagByteCount

    /// key = HKDF-SHA256(roomSecret, salt none, info "companion-push-nonce", 32).
    public static func key(for secret: RoomSecret) -> [UInt8] { secret.derive(info: "companion-push-nonce") }

    /// A fresh nonce: 16 random bytes as 32 lowercase hex characters.
    public static func generate() -> String { Hex.encode(SecureRandom.bytes(16)) }

    /// Seals `plaintext` (the ASCII nonce) with a fresh random AEAD nonce.
    public static func seal(_ plaintext: String, roomSecret: RoomSecret) -> String {
        seal(plaintext, roomSecret: roomSecret, aeadNonce: SecureRandom.bytes(AEAD.nonceByteCount))
    }

    /// Seals with a caller-chosen AEAD nonce (test vectors only: reusing one leaks plaintext).
    public static func seal(_ plaintext: String, roomSecret: RoomSecret, aeadNonce: [UInt8]) -> String {
        // The key and nonce lengths are fixed here, so sealing cannot fail.
        let sealed = try! AEAD.seal(.chaCha20Poly1305, key: key(for: roomSecret), nonce: aeadNonce, plaintext: Array(plaintext.utf8))
        return Base64.encode(aeadNonce + sealed)
    }

    /// Opens a sealed nonce and returns its plaintext.
    public static func open(_ sealed: String, roomSecret: RoomSecret) throws(Failure) -> String {
        guard let bytes = try? Base64.decode(sealed), bytes.count >= overhead else { throw .cannotOpen }
        let nonce = Array(bytes[..<AEAD.nonceByteCount])
        guard let plaintext = try? AEAD.open(.chaCha20Poly1305, key: key(for: roomSecret), nonce: nonce,
                                             combined: bytes[AEAD.nonceByteCount...]) else { throw .cannotOpen }
        return String(decoding: plaintext, as: UTF8.self)
    }
}

/// APNs collapse ids of the iTerm2 push path (client.md §15).
public enum CollapseToken {
    /// The collapse id for protocol revision ≥ 2 peers: one wake-up, whatever the chat.
    public static let wakeup = String(repeating: "0", count: 32)

    /// The legacy per-chat token: first 16 bytes of HMAC-SHA256(roomSecret, UTF-8 chatID), hex.
    public static func forChat(_ chatID: String, roomSecret: RoomSecret) -> String {
        Hex.encode(HMAC.authenticationCode(.sha256, key: roomSecret.bytes, data: Array(chatID.utf8)).prefix(16))
    }

    /// The token for an alert thread: the chat token of `alert:` + threadKey.
    public static func forAlert(threadKey: String, roomSecret: RoomSecret) -> String {
        forChat("alert:" + threadKey, roomSecret: roomSecret)
    }
}

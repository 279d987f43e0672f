import TetherCrypto

/// A full Noise protocol: `Noise_<pattern>_<DH>_<cipher>_<hash>`.
public struct NoiseProtocol: Sendable, Hashable, CustomStringConvertible {
    public enum Cipher: String, Sendable, Hashable {
        case chaChaPoly = "ChaChaPoly"
        case aesGCM = "AESGCM"

        var aead: AEAD.Algorithm {
            switch self {
            case .chaChaPoly: .chaCha20Poly1305
            case .aesGCM: .aes256GCM
            }
        }
    }

    public enum Hash: String, Sendable, Hashable {
        case sha256 = "SHA256"
        case sha512 = "SHA512"
        case blake2s = "BLAKE2s"
        case blake2b = "BLAKE2b"

        var function: HashFunction {
            switch self {
            case .sha256: .sha256
            case .sha512: .sha512
            case .blake2s: .blake2s
            case .blake2b: .blake2b
            }
        }
    }

    /// The only DH function supported.
    public static let dh = "25519"

    public let pattern: HandshakePattern
    public let cipher: Cipher
    public let hash: Hash

    public init(pattern: HandshakePattern, cipher: Cipher, hash: Hash) {
        self.pattern = pattern
        self.cipher = cipher
        self.hash = hash
    }

    /// Parses a standard name; anything not supported (other DH functions, PSK or fallback
    /// modifiers, deferred patterns) throws `unsupportedProtocol` with the name.
    public init(name: String) throws(NoiseError) {
        let parts = name.split(separator: "_", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 5, parts[0] == "Noise",
              let pattern = HandshakePattern.all[parts[1]],
              parts[2] == Self.dh,
              let cipher = Cipher(rawValue: parts[3]),
              let hash = Hash(rawValue: parts[4]) else { throw .unsupportedProtocol(name) }
        self.init(pattern: pattern, cipher: cipher, hash: hash)
    }

    public var name: String { "Noise_\(pattern.name)_\(Self.dh)_\(cipher.rawValue)_\(hash.rawValue)" }
    public var description: String { name }

    /// The companion pairing channel.
    public static let companionXK = try! NoiseProtocol(name: "Noise_XK_25519_ChaChaPoly_BLAKE2s")
}

public import TetherCrypto
import TetherWire
import TetherEncoding

/// The SDP `a=fingerprint` of a DTLS certificate (RFC 8122 §5, as JSEP uses it): the hash
/// function's name and the hash of the certificate's DER as uppercase hex pairs joined by `:`.
/// Tether sends and accepts `sha-256` only: it is what every WebRTC stack offers, and a weaker
/// hash would let a forged certificate pass the one check that binds DTLS to the signed SDP.
public struct CertificateFingerprint: Sendable, Hashable, CustomStringConvertible {
    public static let algorithm = "sha-256"
    public let digest: [UInt8]

    public init(of certificate: Certificate) { digest = SHA256.hash(certificate.derRepresentation) }

    public init(digest: [UInt8]) {
        precondition(digest.count == 32, "a sha-256 fingerprint is 32 bytes")
        self.digest = digest
    }

    public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        /// Another hash function than sha-256 (compared case-insensitively, RFC 8122 §5).
        case unsupportedAlgorithm(String)
        /// Not 32 hex pairs joined by single colons.
        case malformed

        public var description: String {
            switch self {
            case let .unsupportedAlgorithm(name): "fingerprint hash \(name.prefix(32)) is not supported (sha-256 only)"
            case .malformed: "fingerprint is not 32 colon-separated hex pairs"
            }
        }
    }

    /// The attribute's value, `sha-256 AB:CD:…`: the name in any case, one space, then 32 pairs
    /// of hex digits (either case) separated by `:`.
    public static func parse(_ value: String) throws(ParseError) -> CertificateFingerprint {
        let parts = value.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 2 else { throw .malformed }
        guard parts[0].lowercased() == algorithm else { throw .unsupportedAlgorithm(String(parts[0])) }
        let pairs = parts[1].split(separator: ":", omittingEmptySubsequences: false)
        guard pairs.count == 32 else { throw .malformed }
        var digest: [UInt8] = []
        digest.reserveCapacity(32)
        for pair in pairs {
            let bytes = Array(pair.utf8)
            guard bytes.count == 2, let high = Hex.value(of: bytes[0]), let low = Hex.value(of: bytes[1]) else { throw .malformed }
            digest.append(high << 4 | low)
        }
        return CertificateFingerprint(digest: digest)
    }

    /// `sha-256 AB:CD:…` as sent in SDP.
    public var value: String {
        Self.algorithm + " " + digest.map { byte in
            let hex = String(byte, radix: 16, uppercase: true)
            return hex.count == 1 ? "0" + hex : hex
        }.joined(separator: ":")
    }

    public var description: String { value }

    /// Whether `certificate` (the peer's, from the DTLS handshake) is the one this fingerprint
    /// names; compared in constant time.
    public func matches(_ certificate: Certificate) -> Bool {
        constantTimeEquals(digest, SHA256.hash(certificate.derRepresentation))
    }
}

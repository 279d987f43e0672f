import TetherCrypto

/// ICE's short-term credentials, `a=ice-ufrag` and `a=ice-pwd` (RFC 8839 §5.4): 4…256 and
/// 22…256 ice-chars. Tether draws its own rather than taking libnice's, so the SDP can be
/// written without waiting on the ICE thread.
public struct ICECredentials: Sendable, Hashable, CustomStringConvertible {
    public let ufrag: String
    public let password: String

    public enum ValidationError: Error, Equatable, Sendable, CustomStringConvertible {
        case malformedUfrag
        case malformedPassword

        public var description: String {
            switch self {
            case .malformedUfrag: "ICE ufrag is not 4 to 256 ice-chars"
            case .malformedPassword: "ICE password is not 22 to 256 ice-chars"
            }
        }
    }

    public init(ufrag: String, password: String) throws(ValidationError) {
        guard (4...256).contains(ufrag.utf8.count), ufrag.utf8.allSatisfy(ICECandidate.isICECharacter) else { throw .malformedUfrag }
        guard (22...256).contains(password.utf8.count), password.utf8.allSatisfy(ICECandidate.isICECharacter) else { throw .malformedPassword }
        self.init(checked: ufrag, password)
    }

    private init(checked ufrag: String, _ password: String) {
        self.ufrag = ufrag
        self.password = password
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Fresh credentials: a 48-bit ufrag and a 144-bit password (RFC 8445 §5.3 asks for at least
    /// 24 and 128 bits), 6 bits per ice-char.
    public static func random() -> ICECredentials {
        func draw(_ count: Int) -> String {
            String(decoding: SecureRandom.bytes(count).map { alphabet[Int($0 & 0x3f)] }, as: UTF8.self)
        }
        return ICECredentials(checked: draw(8), draw(24))
    }

    /// The ufrag only: the password never appears in logs.
    public var description: String { "ICECredentials(ufrag: \(ufrag))" }
}

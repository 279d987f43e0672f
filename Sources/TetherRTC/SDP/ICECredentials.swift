import TetherCrypto

/// An ICE agent's username fragment and password (RFC 8839 §5.4), as `a=ice-ufrag` and
/// `a=ice-pwd` carry them. The ufrag's four characters and the password's 22 (of `ice-char`) are
/// the minimums that give 24 and 128 bits of randomness; 256 is the grammar's ceiling.
public struct ICECredentials: Sendable, Hashable, CustomStringConvertible {
    public static let ufragLength = 4...256
    public static let pwdLength = 22...256

    public let ufrag: String
    public let pwd: String

    public enum Failure: Error, Equatable, Sendable {
        case invalidUfrag
        case invalidPwd
    }

    public init(ufrag: String, pwd: String) throws(Failure) {
        guard SDPGrammar.isICEString(ufrag[...], length: Self.ufragLength) else { throw .invalidUfrag }
        guard SDPGrammar.isICEString(pwd[...], length: Self.pwdLength) else { throw .invalidPwd }
        self.ufrag = ufrag
        self.pwd = pwd
    }

    /// Credentials the parser has already matched against the grammar.
    init(checked ufrag: String, pwd: String) {
        self.ufrag = ufrag
        self.pwd = pwd
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Fresh local credentials: a 48-bit ufrag and a 144-bit password (RFC 8445 §5.3 asks for at
    /// least 24 and 128 bits), 6 bits per ice-char. Tether draws its own rather than taking
    /// libnice's, so the SDP can be written without waiting on the ICE thread.
    public static func random() -> ICECredentials {
        func draw(_ count: Int) -> String {
            String(decoding: SecureRandom.bytes(count).map { alphabet[Int($0 & 0x3f)] }, as: UTF8.self)
        }
        return ICECredentials(checked: draw(8), pwd: draw(24))
    }

    /// The ufrag only: the password never appears in logs.
    public var description: String { "ICECredentials(ufrag: \(ufrag))" }
}

public import TetherCrypto
public import TetherWire
public import TetherEncoding

/// coturn's REST credentials (signaling.md §8.2; draft-uberti-behave-turn-rest-00 as coturn
/// implements `use-auth-secret`): username `<expiry>:<32 random hex>`, password
/// base64(HMAC-SHA1(secret, username)). The random user keeps IDs out of the TURN server's logs.
public struct CoturnIssuer: TURNIssuer {
    /// The `turn:`/`turns:` URLs the credentials are for.
    public let turnURLs: [String]
    /// The `stun:` URLs handed out beside them.
    public let stunURLs: [String]
    private let secret: [UInt8]
    private let random: @Sendable (Int) -> [UInt8]

    public var isLimited: Bool { true }

    /// An issuer signing usernames with coturn's `secret`; `random` makes the username's random
    /// part (tests fix it).
    public init(secret: String, turnURLs: [String], stunURLs: [String], random: @escaping @Sendable (Int) -> [UInt8] = { SecureRandom.bytes($0) }) {
        self.secret = Array(secret.utf8)
        self.turnURLs = turnURLs
        self.stunURLs = stunURLs
        self.random = random
    }

    /// The password coturn derives for `username` under `secret`.
    public static func password(secret: some BytesView, username: String) -> String {
        Base64.encode(HMAC.authenticationCode(.sha1, key: secret, data: Array(username.utf8)))
    }

    public func issue(now: Int64, completion: @escaping @Sendable (Result<Issued, IssuanceFailure>) -> Void) -> (any IssuanceHandle)? {
        let expiresAt = now + TURNCredentialLifetime.seconds
        let username = "\(expiresAt):\(Hex.encode(random(16)))"
        let credential = Self.password(secret: secret, username: username)
        // §13.1: the STUN entries first (no credentials), then the TURN entries (with them).
        let servers = ICEServer.split(urls: stunURLs) + ICEServer.split(urls: turnURLs, username: username, credential: credential)
        completion(.success(Issued(iceServers: servers, expiresAt: expiresAt)))
        return nil
    }
}

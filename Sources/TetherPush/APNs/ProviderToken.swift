import Foundation
import Synchronization
public import TetherCrypto
import TetherSync
import TetherWire
import TetherEncoding

/// The APNs provider authentication token (push.md §4.4): a JWT signed ES256 with the team's
/// `.p8` key, `{"alg":"ES256","kid":<key id>}.{"iss":<team id>,"iat":<seconds>}`, each part compact
/// JSON in base64url without padding, the signature the 64-byte raw r‖s.
public struct ProviderToken: Sendable, Equatable {
    /// The compact form that follows `bearer ` in the `authorization` header.
    public let compact: String
    /// Its `iat` (wall clock, seconds since 1970).
    public let issuedAt: UInt64

    /// Mints a token. ECDSA is randomised: two tokens for the same instant differ in signature.
    public static func mint(key: P256.PrivateKey, keyID: String, teamID: String, issuedAt: UInt64) throws(CryptoError) -> ProviderToken {
        let input = signingInput(keyID: keyID, teamID: teamID, issuedAt: issuedAt)
        let signature = try key.signature(for: Array(input.utf8))
        return ProviderToken(compact: input + "." + Base64.encodeURL(signature.rawRepresentation), issuedAt: issuedAt)
    }

    /// `<header>.<claims>`, the bytes the signature covers. The key id and team id are ten
    /// characters of [A-Z0-9] (checked at start-up), so they need no JSON escaping.
    public static func signingInput(keyID: String, teamID: String, issuedAt: UInt64) -> String {
        Base64.encodeURL(Array(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8)) + "."
            + Base64.encodeURL(Array(#"{"iss":"\#(teamID)","iat":\#(issuedAt)}"#.utf8))
    }
}

/// The one provider token of a process (push.md §1.1, §4.4): minted lazily on the first push,
/// shared by both profiles and every connection, reused until it is 45 minutes old, and minted
/// again sooner only in answer to `ExpiredProviderToken`. Exactly one token is minted however
/// many pushes ask at once: minting happens under the lock.
public final class ProviderTokenIssuer: Sendable {
    /// Reused this long (the references' 45 minutes): inside Apple's 20–60 minute window with a
    /// quarter of an hour to spare for clock skew between the relay and APNs.
    public static let lifetime: UInt64 = 45 * 60

    /// The `.p8` key's id (`APNS_KEY_ID`), the token's `kid`.
    public let keyID: String
    /// The Apple team id (`APNS_TEAM_ID`), the token's `iss`.
    public let teamID: String
    private let key: P256.PrivateKey
    private let current = Locked<ProviderToken?>(nil)
    private let mints = Atomic<Int>(0)

    /// An issuer signing with `key`; nothing is minted until the first push asks.
    public init(key: P256.PrivateKey, keyID: String, teamID: String) {
        self.key = key
        self.keyID = keyID
        self.teamID = teamID
    }

    /// The token to send now (`now` in wall-clock seconds).
    public func token(now: UInt64) throws(CryptoError) -> ProviderToken {
        try current.withLock { (current: inout ProviderToken?) throws(CryptoError) -> ProviderToken in
            if let token = current, now >= token.issuedAt, now - token.issuedAt < Self.lifetime { return token }
            let token = try mint(now)
            current = token
            return token
        }
    }

    /// APNs answered `ExpiredProviderToken` to `stale`: a fresh token, minted once however many
    /// pushes report the same stale one (the first replaces it; the rest get its replacement).
    public func replace(_ stale: ProviderToken, now: UInt64) throws(CryptoError) -> ProviderToken {
        try current.withLock { (current: inout ProviderToken?) throws(CryptoError) -> ProviderToken in
            if let token = current, token != stale { return token }
            let token = try mint(now)
            current = token
            return token
        }
    }

    /// Tokens minted since start (a gauge for tests and operators: one per 45 minutes is healthy).
    public var mintCount: Int { mints.load(ordering: .relaxed) }

    private func mint(_ now: UInt64) throws(CryptoError) -> ProviderToken {
        mints.add(1, ordering: .relaxed)
        return try ProviderToken.mint(key: key, keyID: keyID, teamID: teamID, issuedAt: now)
    }
}

/// The `.p8` key as push.md §1.1 imports it: every `-----…-----` armour marker and all whitespace
/// removed (on lines of their own or not), the rest base64 of a PKCS#8 P-256 private key; anything else is refused.
public enum APNsKey {
    /// Why a `.p8` key was refused (the key's text never appears in it).
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The text between the armour lines is not base64.
        case notBase64
        /// The bytes are not a PKCS#8 P-256 private key.
        case notAP256PKCS8Key

        public var description: String {
            switch self {
            case .notBase64: "not a .p8 key: the text between the armour lines is not base64"
            case .notAP256PKCS8Key: "not a .p8 key: not a PKCS#8 P-256 private key"
            }
        }
    }

    /// The P-256 key in a `.p8` file's text.
    public static func load(p8 text: String) throws(Failure) -> P256.PrivateKey {
        guard let body = base64Body(of: text), let der = try? Base64.decode(body), !der.isEmpty else { throw .notBase64 }
        // Re-armoured as exactly PKCS#8 (`PRIVATE KEY`), so OpenSSL reads no other encoding.
        var pem = "-----BEGIN PRIVATE KEY-----\n"
        let base64 = Array(Base64.encode(der))
        for start in stride(from: 0, to: base64.count, by: 64) {
            pem += String(base64[start..<min(start + 64, base64.count)]) + "\n"
        }
        pem += "-----END PRIVATE KEY-----\n"
        guard let key = try? P256.PrivateKey(pemRepresentation: pem) else { throw .notAP256PKCS8Key }
        return key
    }

    /// The text with every armour marker (`-----BEGIN PRIVATE KEY-----`, five dashes or more on
    /// each side) and all whitespace removed, wherever they are: on lines of their own, or run
    /// together with the base64 on one line as operators paste a `.p8` into one environment
    /// variable, newlines turned to spaces or dropped. Base64 has no `-`, so a dash can only
    /// belong to a marker. Nil when nothing is left or a marker is not closed.
    static func base64Body(of text: String) -> String? {
        let scalars = Array(text.unicodeScalars)
        var body = String.UnicodeScalarView()
        var index = 0
        /// The end of the run of dashes at `start` if it is a marker's edge (five or more).
        func edge(at start: Int) -> Int? {
            var end = start
            while end < scalars.count, scalars[end] == "-" { end += 1 }
            return end - start >= 5 ? end : nil
        }
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar == "-" {
                guard let opened = edge(at: index) else { return nil }
                var close = opened
                while close < scalars.count, scalars[close] != "-" { close += 1 }
                guard close < scalars.count, let closed = edge(at: close) else { return nil }
                index = closed
            } else {
                if !scalar.properties.isWhitespace { body.append(scalar) }
                index += 1
            }
        }
        return body.isEmpty ? nil : String(body)
    }
}

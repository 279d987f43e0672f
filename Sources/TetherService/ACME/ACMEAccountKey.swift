public import TetherCrypto
import TetherEncoding

/// The ACME account's key and the requests it signs (RFC 8555 §6.2): flattened JWS objects over
/// ES256 (RFC 7518 §3.4: the raw 64-byte r‖s, not DER), with the account's JWK in the first
/// request and its URL (`kid`) after, and the JWK thumbprint (RFC 7638) that key authorizations
/// are built from (§8.1).
public struct ACMEAccountKey: Sendable {
    /// The account's P-256 key, kept in the ACME state directory between runs.
    public let privateKey: P256.PrivateKey

    /// The account key around `privateKey`.
    public init(_ privateKey: P256.PrivateKey) { self.privateKey = privateKey }

    /// The public key as a JWK, members in the lexicographic order RFC 7638 §3.2 hashes them in.
    public var jwk: String {
        let point = privateKey.publicKey.x963Representation
        let x = Base64.encodeURL(point[1..<33]), y = Base64.encodeURL(point[33..<65])
        return #"{"crv":"P-256","kty":"EC","x":"\#(x)","y":"\#(y)"}"#
    }

    /// base64url(SHA-256(JWK)) (RFC 7638).
    public var thumbprint: String { Base64.encodeURL(HashFunction.sha256.hash(Array(jwk.utf8))) }

    /// The key authorization for a challenge token (RFC 8555 §8.1).
    public func keyAuthorization(token: String) -> String { token + "." + thumbprint }

    /// Who signs: the JWK itself (`newAccount`) or the account URL (everything after).
    public enum Signer: Sendable, Equatable {
        /// The key itself, as a JWK: only `newAccount`, before the account has a URL.
        case jwk
        /// The account URL the server returned, for every request after `newAccount`.
        case kid(String)
    }

    /// A flattened JWS JSON object for `url`; `payload` nil is a POST-as-GET (an empty payload,
    /// RFC 8555 §6.3).
    public func signed(_ payload: String?, url: String, nonce: String, signer: Signer) throws(CryptoError) -> [UInt8] {
        let identity: String
        switch signer {
        case .jwk: identity = #""jwk":\#(jwk)"#
        case let .kid(account): identity = #""kid":\#(JSONValue.quoted(account))"#
        }
        let header = #"{"alg":"ES256",\#(identity),"nonce":\#(JSONValue.quoted(nonce)),"url":\#(JSONValue.quoted(url))}"#
        let protected = Base64.encodeURL(Array(header.utf8))
        let body = payload.map { Base64.encodeURL(Array($0.utf8)) } ?? ""
        let signature = try privateKey.signature(for: Array((protected + "." + body).utf8))
        return Array(#"{"protected":"\#(protected)","payload":"\#(body)","signature":"\#(Base64.encodeURL(signature.rawRepresentation))"}"#.utf8)
    }
}

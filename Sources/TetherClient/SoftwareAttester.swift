import Foundation
public import TetherAttest
public import TetherCrypto
import TetherWire
import TetherEncoding
import TetherSync

/// App Attest in software, for Linux and tests: it makes the same attestation and assertion
/// objects an iPhone's Secure Enclave makes (relay.md §5), but under a test authority the
/// operator created, never Apple's. A relay trusts it only when configured with that
/// authority's root (`APPATTEST_ROOT_PEM`); against Apple's root every attestation fails.
public final class SoftwareAttester: Attester, Sendable {
    /// The App Attest nonce extension (relay.md §5.1).
    static let nonceExtensionOID = "1.2.840.113635.100.8.2"

    /// A test root: its key signs each attestation's intermediate.
    public struct Authority: Sendable {
        /// The root's signing key: whoever holds it can attest.
        public let key: P256.PrivateKey
        /// The root certificate a relay trusts through `APPATTEST_ROOT_PEM`.
        public let certificate: Certificate
        /// The subject and issuer name of every root this type makes.
        public static let commonName = "Tether Software App Attest Root"

        /// A root from a key and its certificate, as `tether attester init` stores them.
        public init(key: P256.PrivateKey, certificate: Certificate) {
            self.key = key
            self.certificate = certificate
        }

        /// A fresh self-signed root valid for `days`.
        public static func make(days: Int64 = 3650, now: Int64? = nil) throws(CryptoError) -> Authority {
            let now = now ?? Int64(Date().timeIntervalSince1970)
            let key = P256.PrivateKey()
            let certificate = try Certificate.issue(subject: commonName, subjectKey: key.publicKey, issuer: commonName, issuerKey: key,
                                                    notBefore: now - 3600, notAfter: now + days * 86_400, extensions: [.certificateAuthority])
            return Authority(key: key, certificate: certificate)
        }
    }

    /// The app id (`TEAMID.bundle.id`) bound into each attestation, which the relay's `APP_ID` must
    /// match.
    public let appID: String
    /// The App Attest environment claimed (development or production).
    public let environment: AppAttestVerifier.Environment
    private let authority: Authority
    /// The attested key and its assertion counter.
    private let attested = Locked<(key: P256.PrivateKey?, counter: UInt32)>((nil, 0))

    /// An attester for `appID` whose attestations chain to `authority`.
    public init(appID: String, environment: AppAttestVerifier.Environment = .production, authority: Authority) {
        self.appID = appID
        self.environment = environment
        self.authority = authority
    }

    /// The attested key's id (SHA-256 of its point), once `attest` has run.
    public var keyID: [UInt8]? { attested.withLock { $0.key.map { SHA256.hash($0.publicKey.x963Representation) } } }

    public func attest(clientDataHash: [UInt8]) async throws -> [UInt8] {
        let key = P256.PrivateKey()
        let point = key.publicKey.x963Representation
        let keyID = SHA256.hash(point)
        // rpIdHash ‖ flags (AT) ‖ counter 0 ‖ AAGUID ‖ credentialId length ‖ credentialId.
        let authData = SHA256.hash(Array(appID.utf8)) + [0x40, 0, 0, 0, 0] + environment.aaguid + [0x00, 0x20] + keyID
        let nonce = SHA256.hash(authData + clientDataHash)
        // SEQUENCE { [1] { OCTET STRING (32) } }
        let nonceExtension = [0x30, 0x24, 0xA1, 0x22, 0x04, 0x20] + nonce
        let now = Int64(Date().timeIntervalSince1970)
        let intermediateKey = P256.PrivateKey()
        let intermediateName = "Tether Software App Attest CA"
        let intermediate = try Certificate.issue(subject: intermediateName, subjectKey: intermediateKey.publicKey, issuer: Authority.commonName,
                                                 issuerKey: authority.key, notBefore: now - 3600, notAfter: now + 86_400,
                                                 extensions: [.certificateAuthority])
        let leaf = try Certificate.issue(subject: Hex.encode(keyID), subjectKey: key.publicKey, issuer: intermediateName, issuerKey: intermediateKey,
                                         notBefore: now - 3600, notAfter: now + 86_400,
                                         extensions: [.init(oid: Self.nonceExtensionOID, der: nonceExtension)])
        let object = CBOR.map([
            .init(key: .text("fmt"), value: .text("apple-appattest")),
            .init(key: .text("attStmt"), value: .map([
                .init(key: .text("x5c"), value: .array([.bytes(leaf.derRepresentation), .bytes(intermediate.derRepresentation)])),
                .init(key: .text("receipt"), value: .bytes([])),
            ])),
            .init(key: .text("authData"), value: .bytes(authData)),
        ])
        attested.withLock { $0 = (key, 0) }
        return object.encoded
    }

    public func assert(clientDataHash: [UInt8]) async throws -> [UInt8] {
        let (key, count): (P256.PrivateKey?, UInt32) = attested.withLock {
            $0.counter += 1
            return $0
        }
        guard let key else { throw AppAttestError("no attested key: attest first") }
        let authenticatorData = SHA256.hash(Array(appID.utf8)) + [0x00] + withUnsafeBytes(of: count.bigEndian, Array.init)
        let nonce = SHA256.hash(authenticatorData + clientDataHash)
        let signature = try key.signature(for: nonce)
        return CBOR.map([
            .init(key: .text("signature"), value: .bytes(signature.derRepresentation)),
            .init(key: .text("authenticatorData"), value: .bytes(authenticatorData)),
        ]).encoded
    }
}

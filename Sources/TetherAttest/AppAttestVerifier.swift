public import TetherCrypto

/// Apple App Attest verification for the relay (relay.md §5): an attestation at `/attest` yields
/// the attested key, an assertion at `/register` proves that key signed a fresh challenge.
/// Every check runs in the specified order and fails with its own reason; derived bytes are
/// compared in constant time. Time is an input, so real (expired) samples verify at their time.
public struct AppAttestVerifier: Sendable {
    public enum Environment: Sendable {
        /// TestFlight and App Store builds.
        case production
        /// Xcode debug builds.
        case development

        /// The authData AAGUID the environment expects.
        public var aaguid: [UInt8] {
            switch self {
            case .production: Array("appattest".utf8) + [UInt8](repeating: 0, count: 7)
            case .development: Array("appattestdevelop".utf8)
            }
        }
    }

    /// What an attestation proves: the key's id (SHA-256 of its point) and the point itself.
    public struct AttestedKey: Sendable, Equatable {
        public let keyID: [UInt8]
        /// The 65-byte uncompressed P-256 point.
        public let publicKey: [UInt8]
    }

    public let appID: String
    public let environment: Environment
    public let root: Certificate

    /// The nonce extension of the leaf certificate.
    static let nonceOID = "1.2.840.113635.100.8.2"
    private static let decoder = CBORDecoder(profile: .appAttest)

    public init(appID: String, environment: Environment, root: Certificate) {
        self.appID = appID
        self.environment = environment
        self.root = root
    }

    /// The verifier with Apple's root, or `rootPEM` when given (`APPATTEST_ROOT_PEM`).
    public init(appID: String, environment: Environment, rootPEM: String? = nil) throws(CryptoError) {
        self.init(appID: appID, environment: environment, root: try Certificate(pemRepresentation: rootPEM ?? appleAppAttestationRootPEM))
    }

    // MARK: Attestation (§5.1)

    public func verifyAttestation(_ object: [UInt8], clientDataHash: [UInt8], atUnixTime now: Int64) throws(AppAttestError) -> AttestedKey {
        let decoded: CBOR
        do { decoded = try Self.decoder.decode(object) } catch { throw AppAttestError("malformed attestation CBOR: \(error)") }
        guard decoded["fmt"]?.textValue == "apple-appattest" else { throw AppAttestError("unexpected attestation format") }
        guard let statement = decoded["attStmt"], let authData = decoded["authData"]?.bytesValue else {
            throw AppAttestError("bad attestation shape")
        }
        guard let x5c = statement["x5c"]?.arrayValue, x5c.count >= 2,
              let leafDER = x5c[0].bytesValue, let intermediateDER = x5c[1].bytesValue else {
            throw AppAttestError("missing or malformed certificate chain")
        }
        let leaf: Certificate, intermediate: Certificate
        do {
            leaf = try Certificate(derRepresentation: leafDER)
            intermediate = try Certificate(derRepresentation: intermediateDER)
        } catch {
            throw AppAttestError("certificate parse failed: \(error)")
        }
        guard leaf.isValid(atUnixTime: now), intermediate.isValid(atUnixTime: now) else {
            throw AppAttestError("certificate is expired or not yet valid")
        }
        guard intermediate.isSigned(by: root) else { throw AppAttestError("intermediate not signed by the trusted root") }
        guard leaf.isSigned(by: intermediate) else { throw AppAttestError("leaf not signed by the intermediate") }

        let expectedNonce = SHA256.hash(authData + clientDataHash)
        let nonce = try Self.nonce(in: leaf)
        guard constantTimeEquals(nonce, expectedNonce) else { throw AppAttestError("nonce mismatch") }

        guard let publicKey = leaf.p256PublicKey?.x963Representation else { throw AppAttestError("leaf key is not P-256") }
        let keyID = SHA256.hash(publicKey)
        guard authData.count >= 37 else { throw AppAttestError("authData too short") }
        guard constantTimeEquals(Array(authData[0..<32]), SHA256.hash(Array(appID.utf8))) else {
            throw AppAttestError("rpIdHash (app id) mismatch")
        }
        // The sign counter (authData[33..<37]) is not checked: Apple's procedure wants 0, but
        // relay.md §5.1 allows an added check only if it never rejects an attestation the
        // reference accepts, and the reference accepts any counter.
        guard authData.count >= 55, constantTimeEquals(Array(authData[37..<53]), environment.aaguid) else {
            let got = authData.count >= 53 ? String(decoding: authData[37..<53].map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self) : ""
            throw AppAttestError("AAGUID/environment mismatch: got \"\(got)\", env=\"\(environment == .development ? "development" : "production")\"")
        }
        let credentialLength = Int(authData[53]) << 8 | Int(authData[54])
        guard authData.count >= 55 + credentialLength,
              constantTimeEquals(Array(authData[55..<55 + credentialLength]), keyID) else {
            throw AppAttestError("credentialId does not match keyId")
        }
        return AttestedKey(keyID: keyID, publicKey: publicKey)
    }

    /// The leaf's nonce: extension value `SEQUENCE { [1] EXPLICIT OCTET STRING (32 bytes) }`.
    static func nonce(in leaf: Certificate) throws(AppAttestError) -> [UInt8] {
        let value: [UInt8]
        do {
            guard let found = try leaf.extensionValue(oid: nonceOID) else { throw AppAttestError("missing nonce extension") }
            value = found
        } catch let error as AppAttestError {
            throw error
        } catch {
            throw AppAttestError("missing nonce extension")
        }
        let octets: ArraySlice<UInt8>
        do throws(DERReader.Failure) {
            var outer = DERReader(value)
            var sequence = DERReader(try outer.read(tag: 0x30))
            var explicit = DERReader(try sequence.read(tag: 0xA1))
            octets = try explicit.read(tag: 0x04)
            guard outer.isAtEnd, sequence.isAtEnd, explicit.isAtEnd else { throw .unexpectedTag(expected: 0) }
        } catch {
            throw AppAttestError(error == .badLength ? "nonce extension: bad DER length" : "nonce extension: unexpected DER tag")
        }
        guard octets.count == 32 else { throw AppAttestError("bad nonce length") }
        return Array(octets)
    }

    // MARK: Assertion (§5.2)

    /// Verifies an assertion made with `publicKey` (65-byte point) and returns its counter; the
    /// caller enforces that the counter grows per key id.
    public func verifyAssertion(_ object: [UInt8], clientDataHash: [UInt8], publicKey: [UInt8]) throws(AppAttestError) -> UInt32 {
        let decoded: CBOR
        do { decoded = try Self.decoder.decode(object) } catch { throw AppAttestError("malformed assertion CBOR: \(error)") }
        guard let signature = decoded["signature"]?.bytesValue, let authenticatorData = decoded["authenticatorData"]?.bytesValue else {
            throw AppAttestError("bad assertion shape")
        }
        guard authenticatorData.count >= 37 else { throw AppAttestError("assertion authenticatorData too short") }
        let nonce = SHA256.hash(authenticatorData + clientDataHash)
        let key: P256.PublicKey
        do { key = try P256.PublicKey(x963Representation: publicKey) } catch { throw AppAttestError("pinned key import failed: \(error)") }
        let raw = try Self.rawSignature(der: signature)
        // ECDSA-SHA256 over the nonce: the signed digest is SHA-256(nonce), as the Secure Enclave makes it.
        guard key.isValidSignature(rawRepresentation: raw, for: nonce) else { throw AppAttestError("assertion signature invalid") }
        guard constantTimeEquals(Array(authenticatorData[0..<32]), SHA256.hash(Array(appID.utf8))) else {
            throw AppAttestError("assertion rpIdHash mismatch")
        }
        return authenticatorData[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// DER `SEQUENCE { INTEGER r, INTEGER s }` to raw r‖s: leading zeros stripped, each left-padded
    /// to 32 bytes (the reference's conversion, so a non-minimal integer is read, not refused).
    static func rawSignature(der: [UInt8]) throws(AppAttestError) -> [UInt8] {
        var integers: [ArraySlice<UInt8>] = []
        do throws(DERReader.Failure) {
            var outer = DERReader(der)
            var sequence = DERReader(try outer.read(tag: 0x30))
            for _ in 0..<2 { integers.append(try sequence.read(tag: 0x02)) }
        } catch {
            switch error {
            case .unexpectedTag(expected: 0x30): throw AppAttestError("signature: expected SEQUENCE")
            case .badLength: throw AppAttestError("nonce extension: bad DER length")
            default: throw AppAttestError("signature: expected INTEGER")
            }
        }
        var raw: [UInt8] = []
        for integer in integers {
            let digits = integer.drop { $0 == 0 }
            guard digits.count <= 32 else { throw AppAttestError("signature: integer too large") }
            raw += [UInt8](repeating: 0, count: 32 - digits.count) + digits
        }
        return raw
    }
}

/// A refused attestation or assertion, with the reason for the (verbose, zero-PII) log.
public struct AppAttestError: Error, Equatable, Sendable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

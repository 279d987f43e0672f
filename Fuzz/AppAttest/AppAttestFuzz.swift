// App Attest verification end to end (relay.md §5): attestation and assertion objects, the CBOR,
// certificate and DER reading under them. Compiled into TetherAttest by scripts/fuzz, so the DER
// reader and the verifier's own DER steps are reachable without @testable.
//
// Input: a mode byte, then the mode's fields (FuzzInput.field: a 2-byte length first).
//   0 real:      [environment][unix time, 4 bytes][app id][clientDataHash] object — Apple's root,
//                seeded with the real samples of Tests/Vectors/app-attest
//   1 real:      [app id][clientDataHash][public key] assertion object
//   2 synthetic: [variant][authData][clientDataHash][nonce extension][receipt] — an attestation
//                built here under a test authority of the harness's own, so the checks after the
//                chain and the nonce (rpIdHash, counter, AAGUID, credentialId) are reached too
//   3 synthetic: [variant][authenticatorData][clientDataHash][DER signature] — an assertion
//                signed here, or carrying the input's signature
//   4 DER:       [tags] bytes — the DER reader walked with those tags, and the signature conversion
// In the synthetic modes the verdict must match an independent reading of the same rules.
import Foundation
public import TetherCrypto

public enum AppAttestFuzz {
    /// The harness's authority and attested key: fixed, so seeds made once keep verifying.
    public static let now: Int64 = 1_700_000_000
    public static let appID = "0352187391.com.example.tether-fuzz"
    static let rootKey = try! P256.PrivateKey(rawRepresentation: [UInt8](repeating: 0x11, count: 32))
    static let intermediateKey = try! P256.PrivateKey(rawRepresentation: [UInt8](repeating: 0x22, count: 32))
    public static let attestedKey = try! P256.PrivateKey(rawRepresentation: [UInt8](repeating: 0x33, count: 32))
    public static let root = try! Certificate.issue(subject: "Tether Fuzz Root", subjectKey: rootKey.publicKey, issuer: "Tether Fuzz Root",
                                                    issuerKey: rootKey, notBefore: now - 86_400, notAfter: now + 86_400 * 365,
                                                    extensions: [.certificateAuthority])
    static let intermediate = try! Certificate.issue(subject: "Tether Fuzz CA", subjectKey: intermediateKey.publicKey, issuer: "Tether Fuzz Root",
                                                     issuerKey: rootKey, notBefore: now - 86_400, notAfter: now + 86_400 * 30,
                                                     extensions: [.certificateAuthority])
    public static let keyID = SHA256.hash(attestedKey.publicKey.x963Representation)
    static let nonceOID = "1.2.840.113635.100.8.2"

    public static func run(_ data: [UInt8]) {
        var input = FuzzInput(data)
        switch input.byte() % 5 {
        case 0: realAttestation(&input)
        case 1: realAssertion(&input)
        case 2: syntheticAttestation(&input)
        case 3: syntheticAssertion(&input)
        default: der(&input)
        }
    }

    static func environment(_ byte: UInt8) -> AppAttestVerifier.Environment { byte & 1 == 0 ? .production : .development }

    static func realAttestation(_ input: inout FuzzInput) {
        let environment = environment(input.byte())
        let time = Int64(input.byte()) << 24 | Int64(input.byte()) << 16 | Int64(input.byte()) << 8 | Int64(input.byte())
        let appID = String(decoding: input.field(), as: UTF8.self)
        let clientDataHash = input.field()
        guard let verifier = try? AppAttestVerifier(appID: appID, environment: environment) else { finding("Apple's root did not load") }
        if let key = try? verifier.verifyAttestation(input.rest(), clientDataHash: clientDataHash, atUnixTime: time) {
            expect(key.publicKey.count == 65 && key.keyID == SHA256.hash(key.publicKey), "an attested key that is not its id's")
        }
    }

    static func realAssertion(_ input: inout FuzzInput) {
        let appID = String(decoding: input.field(), as: UTF8.self)
        let clientDataHash = input.field()
        let publicKey = input.field()
        guard let verifier = try? AppAttestVerifier(appID: appID, environment: .production) else { finding("Apple's root did not load") }
        touch(try? verifier.verifyAssertion(input.rest(), clientDataHash: clientDataHash, publicKey: publicKey))
    }

    /// `authData` as an attestation carries it: rpIdHash, flags, counter, AAGUID, credentialId.
    public static func authData(appID: String = appID, counter: UInt32 = 0, environment: AppAttestVerifier.Environment = .production,
                                credentialID: [UInt8] = keyID) -> [UInt8] {
        SHA256.hash(Array(appID.utf8)) + [0x40] + withUnsafeBytes(of: counter.bigEndian, Array.init) + environment.aaguid
            + [UInt8(credentialID.count >> 8 & 0xFF), UInt8(credentialID.count & 0xFF)] + credentialID
    }

    /// An attestation object under the harness's authority: the leaf carries `nonceExtension`, or
    /// the right nonce for `authData` and `clientDataHash` when it is nil.
    public static func attestation(authData: [UInt8], clientDataHash: [UInt8], nonceExtension: [UInt8]? = nil, receipt: [UInt8] = [],
                                   leafValidity: ClosedRange<Int64> = (now - 3600)...(now + 3600), swapChain: Bool = false) -> [UInt8] {
        let nonce = SHA256.hash(authData + clientDataHash)
        let value = nonceExtension ?? [0x30, 0x24, 0xA1, 0x22, 0x04, 0x20] + nonce
        guard let leaf = try? Certificate.issue(subject: "leaf", subjectKey: attestedKey.publicKey, issuer: "Tether Fuzz CA", issuerKey: intermediateKey,
                                                notBefore: leafValidity.lowerBound, notAfter: leafValidity.upperBound,
                                                extensions: [.init(oid: nonceOID, der: value)]) else {
            // OpenSSL refuses to embed an extension value that is not DER: the leaf goes without.
            return attestation(authData: authData, clientDataHash: clientDataHash, nonceExtension: [0x05, 0x00], receipt: receipt,
                               leafValidity: leafValidity, swapChain: swapChain)
        }
        let chain: [CBOR] = swapChain ? [.bytes(intermediate.derRepresentation), .bytes(leaf.derRepresentation)]
            : [.bytes(leaf.derRepresentation), .bytes(intermediate.derRepresentation)]
        return CBOR.map([
            .init(key: .text("fmt"), value: .text("apple-appattest")),
            .init(key: .text("attStmt"), value: .map([
                .init(key: .text("x5c"), value: .array(chain)),
                .init(key: .text("receipt"), value: .bytes(receipt)),
            ])),
            .init(key: .text("authData"), value: .bytes(authData)),
        ]).encoded
    }

    static func syntheticAttestation(_ input: inout FuzzInput) {
        let variant = input.byte()
        let authData = input.field()
        let clientDataHash = input.field()
        let nonceField = input.field()
        let receipt = input.field()
        let environment = environment(variant >> 1)
        // Bit 2: the input's nonce extension instead of the right one; bit 3: the chain the wrong
        // way round; bits 4-5: the leaf expired (1), not yet valid (2), or valid (0 and 3).
        let badChainOrValidity = variant & 8 != 0 || (1...2).contains((variant >> 4) & 3)
        let validity: ClosedRange<Int64> = switch (variant >> 4) & 3 {
        case 1: (now - 7200)...(now - 1)
        case 2: (now + 1)...(now + 7200)
        default: (now - 3600)...(now + 3600)
        }
        let object = attestation(authData: authData, clientDataHash: clientDataHash, nonceExtension: variant & 4 != 0 ? nonceField : nil,
                                 receipt: receipt, leafValidity: validity, swapChain: variant & 8 != 0)
        let verifier = AppAttestVerifier(appID: appID, environment: environment, root: root)
        let result = Result { () throws(AppAttestError) in try verifier.verifyAttestation(object, clientDataHash: clientDataHash, atUnixTime: now) }
        // What the rules say, read independently, for an object this harness built right. The
        // sign counter (authData[33..<37]) is not among them (relay.md §5.1 "Not checked").
        if variant & 4 == 0, !badChainOrValidity {
            let valid = authData.count >= 55 && Array(authData[0..<32]) == SHA256.hash(Array(appID.utf8))
                && Array(authData[37..<53]) == environment.aaguid
                && Int(authData[53]) << 8 | Int(authData[54]) == 32 && authData.count >= 87 && Array(authData[55..<87]) == keyID
            switch result {
            case let .success(key):
                expect(valid, "an attestation accepted that breaks the rules")
                expect(key.keyID == keyID && key.publicKey == attestedKey.publicKey.x963Representation, "the wrong key attested")
            case let .failure(error):
                expect(!valid, "a valid attestation refused: \(error.reason)")
            }
        } else if case .success = result, badChainOrValidity {
            finding("an attestation accepted with a bad chain or validity")
        }
    }

    /// An assertion object: `signature` (DER) and `authenticatorData`.
    public static func assertion(authenticatorData: [UInt8], clientDataHash: [UInt8], signature: [UInt8]? = nil) -> [UInt8] {
        let der = signature ?? (try! attestedKey.signature(for: SHA256.hash(authenticatorData + clientDataHash))).derRepresentation
        return CBOR.map([
            .init(key: .text("signature"), value: .bytes(der)),
            .init(key: .text("authenticatorData"), value: .bytes(authenticatorData)),
        ]).encoded
    }

    static func syntheticAssertion(_ input: inout FuzzInput) {
        let variant = input.byte()
        let authenticatorData = input.field()
        let clientDataHash = input.field()
        let signatureField = input.field()
        let own = variant & 1 == 0
        let object = assertion(authenticatorData: authenticatorData, clientDataHash: clientDataHash, signature: own ? nil : signatureField)
        let verifier = AppAttestVerifier(appID: appID, environment: .production, root: root)
        let result = Result { () throws(AppAttestError) in
            try verifier.verifyAssertion(object, clientDataHash: clientDataHash, publicKey: attestedKey.publicKey.x963Representation)
        }
        guard own else { return touch(result) }
        let valid = authenticatorData.count >= 37 && Array(authenticatorData[0..<32]) == SHA256.hash(Array(appID.utf8))
        switch result {
        case let .success(counter):
            expect(valid, "an assertion accepted that breaks the rules")
            expect(counter == authenticatorData[33..<37].reduce(0) { $0 << 8 | UInt32($1) }, "the wrong counter")
        case let .failure(error):
            expect(!valid, "a valid assertion refused: \(error.reason)")
        }
    }

    static func der(_ input: inout FuzzInput) {
        let tags = input.field()
        let bytes = input.rest()
        var reader = DERReader(bytes)
        var total = 0
        for tag in tags {
            guard let contents = try? reader.read(tag: tag) else { break }
            total += contents.count
            expect(total <= bytes.count, "DER contents beyond the input")
            // Constructed: read inside too, with the same tags.
            if tag & 0x20 != 0 {
                var inner = DERReader(contents)
                while let element = try? inner.read(tag: contents.first ?? 0) { touch(element.count) }
            }
        }
        touch(reader.isAtEnd)
        if let raw = try? AppAttestVerifier.rawSignature(der: bytes) { expect(raw.count == 64, "a raw signature that is not 64 bytes") }
    }
}

extension AppAttestFuzz {
    /// Real Apple attestations and assertions (Tests/Vectors/app-attest/samples.json, a few of
    /// each, at their own time), synthetic ones that verify, and DER of the shapes read.
    public static var seeds: [String: [UInt8]] {
        var seeds: [String: [UInt8]] = [:]
        let chosen = ["apple-doc-validation-guide-2024-04", "veehaitch-ios-14.4-attestation", "uebelack-node-app-attest-production",
                      "bas-d-appattest-attestation", "veehaitch-ios-14.4-assertion", "srinivas1729-appattest-checker-node-assertion"]
        if let data = FileManager.default.contents(atPath: "Tests/Vectors/app-attest/samples.json"),
           let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let samples = json["samples"] as? [[String: Any]] {
            for sample in samples {
                guard let id = sample["id"] as? String, chosen.contains(id) else { continue }
                let appID = Array((sample["app_id"] as? String ?? "").utf8)
                let clientDataHash = base64(sample["client_data_hash_b64"])
                if sample["kind"] as? String == "attestation" {
                    let object = base64(sample["attestation_b64"])
                    let time = UInt32(ISO8601DateFormatter().date(from: sample["verification_time"] as? String ?? "")?.timeIntervalSince1970 ?? 0)
                    seeds["real-" + id] = [0, sample["environment"] as? String == "production" ? 0 : 1] + withUnsafeBytes(of: time.bigEndian, Array.init)
                        + field(appID) + field(clientDataHash) + object
                } else {
                    let pem = (sample["public_key_pem"] as? String ?? "").split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
                    let key = (try? P256.PublicKey(derRepresentation: base64(pem)))?.x963Representation ?? []
                    seeds["real-" + id] = [1] + field(appID) + field(clientDataHash) + field(key) + base64(sample["assertion_b64"])
                }
            }
        }
        let clientDataHash = SHA256.hash(Array("client data".utf8))
        seeds["synthetic-attestation"] = [2, 0] + field(authData()) + field(clientDataHash) + field([]) + field([])
        seeds["synthetic-development"] = [2, 2] + field(authData(environment: .development)) + field(clientDataHash) + field([]) + field([0x30, 0x00])
        seeds["synthetic-own-nonce"] = [2, 4] + field(authData()) + field(clientDataHash)
            + field([0x30, 0x24, 0xA1, 0x22, 0x04, 0x20] + SHA256.hash(authData() + clientDataHash)) + field([])
        seeds["synthetic-expired"] = [2, 0x10] + field(authData()) + field(clientDataHash) + field([]) + field([])
        let assertionData = Array(authData(counter: 7).prefix(37))
        seeds["synthetic-assertion"] = [3, 0] + field(assertionData) + field(clientDataHash) + field([])
        seeds["synthetic-assertion-signature"] = [3, 1] + field(assertionData) + field(clientDataHash)
            + field((try! attestedKey.signature(for: SHA256.hash(assertionData + clientDataHash))).derRepresentation)
        seeds["der-signature"] = [4] + field([0x30, 0x02]) + [0x30, 0x08, 0x02, 0x02, 0x00, 0x80, 0x02, 0x02, 0x7F, 0xFF]
        seeds["der-nonce"] = [4] + field([0x30, 0xA1, 0x04]) + [0x30, 0x24, 0xA1, 0x22, 0x04, 0x20] + [UInt8](repeating: 0xAB, count: 32)
        seeds["der-long-form"] = [4] + field([0x04]) + [0x04, 0x81, 0x80] + [UInt8](repeating: 0, count: 128)
        return seeds
    }

    /// A sample's base64 (one of them is base64url, unpadded).
    static func base64(_ value: Any?) -> [UInt8] {
        let text = (value as? String ?? "").replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            .replacingOccurrences(of: "=", with: "")
        return Array(Data(base64Encoded: text + String(repeating: "=", count: (4 - text.count % 4) % 4)) ?? Data())
    }
}

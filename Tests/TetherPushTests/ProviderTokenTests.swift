import Dispatch
import Foundation
import TetherCrypto
@testable import TetherPush
import TetherSync
import TetherTestSupport
import TetherWire
import XCTest
import TetherEncoding

final class ProviderTokenTests: XCTestCase {
    func testTheSigningInputIsCompactJSONInBase64URLAsTheVectorsSay() {
        // push.md §2.9 (Mytty's test values) and Apple's documented example (§4.4).
        XCTAssertEqual(ProviderToken.signingInput(keyID: "FGHIJ67890", teamID: "ABCDE12345", issuedAt: 1_700_000_000),
                       "eyJhbGciOiJFUzI1NiIsImtpZCI6IkZHSElKNjc4OTAifQ.eyJpc3MiOiJBQkNERTEyMzQ1IiwiaWF0IjoxNzAwMDAwMDAwfQ")
        XCTAssertEqual(ProviderToken.signingInput(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: 1_437_179_036),
                       "eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyM0RFRkcifQ.eyJpc3MiOiJERUYxMjNHSElKIiwiaWF0IjoxNDM3MTc5MDM2fQ")
        XCTAssertEqual(Base64.encodeURL([0xFB, 0xFF, 0xBE, 0x00]), "-_--AA")
    }

    func testAMintedTokenVerifiesUnderTheKeysPublicHalfWithARawSignatureAndNoPadding() throws {
        let key = P256.PrivateKey()
        let token = try ProviderToken.mint(key: key, keyID: "FGHIJ67890", teamID: "ABCDE12345", issuedAt: 1_700_000_000)
        XCTAssertFalse(token.compact.contains("="))
        let parts = token.compact.split(separator: ".").map(String.init)
        XCTAssertEqual(parts.count, 3)
        let signature = try Base64.decodeURL(parts[2])
        XCTAssertEqual(signature.count, 64, "raw r||s, not DER")
        XCTAssertTrue(key.publicKey.isValidSignature(rawRepresentation: signature, for: Array((parts[0] + "." + parts[1]).utf8)))
        XCTAssertFalse(key.publicKey.isValidSignature(rawRepresentation: signature, for: Array((parts[0] + "." + parts[0]).utf8)))
    }

    func testTheRFC7515ES256VectorVerifiesAndItsAlterationsDoNot() throws {
        let vector = try Vectors.json("jwt-apns/rfc7515-a3-es256.json")
        let key = try P256.PublicKey(x963Representation: try Hex.decode(vector["public_key_x962_hex"] as! String))
        func verifies(_ compact: String) throws -> Bool {
            let parts = compact.split(separator: ".").map(String.init)
            return key.isValidSignature(rawRepresentation: try Base64.decodeURL(parts[2]), for: Array((parts[0] + "." + parts[1]).utf8))
        }
        XCTAssertTrue(try verifies(vector["compact"] as! String))
        for negative in vector["negative_cases"] as! [[String: Any]] { XCTAssertFalse(try verifies(negative["compact"] as! String)) }
    }

    func testOneTokenIsReusedForFortyFiveMinutesThenReminted() throws {
        let issuer = ProviderTokenIssuer(key: P256.PrivateKey(), keyID: "FGHIJ67890", teamID: "ABCDE12345")
        let first = try issuer.token(now: 1_000)
        XCTAssertEqual(try issuer.token(now: 1_000 + 2_699), first)
        let second = try issuer.token(now: 1_000 + 2_700)
        XCTAssertNotEqual(second, first)
        XCTAssertEqual(second.issuedAt, 3_700)
        XCTAssertEqual(issuer.mintCount, 2)
        XCTAssertNotEqual(try issuer.token(now: 500), second, "a wall clock stepped back past iat mints afresh")
    }

    func testManyPushesAtOnceMintExactlyOneTokenAndManyStaleReportsReplaceItOnce() throws {
        let issuer = ProviderTokenIssuer(key: P256.PrivateKey(), keyID: "FGHIJ67890", teamID: "ABCDE12345")
        let tokens = Locked<Set<String>>([])
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            let token = try! issuer.token(now: 10_000)
            tokens.withLock { _ = $0.insert(token.compact) }
        }
        XCTAssertEqual(tokens.withLock { $0.count }, 1)
        XCTAssertEqual(issuer.mintCount, 1)
        let stale = try issuer.token(now: 10_000)
        let replacements = Locked<Set<String>>([])
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            let fresh = try! issuer.replace(stale, now: 10_001)
            replacements.withLock { _ = $0.insert(fresh.compact) }
        }
        XCTAssertEqual(replacements.withLock { $0.count }, 1)
        XCTAssertEqual(issuer.mintCount, 2)
    }

    func testAP8KeyIsReadWithItsArmourAndWhitespaceAndAnythingElseIsRefused() throws {
        let key = P256.PrivateKey()
        let pem = key.pemRepresentation
        XCTAssertEqual(try APNsKey.load(p8: pem).publicKey, key.publicKey)
        // The whole .p8 pasted on one line with spaces, as env files and secret stores mangle it.
        let flattened = pem.replacingOccurrences(of: "\n", with: "   ")
        XCTAssertEqual(try APNsKey.load(p8: flattened.replacingOccurrences(of: "-----END", with: "\n-----END")
            .replacingOccurrences(of: "KEY-----   ", with: "KEY-----\n")).publicKey, key.publicKey)
        // Issue 28: armour and base64 run together on one line, or with any whitespace between.
        let lines = pem.split(whereSeparator: \.isNewline).map(String.init)
        for pasted in [lines.joined(), lines.joined(separator: " "), lines.joined(separator: "\r\n"), " \t" + lines.joined(separator: "\u{00A0}") + "\n\n"] {
            XCTAssertEqual(try APNsKey.load(p8: pasted).publicKey, key.publicKey, pasted)
        }
        XCTAssertEqual(try APNsKey.load(p8: lines.dropFirst().dropLast().joined()).publicKey, key.publicKey, "the base64 alone")
        XCTAssertThrowsError(try APNsKey.load(p8: "")) { XCTAssertEqual($0 as? APNsKey.Failure, .notBase64) }
        XCTAssertThrowsError(try APNsKey.load(p8: "-----BEGIN PRIVATE KEY-----")) { XCTAssertEqual($0 as? APNsKey.Failure, .notBase64) }
        XCTAssertThrowsError(try APNsKey.load(p8: lines.joined().replacingOccurrences(of: "-----END", with: "END"))) {
            XCTAssertEqual($0 as? APNsKey.Failure, .notBase64, "an unclosed marker")
        }
        XCTAssertThrowsError(try APNsKey.load(p8: "--" + lines.dropFirst().dropLast().joined())) { XCTAssertEqual($0 as? APNsKey.Failure, .notBase64) }
        XCTAssertThrowsError(try APNsKey.load(p8: "-----BEGIN PRIVATE KEY-----\n%%%\n-----END PRIVATE KEY-----")) { XCTAssertEqual($0 as? APNsKey.Failure, .notBase64) }
        XCTAssertThrowsError(try APNsKey.load(p8: Base64.encode([UInt8](repeating: 1, count: 100)))) { XCTAssertEqual($0 as? APNsKey.Failure, .notAP256PKCS8Key) }
    }
}

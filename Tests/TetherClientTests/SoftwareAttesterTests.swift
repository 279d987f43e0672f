import Foundation
import TetherAttest
import TetherClient
import TetherCrypto
import TetherWire
import XCTest

/// The software attester makes objects the relay's verifier accepts under the attester's own
/// root, and only there.
final class SoftwareAttesterTests: XCTestCase {
    let appID = "TEAMID.com.example.companion"
    let origin = "https://relay.example"

    func testAttestationAndAssertionsVerifyUnderTheAttestersRoot() async throws {
        let authority = try SoftwareAttester.Authority.make()
        let attester = SoftwareAttester(appID: appID, authority: authority)
        let verifier = AppAttestVerifier(appID: appID, environment: .production, root: authority.certificate)
        let challenge = SecureRandom.bytes(32)
        let hash = AttestClientData.hash(challenge: challenge, origin: origin)
        let object = try await attester.attest(clientDataHash: hash)
        let key = try verifier.verifyAttestation(object, clientDataHash: hash, atUnixTime: Int64(Date().timeIntervalSince1970))
        XCTAssertEqual(key.keyID, attester.keyID)

        let assertionHash = AttestClientData.hash(challenge: SecureRandom.bytes(32), origin: origin)
        let first = try await attester.assert(clientDataHash: assertionHash)
        XCTAssertEqual(try verifier.verifyAssertion(first, clientDataHash: assertionHash, publicKey: key.publicKey), 1)
        let second = try await attester.assert(clientDataHash: assertionHash)
        XCTAssertEqual(try verifier.verifyAssertion(second, clientDataHash: assertionHash, publicKey: key.publicKey), 2, "the counter grows")
    }

    func testEveryAttestationFailsUnderAnotherRootOrClientData() async throws {
        let attester = SoftwareAttester(appID: appID, authority: try SoftwareAttester.Authority.make())
        let hash = AttestClientData.hash(challenge: SecureRandom.bytes(32), origin: origin)
        let object = try await attester.attest(clientDataHash: hash)
        let now = Int64(Date().timeIntervalSince1970)
        let apple = try AppAttestVerifier(appID: appID, environment: .production)
        XCTAssertThrowsError(try apple.verifyAttestation(object, clientDataHash: hash, atUnixTime: now), "Apple's root never trusts it")
        let other = AppAttestVerifier(appID: appID, environment: .production, root: try SoftwareAttester.Authority.make().certificate)
        XCTAssertThrowsError(try other.verifyAttestation(object, clientDataHash: hash, atUnixTime: now))
        let mine = AppAttestVerifier(appID: appID, environment: .development, root: try SoftwareAttester.Authority.make().certificate)
        XCTAssertThrowsError(try mine.verifyAttestation(object, clientDataHash: AttestClientData.hash(challenge: [1], origin: origin), atUnixTime: now))
    }

    func testTheAuthorityRoundTripsThroughPEM() throws {
        let authority = try SoftwareAttester.Authority.make()
        let certificate = try Certificate(pemRepresentation: authority.certificate.pemRepresentation)
        XCTAssertEqual(certificate, authority.certificate)
        let key = try P256.PrivateKey(pemRepresentation: authority.key.pemRepresentation)
        XCTAssertEqual(key.publicKey, authority.key.publicKey)
    }
}

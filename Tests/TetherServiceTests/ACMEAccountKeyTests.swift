import TetherCrypto
import TetherService
import TetherWire
import TetherTestSupport
import XCTest
import TetherEncoding

final class ACMEAccountKeyTests: XCTestCase {
    private let key = ACMEAccountKey(try! P256.PrivateKey(rawRepresentation: [UInt8](repeating: 0x11, count: 32)))

    func testTheJWKCarriesTheRawCoordinatesInTheMemberOrderTheThumbprintHashes() throws {
        let point = key.privateKey.publicKey.x963Representation
        XCTAssertEqual(key.jwk, #"{"crv":"P-256","kty":"EC","x":"\#(Base64.encodeURL(point[1..<33]))","y":"\#(Base64.encodeURL(point[33..<65]))"}"#)
        XCTAssertEqual(key.thumbprint, Base64.encodeURL(HashFunction.sha256.hash(Array(key.jwk.utf8))))
        XCTAssertEqual(key.thumbprint.count, 43, "32 bytes, base64url without padding")
        XCTAssertEqual(key.keyAuthorization(token: "tok-en_1"), "tok-en_1." + key.thumbprint)
    }

    func testARequestIsAFlattenedJWSSignedES256OverItsProtectedHeaderAndPayload() throws {
        let body = try key.signed(#"{"a":1}"#, url: "https://ca.example/new-order", nonce: "n0nce", signer: .kid("https://ca.example/acct/7"))
        guard case let .object(jws)? = JSONValue.parse(body), case let .string(protected)? = jws["protected"],
              case let .string(payload)? = jws["payload"], case let .string(signature)? = jws["signature"] else { return XCTFail(String(decoding: body, as: UTF8.self)) }
        XCTAssertEqual(String(decoding: try Base64.decodeURL(protected), as: UTF8.self),
                       #"{"alg":"ES256","kid":"https://ca.example/acct/7","nonce":"n0nce","url":"https://ca.example/new-order"}"#)
        XCTAssertEqual(String(decoding: try Base64.decodeURL(payload), as: UTF8.self), #"{"a":1}"#)
        let raw = try Base64.decodeURL(signature)
        XCTAssertEqual(raw.count, 64, "r and s, 32 bytes each (RFC 7518 §3.4), not DER")
        XCTAssertTrue(key.privateKey.publicKey.isValidSignature(rawRepresentation: raw, for: Array((protected + "." + payload).utf8)))

        let first = try key.signed(nil, url: "https://ca.example/new-acct", nonce: "n", signer: .jwk)
        guard case let .object(asGet)? = JSONValue.parse(first), case let .string(header)? = asGet["protected"] else { return XCTFail() }
        XCTAssertEqual(asGet["payload"], .string(""), "POST-as-GET: an empty payload")
        XCTAssertTrue(String(decoding: try Base64.decodeURL(header), as: UTF8.self).contains(#""jwk":\#(key.jwk)"#))
    }

    func testTheCSRNamesEveryDomainAndIsSignedByTheCertificateKey() throws {
        let certificateKey = P256.PrivateKey()
        let der = try CertificateSigningRequest.der(dnsNames: ["relay.example.com", "www.relay.example.com"], key: certificateKey)
        XCTAssertEqual(der.first, 0x30)
        let text = try runOpenSSL(["req", "-inform", "DER", "-noout", "-text", "-verify"], input: der)
        XCTAssertTrue(text.contains("DNS:relay.example.com, DNS:www.relay.example.com"), text)
        XCTAssertTrue(text.contains("CN = relay.example.com") || text.contains("CN=relay.example.com"), text)
        XCTAssertTrue(text.lowercased().contains("verify ok") || text.contains("Certificate request self-signature verify OK"), text)
    }

    private func runOpenSSL(_ arguments: [String], input: [UInt8]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        let stdin = Pipe(), stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stdout
        try process.runWithSignalsUnblocked()
        stdin.fileHandleForWriting.write(Data(input))
        try stdin.fileHandleForWriting.close()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: output, as: UTF8.self)
    }
}

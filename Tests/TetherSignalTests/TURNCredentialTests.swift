import Foundation
import TetherSignal
import TetherSync
import TetherTestSupport
import TetherWire
import XCTest

/// signaling.md §8: coturn's REST credentials against the vectors, Cloudflare's answer filtered
/// and split, the issuance limits.
final class TURNCredentialTests: XCTestCase {
    func testCoturnPasswordsMatchEveryVector() throws {
        let json = try Vectors.json("coturn/turn-rest-credentials.json")
        let entries = (json["external_vectors"] as? [[String: Any]] ?? []) + (json["derived_examples"] as? [[String: Any]] ?? [])
        XCTAssertFalse(entries.isEmpty)
        for entry in entries {
            let secret = try XCTUnwrap(entry["shared_secret"] as? String), username = try XCTUnwrap(entry["username"] as? String)
            XCTAssertEqual(CoturnIssuer.password(secret: Array(secret.utf8), username: username), entry["password"] as? String, username)
        }
        XCTAssertEqual(CoturnIssuer.password(secret: Array("tether-turn-secret".utf8), username: "1700003600:00112233445566778899aabbccddeeff"),
                       "z/Watd7SW/6nf39LUgvrJsUP/nc=")
    }

    func testACoturnIssuanceExpiresInAnHourAndNamesNoID() throws {
        let issuer = CoturnIssuer(secret: "tether-turn-secret", turnURLs: ["turn:t.example:3478?transport=udp"], stunURLs: ["stun:t.example:3478"],
                                  random: { [UInt8](0..<UInt8($0)) })
        let box = Locked<Issued?>(nil)
        _ = issuer.issue(now: 1_700_000_000) { result in box.withLock { $0 = try? result.get() } }
        let issued = box.withLock { $0 }
        let servers = try XCTUnwrap(issued).iceServers
        XCTAssertEqual(issued?.expiresAt, 1_700_003_600)
        XCTAssertEqual(servers.first, ICEServer(urls: ["stun:t.example:3478"]), "STUN first, without credentials")
        XCTAssertEqual(servers.last?.username, "1700003600:000102030405060708090a0b0c0d0e0f")
        XCTAssertEqual(servers.last?.credential, CoturnIssuer.password(secret: Array("tether-turn-secret".utf8), username: "1700003600:000102030405060708090a0b0c0d0e0f"))
    }

    func testTheDocumentedCloudflareAnswerBecomesThreeEntriesOfAtMostFourURLs() throws {
        let body = #"{"iceServers":[{"urls":["stun:stun.cloudflare.com:3478","stun:stun.cloudflare.com:53"]},{"urls":["turn:turn.cloudflare.com:3478?transport=udp","turn:turn.cloudflare.com:53?transport=udp","turn:turn.cloudflare.com:3478?transport=tcp","turn:turn.cloudflare.com:80?transport=tcp","turns:turn.cloudflare.com:5349?transport=tcp","turns:turn.cloudflare.com:443?transport=tcp"],"username":"u","credential":"c"}]}"#
        let servers = try CloudflareAnswer.iceServers(from: Array(body.utf8)).get()
        XCTAssertEqual(servers.map(\.urls.count), [2, 4, 2])
        XCTAssertNil(servers[0].username)
        XCTAssertEqual(servers[2], ICEServer(urls: ["turns:turn.cloudflare.com:5349?transport=tcp", "turns:turn.cloudflare.com:443?transport=tcp"],
                                             username: "u", credential: "c"))
    }

    func testForeignHostsAreDroppedAndAnAnswerWithoutTURNFails() {
        let foreign = #"{"iceServers":{"urls":["turn:evil.example:3478","turn:turn.cloudflare.com.evil.example:3478","turn:user@turn.cloudflare.com:3478","stuns:stun.cloudflare.com","turn:TURN.cloudflare.com:3478"],"username":"u","credential":"c"}}"#
        XCTAssertEqual(try CloudflareAnswer.iceServers(from: Array(foreign.utf8)).get(),
                       [ICEServer(urls: ["turn:TURN.cloudflare.com:3478"], username: "u", credential: "c")])
        let stunOnly = #"{"iceServers":[{"urls":["stun:stun.cloudflare.com:3478"]}]}"#
        XCTAssertEqual(CloudflareAnswer.iceServers(from: Array(stunOnly.utf8)).failure?.reason, .noTURN)
        XCTAssertEqual(CloudflareAnswer.iceServers(from: Array("[]".utf8)).failure?.reason, .malformed)
    }

    func testEightConcurrentAndSixtyPerMinuteIssuances() {
        let limiter = IssuanceLimiter()
        for _ in 0..<8 { XCTAssertTrue(limiter.start(now: .milliseconds(0))) }
        XCTAssertFalse(limiter.start(now: .milliseconds(0)), "the 9th at once")
        for _ in 0..<8 { limiter.finish() }
        for _ in 0..<52 {
            XCTAssertTrue(limiter.start(now: .milliseconds(1_000)))
            limiter.finish()
        }
        XCTAssertFalse(limiter.start(now: .milliseconds(59_999)), "the 61st in the minute")
        XCTAssertFalse(limiter.start(now: .milliseconds(60_000)), "the window ends only when more than 60,000 ms have passed (relay.md §2.5)")
        XCTAssertTrue(limiter.start(now: .milliseconds(60_001)), "a new window")
    }
}

extension Result {
    var failure: Failure? {
        if case let .failure(error) = self { return error }
        return nil
    }
}

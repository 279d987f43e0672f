import Dispatch
import Foundation
import TetherCrypto
import TetherNet
import TetherSync
import TetherTestSupport
import TetherWire
import XCTest
import TetherEncoding

/// The real `tether push` binary against an independent APNs stand-in (Tests/Peers/apns_standin.py:
/// Python h2 over TLS, provider JWTs verified with PyJWT), both on loopback.
final class PushEndToEndTests: XCTestCase {
    static let teamID = "ABCDE12345"
    static let keyID = "FGHIJ67890"

    var directory: URL!
    var standIn: StandIn!
    var relay: PushProcess!
    var group: EventLoopGroup!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-push-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Self.shell(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                        "-keyout", path("tls.key"), "-out", path("tls.pem")])
        try Self.shell(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path("AuthKey.p8")])
        try Self.shell(["openssl", "pkey", "-in", path("AuthKey.p8"), "-pubout", "-out", path("AuthKey.pub")])
        group = try EventLoopGroup(count: 1)
        standIn = try StandIn(directory: directory, group: group)
        relay = try PushProcess(environment: relayEnvironment())
    }

    override func tearDown() {
        relay?.stop()
        standIn?.stop()
        group?.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    /// Port 0 unless `port` (a restart): `PushProcess` reads the bound port from the start line.
    func relayEnvironment(port: UInt16? = nil) -> [String: String] {
        [
            "PUSH_PORT": String(port ?? 0), "PUSH_DB": path("push.db"), "PUSH_PROFILES": "mytty,iterm2",
            "APNS_TEAM_ID": Self.teamID, "APNS_KEY_ID": Self.keyID, "APNS_PRIVATE_KEY_FILE": path("AuthKey.p8"),
            "APNS_PRODUCTION_URL": "https://127.0.0.1:\(standIn.port)", "APNS_SANDBOX_URL": "https://localhost:\(standIn.port)",
            "APNS_CA_FILE": path("tls.pem"),
        ]
    }

    static func shell(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.runWithSignalsUnblocked()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw Vectors.Failure.notFound("\(arguments[0]) failed") }
    }

    // MARK: Calls

    func post(_ path: String, _ body: String, headers: [(String, String)] = [], port: UInt16? = nil) -> (status: Int, body: String) {
        HTTP.call(group.loops[0], "POST", "http://127.0.0.1:\(port ?? relay.port)\(path)", body: body, headers: headers)
    }

    func registerMytty(_ token: String, sandbox: Bool = false) throws -> (pushID: String, secret: [UInt8]) {
        let answer = post("/v1/register", #"{"deviceToken":"\#(token)","environment":"\#(sandbox ? "sandbox" : "production")"}"#)
        XCTAssertEqual(answer.status, 200, answer.body)
        let json = try XCTUnwrap(JSONValue.parse(Array(answer.body.utf8)))
        return (try XCTUnwrap(json.string("pushID")), try Base64.decode(try XCTUnwrap(json.string("relaySecret"))))
    }

    func pushMytty(_ registration: (pushID: String, secret: [UInt8]), body: String = PushEndToEndTests.alert) -> (status: Int, body: String) {
        Self.pushMytty(registration, body: body, loop: group.loops[0], port: relay.port)
    }

    /// A signed Profile M push, as a Mac sends it.
    static func pushMytty(_ registration: (pushID: String, secret: [UInt8]), body: String = PushEndToEndTests.alert, loop: EventLoop,
                          port: UInt16) -> (status: Int, body: String) {
        let timestamp = String(UInt64(Date().timeIntervalSince1970))
        let signature = MyttyPush.requestSignature(relaySecret: registration.secret, timestamp: timestamp, body: Array(body.utf8))
        return HTTP.call(loop, "POST", "http://127.0.0.1:\(port)/v1/push", body: body,
                         headers: [("content-type", "application/json"), ("x-mytty-push-id", registration.pushID),
                                   ("x-mytty-timestamp", timestamp), ("x-mytty-signature", signature)])
    }

    static let alert = #"{"macID":"7C0FFEE0-0000-4000-8000-000000000001","ciphertext":"c2VhbGVk","collapseID":"s-1","title":"Mytty","placeholder":"An agent needs you"}"#
    static func token(_ byte: UInt8) -> String { Hex.encode([UInt8](repeating: byte, count: 32)) }

    // MARK: Tests

    func testAMyttyPushReachesAPNsWithAVerifiedTokenAndTheExactRequest() throws {
        let registration = try registerMytty(Self.token(0xA1), sandbox: true)
        XCTAssertAnswer(pushMytty(registration), 200, #"{"ok":true}"#)
        let request = try XCTUnwrap(try standIn.requests().first)
        XCTAssertEqual(request["status"] as? Int, 200, "the stand-in verified the JWT and the request")
        XCTAssertEqual(request["path"] as? String, "/3/device/" + Self.token(0xA1))
        let headers = (request["headers"] as? [[String]] ?? []).filter { !$0[0].hasPrefix(":") && $0[0] != "content-length" }
        XCTAssertEqual(headers.map { $0[0] }, ["authorization", "apns-topic", "apns-push-type", "apns-priority", "apns-collapse-id"])
        XCTAssertEqual(headers.dropFirst().map { $0[1] }, ["com.m-tkg.mytty.remote", "alert", "10", "s-1"])
        XCTAssertEqual(request["body"] as? String,
                       #"{"aps":{"alert":{"title":"Mytty","body":"An agent needs you"},"sound":"default","mutable-content":1,"interruption-level":"time-sensitive","thread-id":"mytty-attention"},"m":"7C0FFEE0-0000-4000-8000-000000000001","c":"c2VhbGVk"}"#)
        let header = try XCTUnwrap(request["jwt_header"] as? [String: Any])
        XCTAssertEqual(header["kid"] as? String, Self.keyID)
        XCTAssertEqual((request["jwt_claims"] as? [String: Any])?["iss"] as? String, Self.teamID)
    }

    func testManyConcurrentPushesShareOneTokenAndAtMostTwoConnections() throws {
        let registration = try registerMytty(Self.token(0xB2))
        let statuses = Locked<[Int]>([])
        let (loop, port) = (group.loops[0], relay.port)
        DispatchQueue.concurrentPerform(iterations: 60) { _ in
            let answer = Self.pushMytty(registration, loop: loop, port: port)
            statuses.withLock { $0.append(answer.status) }
        }
        XCTAssertEqual(statuses.withLock { $0 }, [Int](repeating: 200, count: 60))
        let stats = try standIn.stats()
        XCTAssertEqual(stats["requests"] as? Int, 60)
        XCTAssertEqual(stats["distinct_jwts"] as? Int, 1, "one provider token for every push")
        XCTAssertLessThanOrEqual(stats["connections_opened"] as? Int ?? 99, 2, "multiplexed, not a connection per push")
    }

    func testPermanentFailuresDeleteTheRegistrationAndTransientOnesKeepIt() throws {
        let gone = try registerMytty(Self.token(0xC3))
        let busy = try registerMytty(Self.token(0xC4))
        let dead = try registerMytty(Self.token(0xC5))
        try standIn.script([
            ["token": Self.token(0xC3), "status": 400, "reason": "BadDeviceToken"],
            ["token": Self.token(0xC4), "status": 429, "reason": "TooManyRequests", "times": 1],
            ["token": Self.token(0xC5), "status": 410, "reason": "Unregistered", "timestamp": 1_700_000_000_000],
        ])
        XCTAssertAnswer(pushMytty(gone), 502, #"{"error":"BadDeviceToken","status":400}"#)
        XCTAssertEqual(pushMytty(gone).status, 401, "deleted at once")
        XCTAssertAnswer(pushMytty(busy), 502, #"{"error":"TooManyRequests","status":429}"#)
        XCTAssertEqual(pushMytty(busy).status, 200, "kept")
        XCTAssertAnswer(pushMytty(dead), 502, #"{"error":"Unregistered","status":410}"#)
        XCTAssertEqual(pushMytty(dead).status, 401)
        try standIn.script([
            ["token": Self.token(0xC4), "status": 503, "reason": "Shutdown", "action": "goaway_after", "times": 1],
            ["token": Self.token(0xC4), "status": 500, "reason": "InternalServerError", "times": 1],
            ["token": Self.token(0xC4), "status": 403, "reason": "InvalidProviderToken", "times": 1],
        ])
        XCTAssertAnswer(pushMytty(busy), 502, #"{"error":"Shutdown","status":503}"#)
        XCTAssertAnswer(pushMytty(busy), 502, #"{"error":"InternalServerError","status":500}"#)
        XCTAssertAnswer(pushMytty(busy), 502, #"{"error":"InvalidProviderToken","status":403}"#)
        XCTAssertAnswer(pushMytty(busy), 200, #"{"ok":true}"#, "kept through every transient and configuration failure")
    }

    func testAStaleTokenIsRemintedAndAGoawayOrResetIsResentOnce() throws {
        let registration = try registerMytty(Self.token(0xD6))
        try standIn.script([["token": "*", "status": 403, "reason": "ExpiredProviderToken", "times": 1]])
        XCTAssertAnswer(pushMytty(registration), 200, #"{"ok":true}"#)
        XCTAssertEqual(try standIn.stats()["distinct_jwts"] as? Int, 2)
        try standIn.script([["token": "*", "action": "goaway", "times": 1]])
        XCTAssertAnswer(pushMytty(registration), 200, #"{"ok":true}"#)
        try standIn.script([["token": "*", "action": "reset", "times": 1]])
        XCTAssertAnswer(pushMytty(registration), 200, #"{"ok":true}"#)
        try standIn.script([["token": "*", "action": "close", "times": 1]])
        XCTAssertAnswer(pushMytty(registration), 502, #"{"error":"apns unreachable","status":0}"#)
        XCTAssertEqual(pushMytty(registration).status, 200, "kept, and a new connection serves the next push")
    }

    func testAnAPNsThatNeverAnswersIsGivenUpAfterTenSecondsAndTheRegistrationKept() throws {
        let registration = try registerMytty(Self.token(0x99))
        try standIn.script([["token": "*", "action": "hang", "times": 1]])
        let started = Date()
        XCTAssertAnswer(pushMytty(registration), 502, #"{"error":"apns unreachable","status":0}"#)
        XCTAssertEqual(Date().timeIntervalSince(started), 10, accuracy: 1.5)
        XCTAssertAnswer(pushMytty(registration), 200, #"{"ok":true}"#)
    }

    func testRegistrationsSurviveARestart() throws {
        let registration = try registerMytty(Self.token(0xE7))
        let port = relay.port
        relay.stop()
        relay = try PushProcess(environment: relayEnvironment(port: port))
        XCTAssertAnswer(pushMytty(registration), 200, #"{"ok":true}"#)
    }

    func testAnITermWakeupCarriesTheCollapseIdAndSealedNonce() throws {
        let token = Self.token(0xF8)
        let secret = [UInt8](repeating: 9, count: 32)
        XCTAssertAnswer(post("/register", #"{"token":"\#(token)","secretHash":"\#(Hex.encode(SHA256.hash(secret)))","sandbox":true}"#), 200, #"{"ok":true}"#)
        XCTAssertAnswer(post("/push/mutable", #"{"token":"\#(token)","secret":"\#(Hex.encode(secret))","collapse":"\#(String(repeating: "0", count: 32))","nonce":"AAAAAAAAAAAAAAAAe9ksC/pAknVECcZp/SgwKy8g15wMmLrs7EW4jg=="}"#),
                        200, #"{"ok":true}"#)
        let request = try XCTUnwrap(try standIn.requests().last)
        XCTAssertEqual(request["body"] as? String,
                       #"{"aps":{"mutable-content":1,"alert":{"title":"iTerm2 Buddy","body":"Your agent has an update."}},"n":"AAAAAAAAAAAAAAAAe9ksC/pAknVECcZp/SgwKy8g15wMmLrs7EW4jg=="}"#)
        let headers = request["headers"] as? [[String]] ?? []
        XCTAssertTrue(headers.contains(["apns-topic", "com.googlecode.iterm2.companion"]))
        XCTAssertTrue(headers.contains(["apns-collapse-id", String(repeating: "0", count: 32)]))
        XCTAssertTrue(headers.contains([":authority", "localhost:\(standIn.port)"]), "sandbox host")
        try standIn.script([["token": token, "status": 400, "reason": "DeviceTokenNotForTopic"]])
        XCTAssertAnswer(post("/push", #"{"token":"\#(token)","secret":"\#(Hex.encode(secret))","title":"t","body":"b"}"#),
                        502, #"{"error":"APNs 400: {\"reason\":\"DeviceTokenNotForTopic\"}"}"#)
        XCTAssertAnswer(post("/push", #"{"token":"\#(token)","secret":"\#(Hex.encode(secret))","title":"t","body":"b"}"#),
                        403, #"{"error":"unknown device token"}"#)
    }

    func testTheSendCommandSaysWhatAPNsAnswered() throws {
        let delivered = try PushProcess.run(["push", "send", "--relay", "http://127.0.0.1:\(relay.port)", "--device-token", Self.token(0x11)])
        XCTAssertEqual(delivered.status, 0)
        XCTAssertTrue(delivered.output.contains("delivered: APNs accepted the notification (200)"), delivered.output)
        try standIn.script([["token": "*", "status": 400, "reason": "BadDeviceToken"]])
        let refused = try PushProcess.run(["push", "send", "--relay", "http://127.0.0.1:\(relay.port)", "--device-token", Self.token(0x12),
                                           "--profile", "iterm2"])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.output.contains("refused by APNs (400 BadDeviceToken): the device token is invalid"), refused.output)
    }

    /// Issue 28, push.md §1.1 "Key import": every armour line and all whitespace are removed, so
    /// the `.p8` pasted into `APNS_PRIVATE_KEY` on one line (armour and base64 run together) or
    /// with spaces for newlines starts, and its provider tokens verify as the file's do.
    func testAKeyPastedOnOneLineOrWithSpacesSignsAsTheFileDoes() throws {
        let file = try String(contentsOfFile: path("AuthKey.p8"), encoding: .utf8)
        let lines = file.split(whereSeparator: \.isNewline).map(String.init)
        for (index, pasted) in [lines.joined(), lines.joined(separator: " "), lines.joined(separator: "\t") + "  "].enumerated() {
            XCTAssertFalse(pasted.contains("\n"))
            var environment = relayEnvironment()
            environment["APNS_PRIVATE_KEY_FILE"] = nil
            environment["APNS_PRIVATE_KEY"] = pasted
            let started = try PushProcess(environment: environment)
            defer { started.stop() }
            let token = Self.token(0x70 + UInt8(index))
            let answer = post("/v1/register", #"{"deviceToken":"\#(token)","environment":"production"}"#, port: started.port)
            XCTAssertEqual(answer.status, 200, answer.body)
            let json = try XCTUnwrap(JSONValue.parse(Array(answer.body.utf8)))
            let registration = (pushID: try XCTUnwrap(json.string("pushID")), secret: try Base64.decode(try XCTUnwrap(json.string("relaySecret"))))
            XCTAssertAnswer(Self.pushMytty(registration, loop: group.loops[0], port: started.port), 200, #"{"ok":true}"#)
        }
        let requests = try standIn.requests()
        XCTAssertEqual(requests.map { $0["status"] as? Int }, [200, 200, 200], "the stand-in verified each token with the file's public key")
    }

    /// Issue 28 (push.md §1.1, §2.2, §2.5, §2.6, §3.2, §3.7): a JSON `null` is neither absent nor
    /// valid. Every field of every endpoint of both profiles, sent as `null` over the wire: a
    /// required field is refused with its own error, an optional one is refused where a present
    /// value must have its type (`sandbox`, `nonce`) and takes its default where the reference
    /// reads "if a string" (Profile M's `title`, `placeholder`, `collapseID`); a `null` push
    /// `secret` is a bad secret, after the token lookup.
    func testANullFieldIsNeitherAbsentNorValidInAnyEndpointOfEitherProfile() throws {
        let secret = [UInt8](repeating: 0x5A, count: 32), token = Self.token(0x61), hash = Hex.encode(SHA256.hash(secret))
        func json(_ fields: [(String, String)]) -> String { "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}" }
        func with(_ fields: [(String, String)], null key: String) -> String {
            json(fields.contains { $0.0 == key } ? fields.map { $0.0 == key ? ($0.0, "null") : $0 } : fields + [(key, "null")])
        }
        let register = [("token", "\"\(token)\""), ("secretHash", "\"\(hash)\""), ("sandbox", "false")]
        XCTAssertAnswer(post("/register", json(register)), 200, #"{"ok":true}"#)
        for (key, error) in [("token", "invalid token"), ("secretHash", "invalid secretHash"), ("sandbox", "invalid sandbox")] {
            XCTAssertAnswer(post("/register", with(register, null: key)), 400, #"{"error":"\#(error)"}"#, "/register \(key): null")
        }
        XCTAssertAnswer(post("/register", "null"), 400, #"{"error":"invalid json"}"#)
        let mutable = [("token", "\"\(token)\""), ("secret", "\"\(Hex.encode(secret))\""), ("collapse", "\"00\""), ("nonce", "\"bm9uY2U=\"")]
        let plain = [("token", "\"\(token)\""), ("secret", "\"\(Hex.encode(secret))\""), ("title", "\"t\""), ("body", "\"b\"")]
        for (path, fields, nulls) in [("/push/mutable", mutable, [("token", "invalid token"), ("collapse", "invalid collapse"), ("nonce", "invalid nonce")]),
                                      ("/push", plain, [("token", "invalid token"), ("title", "invalid title"), ("body", "invalid body")])] {
            for (key, error) in nulls {
                XCTAssertAnswer(post(path, with(fields, null: key)), 400, #"{"error":"\#(error)"}"#, "\(path) \(key): null")
            }
            XCTAssertAnswer(post(path, with(fields, null: "secret")), 403, #"{"error":"bad secret"}"#, "\(path) secret: null")
            XCTAssertAnswer(post(path, json(fields)), 200, #"{"ok":true}"#, "\(path) as sent")
        }
        let myttyToken = Self.token(0x62)
        let mytty = [("deviceToken", "\"\(myttyToken)\""), ("environment", "\"production\"")]
        for (key, error) in [("deviceToken", "invalid deviceToken"), ("environment", "invalid environment")] {
            XCTAssertAnswer(post("/v1/register", with(mytty, null: key)), 400, #"{"error":"\#(error)"}"#, "/v1/register \(key): null")
        }
        let registration = try registerMytty(myttyToken)
        let alert = [("macID", "\"m\""), ("ciphertext", "\"c2VhbGVk\""), ("collapseID", "\"s-1\""), ("title", "\"T\""), ("placeholder", "\"P\"")]
        for key in ["macID", "ciphertext"] {
            XCTAssertAnswer(pushMytty(registration, body: with(alert, null: key)), 400, #"{"error":"invalid payload"}"#, "/v1/push \(key): null")
        }
        let before = try standIn.requests().count
        XCTAssertAnswer(pushMytty(registration, body: json([alert[0], alert[1], ("collapseID", "null"), ("title", "null"), ("placeholder", "null")])),
                        200, #"{"ok":true}"#)
        let delivered = try XCTUnwrap(try standIn.requests().dropFirst(before).first)
        XCTAssertFalse((delivered["headers"] as? [[String]] ?? []).contains { $0[0] == "apns-collapse-id" }, "a null collapseID sets none")
        XCTAssertEqual(delivered["body"] as? String,
                       #"{"aps":{"alert":{"title":"Mytty","body":""},"sound":"default","mutable-content":1,"interruption-level":"time-sensitive","thread-id":"mytty-attention"},"m":"m","c":"c2VhbGVk"}"#)
    }

    func testAMissingOrMalformedKeyRefusesToStartNamingTheSettingAndNeverTheKey() throws {
        var environment = relayEnvironment()
        environment["APNS_PRIVATE_KEY_FILE"] = nil
        environment["APNS_PRIVATE_KEY"] = "-----BEGIN PRIVATE KEY-----\nTUFMRk9STUVE\n-----END PRIVATE KEY-----"
        let malformed = try PushProcess.run(["push"], environment: environment)
        XCTAssertEqual(malformed.status, 2)
        XCTAssertEqual(malformed.output, "tether: push: APNS_PRIVATE_KEY: not a .p8 key: not a PKCS#8 P-256 private key\n")
        environment["APNS_PRIVATE_KEY"] = nil
        XCTAssertTrue(try PushProcess.run(["push"], environment: environment).output.hasPrefix("tether: push: APNS_PRIVATE_KEY: required"))
        environment["APNS_PRIVATE_KEY_FILE"] = path("AuthKey.p8")
        environment["APNS_TEAM_ID"] = "short"
        XCTAssertEqual(try PushProcess.run(["push"], environment: environment).output, "tether: push: APNS_TEAM_ID: must be 10 characters of A-Z and 0-9\n")
    }
}

/// push.md §1.1, §4.1, §4.2: what the connection to APNs must and must not do, and what both
/// profiles share.
extension PushEndToEndTests {
    /// §1.1: the APNs certificate is always verified: without `APNS_CA_FILE` the stand-in's
    /// self-signed certificate is not trusted, and a trusted one whose names do not include the
    /// URL's host is refused too. Either way nothing reaches the stand-in.
    func testAnAPNsCertificateThatDoesNotVerifyIsUnreachable() throws {
        relay.stop()
        var environment = relayEnvironment()
        environment["APNS_CA_FILE"] = nil
        relay = try PushProcess(environment: environment)
        XCTAssertAnswer(pushMytty(try registerMytty(Self.token(0x31))), 502, #"{"error":"apns unreachable","status":0}"#)
        relay.stop()
        standIn.stop()
        try Self.shell(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                        "-subj", "/CN=apns.example", "-addext", "subjectAltName=DNS:apns.example",
                        "-keyout", path("tls.key"), "-out", path("tls.pem")])
        standIn = try StandIn(directory: directory, group: group)
        relay = try PushProcess(environment: relayEnvironment())
        XCTAssertAnswer(pushMytty(try registerMytty(Self.token(0x32))), 502, #"{"error":"apns unreachable","status":0}"#,
                        "trusted, but not for 127.0.0.1")
        XCTAssertEqual(try standIn.stats()["requests"] as? Int, 0)
    }

    /// §1.1: one provider token per process serves both profiles.
    func testBothProfilesShareOneProviderToken() throws {
        XCTAssertAnswer(pushMytty(try registerMytty(Self.token(0x41))), 200, #"{"ok":true}"#)
        let token = Self.token(0x42)
        let secret = [UInt8](repeating: 4, count: 32)
        XCTAssertAnswer(post("/register", #"{"token":"\#(token)","secretHash":"\#(Hex.encode(SHA256.hash(secret)))"}"#), 200, #"{"ok":true}"#)
        XCTAssertAnswer(post("/push", #"{"token":"\#(token)","secret":"\#(Hex.encode(secret))","title":"t","body":"b"}"#), 200, #"{"ok":true}"#)
        let stats = try standIn.stats()
        XCTAssertEqual(stats["requests"] as? Int, 2)
        XCTAssertEqual(stats["distinct_jwts"] as? Int, 1)
    }

    /// §4.1: until a request with the provider token has succeeded APNs allows one stream per
    /// connection; pushes arriving together right after start still all succeed, over at most
    /// two connections, and no PRIORITY frame is ever sent.
    func testPushesBeforeTheFirstSuccessRespectTheOneStreamStart() throws {
        relay.stop()
        standIn.stop()
        standIn = try StandIn(directory: directory, group: group, arguments: ["--initial-max-concurrent-streams", "1", "--max-concurrent-streams", "1000"])
        relay = try PushProcess(environment: relayEnvironment())
        let registration = try registerMytty(Self.token(0x51))
        let statuses = Locked<[Int]>([])
        let (loop, port) = (group.loops[0], relay.port)
        DispatchQueue.concurrentPerform(iterations: 20) { _ in
            let answer = Self.pushMytty(registration, loop: loop, port: port)
            statuses.withLock { $0.append(answer.status) }
        }
        XCTAssertEqual(statuses.withLock { $0 }, [Int](repeating: 200, count: 20))
        let stats = try standIn.stats()
        XCTAssertEqual(stats["requests"] as? Int, 20)
        XCTAssertLessThanOrEqual(stats["connections_opened"] as? Int ?? 99, 2)
        XCTAssertEqual(stats["priority_frames"] as? Int, 0)
    }

    /// §4.2, §4.5: a body within the relay's 4,096-unit cap can still make an APNs payload over
    /// 4,096 bytes; APNs' 413 `PayloadTooLarge` is a request bug: 502, registration kept.
    func testAnOversizedAPNsPayloadIsARequestBug() throws {
        let registration = try registerMytty(Self.token(0x61))
        let prefix = #"{"macID":"7C0FFEE0-0000-4000-8000-000000000001","ciphertext":""#
        let suffix = #"","collapseID":"s-1","title":"Mytty","placeholder":"An agent needs you"}"#
        let body = prefix + String(repeating: "A", count: 4_090 - prefix.count - suffix.count) + suffix
        XCTAssertEqual(body.utf16.count, 4_090)
        XCTAssertAnswer(pushMytty(registration, body: body), 502, #"{"error":"PayloadTooLarge","status":413}"#)
        let recorded = try XCTUnwrap(try standIn.requests().last)
        XCTAssertEqual(recorded["status"] as? Int, 413)
        XCTAssertAnswer(pushMytty(registration), 200, #"{"ok":true}"#, "kept")
    }
}

/// The APNs stand-in process and its control API.
final class StandIn {
    let process = Process()
    let port: UInt16
    let controlPort: UInt16
    private let loop: EventLoop

    init(directory: URL, group: EventLoopGroup, arguments extra: [String] = []) throws {
        let python = PythonPackageVectors.virtualenv.appendingPathComponent("bin/python")
        process.executableURL = python
        process.arguments = [Vectors.packageRoot().appendingPathComponent("Tests/Peers/apns_standin.py").path,
                             "--cert", directory.appendingPathComponent("tls.pem").path, "--key", directory.appendingPathComponent("tls.key").path,
                             "--jwt-public-key", directory.appendingPathComponent("AuthKey.pub").path,
                             "--team-id", PushEndToEndTests.teamID, "--key-id", PushEndToEndTests.keyID,
                             "--topics", "com.m-tkg.mytty.remote,com.googlecode.iterm2.companion", "--exit-on-stdin-eof"] + extra
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = Pipe()
        process.standardError = FileHandle.nullDevice
        try process.runWithSignalsUnblocked()
        let line = output.fileHandleForReading.readFirstLine().trimmingCharacters(in: .whitespacesAndNewlines)
        // apns-standin: listening on 127.0.0.1:<port> control 127.0.0.1:<control-port>
        let ports = line.split(separator: " ").compactMap { $0.split(separator: ":").last.flatMap { UInt16($0) } }
        guard line.hasPrefix("apns-standin: listening on"), ports.count == 2 else {
            process.terminate()
            throw Vectors.Failure.notFound("the APNs stand-in did not start: \(line)")
        }
        port = ports[0]
        controlPort = ports[1]
        loop = group.loops[0]
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    func requests() throws -> [[String: Any]] { try JSONSerialization.jsonObject(with: Data(control("GET", "/requests").utf8)) as? [[String: Any]] ?? [] }
    func stats() throws -> [String: Any] { try JSONSerialization.jsonObject(with: Data(control("GET", "/stats").utf8)) as? [String: Any] ?? [:] }

    func script(_ rules: [[String: Any]]) throws {
        let body = String(decoding: try JSONSerialization.data(withJSONObject: rules), as: UTF8.self)
        XCTAssertEqual(HTTP.call(loop, "POST", "http://127.0.0.1:\(controlPort)/script", body: body, headers: [("content-type", "application/json")]).status, 200)
    }

    private func control(_ method: String, _ path: String) -> String { HTTP.call(loop, method, "http://127.0.0.1:\(controlPort)\(path)").body }
}

/// The real `tether push` binary.
final class PushProcess {
    let process = Process()
    let port: UInt16

    init(environment: [String: String]) throws {
        process.executableURL = Self.binary
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        process.arguments = ["push"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.runWithSignalsUnblocked()
        let line = output.fileHandleForReading.readFirstLine()
        guard line.hasPrefix("push: listening on 127.0.0.1:"), let port = line.split(separator: " ")[3].split(separator: ":").last.flatMap({ UInt16($0) }) else {
            process.terminate()
            throw Vectors.Failure.notFound("tether push did not start: \(line)")
        }
        self.port = port
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    static var binary: URL { TetherBinary.url }

    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        try TetherBinary.run(arguments, environment: environment)
    }
}

/// One HTTP/1.1 exchange, waited for.
enum HTTP {
    static func call(_ loop: EventLoop, _ method: String, _ url: String, body: String? = nil, headers: [(String, String)] = []) -> (status: Int, body: String) {
        let answer = exchange(loop, method, url, body: body, headers: headers)
        return (answer.status, answer.body)
    }

    /// The same exchange, with the response's header fields.
    static func exchange(_ loop: EventLoop, _ method: String, _ url: String, body: String? = nil,
                         headers: [(String, String)] = []) -> (status: Int, headers: HTTPHeaders, body: String) {
        let done = DispatchSemaphore(value: 0)
        let result = Locked<(Int, HTTPHeaders, String)>((0, HTTPHeaders(), ""))
        HTTPClient.request(method, url, headers: HTTPHeaders(headers), body: body.map { Array($0.utf8) }, on: loop, timeout: .seconds(30)) { outcome in
            switch outcome {
            case let .success(response): result.withLock { $0 = (response.status, response.headers, String(decoding: response.body, as: UTF8.self)) }
            case let .failure(error): result.withLock { $0 = (-1, HTTPHeaders(), "\(error)") }
            }
            done.signal()
        }
        done.wait()
        return result.withLock { $0 }
    }
}

/// Two `tether push` nodes on one PostgreSQL database (`PUSH_DB=postgres://…`), as behind one
/// address: a registration made through one node is delivered through the other, and one node
/// stopped loses nothing the other needs.
extension PushEndToEndTests {
    func testTwoNodesSharingPostgresServeEachOthersRegistrations() throws {
        guard PostgresServer.isInstalled else { throw XCTSkip("PostgreSQL is not installed (scripts/install-deps)") }
        let server = try PostgresServer()
        defer { server.shutdown() }
        let url = try server.createDatabase()
        relay.stop()
        var environment = relayEnvironment()
        environment["PUSH_DB"] = url
        relay = try PushProcess(environment: environment)
        environment["PUSH_PORT"] = "0"
        let second = try PushProcess(environment: environment)
        defer { second.stop() }

        let registration = try registerMytty(Self.token(0xB2))
        XCTAssertAnswer(Self.pushMytty(registration, loop: group.loops[0], port: second.port), 200, #"{"ok":true}"#,
                        "registered through the first node, delivered through the second")
        XCTAssertEqual(try standIn.requests().count, 1)
        relay.stop()
        XCTAssertAnswer(Self.pushMytty(registration, loop: group.loops[0], port: second.port), 200, #"{"ok":true}"#)
        XCTAssertEqual(try server.query("SELECT count(*) FROM push_mytty_registrations", database: "tether_1"), "1")
        XCTAssertEqual(try server.query("SELECT count(*) FROM push_mytty_registrations WHERE device_token LIKE '%b2b2%'", database: "tether_1"), "1")
    }
}

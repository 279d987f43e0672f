import TetherCrypto
@testable import TetherPush
import TetherService
import TetherStore
import TetherSync
import XCTest

final class APNsReasonTests: XCTestCase {
    func testTheTokenPermanentRuleIsAny410OrA400NamingADeadToken() {
        XCTAssertEqual(APNsReason.classify(status: 410, reason: "Unregistered"), .tokenPermanent)
        XCTAssertEqual(APNsReason.classify(status: 410, reason: nil), .tokenPermanent)
        XCTAssertEqual(APNsReason.classify(status: 410, reason: "Whatever"), .tokenPermanent)
        for reason in ["BadDeviceToken", "DeviceTokenNotForTopic", "Unregistered"] {
            XCTAssertEqual(APNsReason.classify(status: 400, reason: reason), .tokenPermanent, reason)
        }
        // push.md §2.7 [test]: not permanent.
        XCTAssertEqual(APNsReason.classify(status: 403, reason: "InvalidProviderToken"), .configuration)
        XCTAssertEqual(APNsReason.classify(status: 500, reason: nil), .transient)
        XCTAssertEqual(APNsReason.classify(status: 429, reason: "TooManyRequests"), .transient)
        // A misconfigured topic must never wipe registrations (§4.5, unlike Sygnal).
        XCTAssertEqual(APNsReason.classify(status: 400, reason: "TopicDisallowed"), .configuration)
        XCTAssertEqual(APNsReason.classify(status: 400, reason: "SomethingNew"), .transient)
        XCTAssertEqual(APNsReason.classify(status: 403, reason: "BadEnvironmentKeyIdInToken"), .configuration)
        XCTAssertEqual(APNsReason.classify(status: 403, reason: "BadEnvironmentKeyInToken"), .configuration)
        XCTAssertEqual(APNsReason.classes.count, 33, "every reason of §4.5's table")
    }

    /// push.md §4.5's table, row by row: (status, reason, class).
    func testEveryReasonOfTheTableHasItsClass() {
        let table: [(Int, String, APNsFailureClass)] = [
            (400, "BadCollapseId", .requestBug),
            (400, "BadDeviceToken", .tokenPermanent),
            (400, "BadExpirationDate", .requestBug),
            (400, "BadMessageId", .requestBug),
            (400, "BadPriority", .requestBug),
            (400, "BadTopic", .configuration),
            (400, "DeviceTokenNotForTopic", .tokenPermanent),
            (400, "DuplicateHeaders", .requestBug),
            (400, "IdleTimeout", .transient),
            (400, "InvalidPushType", .requestBug),
            (400, "MissingDeviceToken", .requestBug),
            (400, "MissingTopic", .configuration),
            (400, "PayloadEmpty", .requestBug),
            (400, "TopicDisallowed", .configuration),
            (403, "BadCertificate", .configuration),
            (403, "BadCertificateEnvironment", .configuration),
            (403, "ExpiredProviderToken", .retryWithFreshToken),
            (403, "Forbidden", .configuration),
            (403, "InvalidProviderToken", .configuration),
            (403, "MissingProviderToken", .configuration),
            (403, "UnrelatedKeyIdInToken", .retryOnNewConnection),
            (403, "BadEnvironmentKeyInToken", .configuration),
            (403, "BadEnvironmentKeyIdInToken", .configuration),
            (404, "BadPath", .requestBug),
            (405, "MethodNotAllowed", .requestBug),
            (410, "ExpiredToken", .tokenPermanent),
            (410, "Unregistered", .tokenPermanent),
            (413, "PayloadTooLarge", .requestBug),
            (429, "TooManyProviderTokenUpdates", .transient),
            (429, "TooManyRequests", .transient),
            (500, "InternalServerError", .transient),
            (503, "ServiceUnavailable", .transient),
            (503, "Shutdown", .transient),
        ]
        XCTAssertEqual(table.count, 33)
        for (status, reason, expected) in table {
            XCTAssertEqual(APNsReason.classify(status: status, reason: reason), expected, "\(status) \(reason)")
            XCTAssertEqual(APNsReason.classes[reason], expected, reason)
        }
        XCTAssertEqual(Set(APNsReason.classes.keys), Set(table.map(\.1)), "no reason beyond the table's")
    }

    func testTheReasonIsReadFromAJSONObjectAndIsNilOtherwise() {
        XCTAssertEqual(APNsReason.parse(body: Array(#"{"reason":"BadDeviceToken"}"#.utf8)), "BadDeviceToken")
        XCTAssertNil(APNsReason.parse(body: Array("not json".utf8)))
        XCTAssertNil(APNsReason.parse(body: Array("{}".utf8)))
        XCTAssertNil(APNsReason.parse(body: []))
        XCTAssertNil(APNsReason.parse(body: Array(#"{"reason":7}"#.utf8)))
    }
}

final class APNsClientTests: XCTestCase {
    private let notification = APNsNotification(environment: .sandbox, deviceToken: String(repeating: "ab", count: 32), topic: "com.example.app",
                                                collapseID: "c-1", payload: Array(#"{"aps":{}}"#.utf8))

    private func client(_ transport: InMemoryHTTP2Transport, now: UInt64 = 1_700_000_000) -> APNsClient {
        APNsClient(transport: transport, tokens: ProviderTokenIssuer(key: P256.PrivateKey(), keyID: "FGHIJ67890", teamID: "ABCDE12345"),
                   endpoints: .init(production: "https://prod.example", sandbox: "https://sandbox.example/"),
                   clock: ServiceClock(monotonic: { .zero }, wall: { WallInstant(unixSeconds: Int64(now)) }))
    }

    private func send(_ client: APNsClient, _ notification: APNsNotification) -> APNsOutcome {
        let outcome = Locked<APNsOutcome?>(nil)
        client.send(notification) { result in outcome.withLock { $0 = result } }
        return outcome.withLock { $0 }!
    }

    func testTheRequestCarriesExactlyTheDocumentedHeadersInOrderToTheEnvironmentsHost() {
        let transport = InMemoryHTTP2Transport()
        XCTAssertEqual(send(client(transport), notification), .delivered)
        let request = transport.requests[0]
        XCTAssertEqual(request.url, "https://sandbox.example/3/device/" + String(repeating: "ab", count: 32))
        XCTAssertEqual(request.headers.map(\.name), ["authorization", "apns-topic", "apns-push-type", "apns-priority", "apns-collapse-id"])
        XCTAssertTrue(request.headers[0].value.hasPrefix("bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IkZHSElKNjc4OTAifQ."))
        XCTAssertEqual(request.headers[1...].map(\.value), ["com.example.app", "alert", "10", "c-1"])
        XCTAssertEqual(request.body, Array(#"{"aps":{}}"#.utf8))
        var production = notification
        production.environment = .production
        production.collapseID = nil
        _ = send(client(transport), production)
        XCTAssertEqual(transport.requests[1].url, "https://prod.example/3/device/" + String(repeating: "ab", count: 32))
        XCTAssertFalse(transport.requests[1].headers.contains { $0.name == "apns-collapse-id" }, "sent only when given")
        XCTAssertFalse(transport.requests.flatMap(\.headers).contains { $0.name == "apns-expiration" })
    }

    func testOneTokenServesManyPushes() {
        let transport = InMemoryHTTP2Transport()
        let apns = client(transport)
        for _ in 0..<20 { XCTAssertEqual(send(apns, notification), .delivered) }
        XCTAssertEqual(Set(transport.requests.map { $0.headers[0].value }).count, 1)
        XCTAssertEqual(apns.tokens.mintCount, 1)
    }

    func testAnExpiredProviderTokenIsRemintedAndThePushSentOnceMore() {
        let transport = InMemoryHTTP2Transport()
        let stale = Locked<String?>(nil)
        transport.answer { request in
            let token = request.headers[0].value
            if stale.withLock({ $0 == nil || $0 == token }) {
                stale.withLock { $0 = token }
                return .response(status: 403, body: Array(#"{"reason":"ExpiredProviderToken"}"#.utf8))
            }
            return .response(status: 200, body: [])
        }
        let apns = client(transport)
        XCTAssertEqual(send(apns, notification), .delivered)
        XCTAssertEqual(transport.requests.count, 2)
        XCTAssertNotEqual(transport.requests[0].headers[0], transport.requests[1].headers[0])
        XCTAssertEqual(apns.tokens.mintCount, 2)
    }

    func testAtMostOneRetryThenTheFailureIsReported() {
        let transport = InMemoryHTTP2Transport { _ in .response(status: 403, body: Array(#"{"reason":"ExpiredProviderToken"}"#.utf8)) }
        let outcome = send(client(transport), notification)
        XCTAssertEqual(outcome, .rejected(status: 403, reason: "ExpiredProviderToken", failureClass: .retryWithFreshToken,
                                          body: Array(#"{"reason":"ExpiredProviderToken"}"#.utf8)))
        XCTAssertEqual(transport.requests.count, 2)
    }

    func testAnUnrelatedKeyIdIsRetriedOnceOnANewConnection() {
        let transport = InMemoryHTTP2Transport { request in
            request.freshConnection ? .response(status: 200, body: []) : .response(status: 403, body: Array(#"{"reason":"UnrelatedKeyIdInToken"}"#.utf8))
        }
        XCTAssertEqual(send(client(transport), notification), .delivered)
        XCTAssertEqual(transport.requests.map(\.freshConnection), [false, true])
        XCTAssertEqual(transport.connectionsOpened, 2)
    }

    func testARequestRefusedUnprocessedIsSentOnceMoreAndAnUnansweredOneIsNot() {
        let refused = InMemoryHTTP2Transport { request in
            request.freshConnection ? .response(status: 200, body: []) : .failed(reason: "GOAWAY", refused: true)
        }
        XCTAssertEqual(send(client(refused), notification), .delivered)
        XCTAssertEqual(refused.requests.count, 2)
        let lost = InMemoryHTTP2Transport { _ in .failed(reason: "Timeout was reached", refused: false) }
        XCTAssertEqual(send(client(lost), notification), .unreachable("Timeout was reached"))
        XCTAssertEqual(lost.requests.count, 1, "it may have been delivered: never sent twice")
    }

    /// push.md §4.5: 429 `TooManyProviderTokenUpdates` is transient and must not trigger a re-mint
    /// (re-minting is what caused it).
    func testTooManyProviderTokenUpdatesIsNeitherRetriedNorReminted() {
        let body = Array(#"{"reason":"TooManyProviderTokenUpdates"}"#.utf8)
        let transport = InMemoryHTTP2Transport { _ in .response(status: 429, body: body) }
        let apns = client(transport)
        XCTAssertEqual(send(apns, notification), .rejected(status: 429, reason: "TooManyProviderTokenUpdates", failureClass: .transient, body: body))
        XCTAssertEqual(transport.requests.count, 1)
        XCTAssertEqual(apns.tokens.mintCount, 1)
        XCTAssertEqual(transport.connectionsOpened, 1)
    }

    func testOtherFailuresAreReportedWithoutARetry() {
        for (status, reason) in [(400, "BadDeviceToken"), (410, "Unregistered"), (429, "TooManyRequests"), (503, "Shutdown"), (500, nil as String?)] {
            let body = reason.map { Array(#"{"reason":"\#($0)"}"#.utf8) } ?? Array("oops".utf8)
            let transport = InMemoryHTTP2Transport { _ in .response(status: status, body: body) }
            let outcome = send(client(transport), notification)
            XCTAssertEqual(outcome, .rejected(status: status, reason: reason, failureClass: APNsReason.classify(status: status, reason: reason), body: body))
            XCTAssertEqual(transport.requests.count, 1)
        }
    }
}

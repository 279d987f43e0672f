public import Foundation
import TetherCrypto
public import TetherNet
public import TetherWire
public import TetherEncoding

/// Why a push relay call did not succeed.
public enum PushRelayError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No answer: connection refused, TLS, timeout.
    case unreachable(String)
    /// The relay answered with an error status; `error` is its `error` field (or the raw body).
    /// For a 502, `apnsStatus` is APNs' status when the relay reported one (Profile M's
    /// `status`, Profile I's `APNs <status>: …`; 0 = APNs unreachable).
    case refused(status: Int, error: String, apnsStatus: Int?)
    /// A success status whose body is not what the call returns.
    case malformedAnswer(status: Int)

    public var description: String {
        switch self {
        case let .unreachable(why): "push relay unreachable: \(why)"
        case let .refused(status, error, _): "push relay refused (\(status)): \(error)"
        case let .malformedAnswer(status): "push relay answer \(status) is not understood"
        }
    }
}

/// The SDK's side of a push relay (push.md): the phone registers, the Mac pushes, each call one
/// HTTP/1.1 exchange with a 15 s deadline, redirects never followed, `User-Agent: iTerm2Companion`
/// on Profile I (client.md §1).
public struct PushRelayClient: Sendable {
    /// The relay's base URL (`https://push.example.com`, no trailing slash).
    public let baseURL: String
    private let loop: EventLoop
    private let tls: TLSClientContext?

    /// A client of the push relay at `baseURL` (a trailing slash is dropped). `tls` is used for
    /// `https://` URLs only.
    public init(baseURL: String, loop: EventLoop, tls: TLSClientContext? = nil) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.loop = loop
        self.tls = tls
    }

    // MARK: Profile M (push.md §2)

    /// A Profile M registration as the phone keeps it.
    public struct MyttyRegistration: Sendable, Equatable {
        /// The relay's id for this registration, which the Mac names in every push.
        public let pushID: String
        /// The 32 secret bytes (the HMAC key for the Mac's pushes).
        public let relaySecret: [UInt8]

        /// As the Mac rebuilds it from what the phone handed over (push.md §2.3).
        public init(pushID: String, relaySecret: [UInt8]) {
            self.pushID = pushID
            self.relaySecret = relaySecret
        }
    }

    /// Phone: `POST /v1/register`. A new `pushID` every call (the phone re-registers on launch).
    public func registerMytty(deviceToken: String, sandbox: Bool) async throws(PushRelayError) -> MyttyRegistration {
        let body = #"{"deviceToken":\#(JSONValue.quoted(deviceToken)),"environment":"\#(sandbox ? "sandbox" : "production")"}"#
        let (status, json) = try await post("/v1/register", body: Array(body.utf8), headers: HTTPHeaders())
        guard status == 200, let pushID = json?.string("pushID"), let secretText = json?.string("relaySecret"),
              let secret = try? Base64.decode(secretText), secret.count == 32 else { throw .malformedAnswer(status: status) }
        return MyttyRegistration(pushID: pushID, relaySecret: secret)
    }

    /// Mac: `POST /v1/push` with the alert sealed under the pairing's device secret (§2.8) and
    /// the request signed over `<timestamp>.<body>` (§2.4). `title` is the placeholder a phone
    /// shows when it cannot open the seal.
    public func pushMytty(to registration: MyttyRegistration, macID: String, alert: [UInt8], deviceSecret: [UInt8],
                          collapseID: String, placeholder: String, now: Date = Date()) async throws(PushRelayError) {
        let sealed: String
        do { sealed = try MyttyPush.sealAlert(alert, deviceSecret: deviceSecret) } catch { throw .refused(status: 0, error: "device secret is not a 32-byte key", apnsStatus: nil) }
        let body = Array(("{\"macID\":\(JSONValue.quoted(macID)),\"ciphertext\":\(JSONValue.quoted(sealed)),"
            + "\"collapseID\":\(JSONValue.quoted(collapseID)),\"title\":\"Mytty\",\"placeholder\":\(JSONValue.quoted(placeholder))}").utf8)
        let timestamp = String(UInt64(max(0, now.timeIntervalSince1970)))
        var headers = HTTPHeaders()
        headers.add("x-mytty-push-id", registration.pushID)
        headers.add("x-mytty-timestamp", timestamp)
        headers.add("x-mytty-signature", MyttyPush.requestSignature(relaySecret: registration.relaySecret, timestamp: timestamp, body: body))
        let (status, json) = try await post("/v1/push", body: body, headers: headers)
        guard status == 200, json?.bool("ok") == true else { throw .malformedAnswer(status: status) }
    }

    // MARK: Profile I (push.md §3)

    /// Phone: `POST /register` with the token (lowercase hex of its bytes) and SHA-256 of the
    /// 32-byte push secret. Returns false when the relay skipped an unchanged registration.
    @discardableResult
    public func registerITerm(token: [UInt8], secret: [UInt8], sandbox: Bool) async throws(PushRelayError) -> Bool {
        let body = #"{"token":"\#(Hex.encode(token))","secretHash":"\#(Hex.encode(SHA256.hash(secret)))","sandbox":\#(sandbox)}"#
        let (status, json) = try await post("/register", body: Array(body.utf8), headers: Self.itermHeaders)
        guard status == 200, json?.bool("ok") == true else { throw .malformedAnswer(status: status) }
        return json?.bool("skipped") != true
    }

    /// Mac: the wake-up `POST /push/mutable` (protocol revision ≥ 2: the wake-up collapse id) with
    /// a sealed nonce (client.md §15) the phone's extension echoes back.
    public func wakeITerm(token: [UInt8], secret: [UInt8], sealedNonce: String?, collapse: String = CollapseToken.wakeup) async throws(PushRelayError) {
        var body = #"{"token":"\#(Hex.encode(token))","secret":"\#(Hex.encode(secret))","collapse":\#(JSONValue.quoted(collapse))"#
        if let sealedNonce { body += #","nonce":\#(JSONValue.quoted(sealedNonce))"# }
        body += "}"
        try await expectOK("/push/mutable", body: body)
    }

    /// Mac: a plaintext notification (`POST /push`, a notify tool's call).
    public func notifyITerm(token: [UInt8], secret: [UInt8], title: String, body text: String) async throws(PushRelayError) {
        let body = #"{"token":"\#(Hex.encode(token))","secret":"\#(Hex.encode(secret))","title":\#(JSONValue.quoted(title)),"body":\#(JSONValue.quoted(text))}"#
        try await expectOK("/push", body: body)
    }

    private static var itermHeaders: HTTPHeaders {
        var headers = HTTPHeaders()
        headers.add("User-Agent", "iTerm2Companion")
        return headers
    }

    private func expectOK(_ path: String, body: String) async throws(PushRelayError) {
        let (status, json) = try await post(path, body: Array(body.utf8), headers: Self.itermHeaders)
        guard status == 200, json?.bool("ok") == true else { throw .malformedAnswer(status: status) }
    }

    // MARK: Plumbing

    private func post(_ path: String, body: [UInt8], headers: HTTPHeaders) async throws(PushRelayError) -> (Int, JSONValue?) {
        let url = baseURL + path
        let result: Result<HTTPClient.Response, NetError> = await withCheckedContinuation { continuation in
            HTTPClient.postJSON(url, body: body, headers: headers, tls: url.hasPrefix("https://") ? tls : nil, on: loop) { continuation.resume(returning: $0) }
        }
        let response: HTTPClient.Response
        switch result {
        case let .failure(error): throw .unreachable("\(error)")
        case let .success(answer): response = answer
        }
        let json = JSONValue.parse(response.body)
        guard response.status == 200 else {
            let error = json?.string("error") ?? String(decoding: response.body.prefix(200), as: UTF8.self)
            throw .refused(status: response.status, error: error, apnsStatus: Self.apnsStatus(status: response.status, json: json, error: error))
        }
        return (response.status, json)
    }

    /// APNs' status inside a 502: Profile M's `status` field, or Profile I's `APNs <status>: …`.
    static func apnsStatus(status: Int, json: JSONValue?, error: String) -> Int? {
        guard status == 502 else { return nil }
        // The relay's number, if it is an integer at all: `Int(_:)` traps on 1e300 or 0.5.
        if case let .object(fields)? = json, case let .number(value)? = fields["status"] { return Int(exactly: value) }
        guard error.hasPrefix("APNs ") else { return nil }
        return Int(error.dropFirst(5).prefix { $0.isNumber })
    }
}

import Foundation
public import TetherNet
public import TetherWire
public import TetherEncoding

/// Why a relay HTTP call did not succeed.
public enum RelayCallError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No answer: connection refused, TLS, timeout.
    case unreachable(String)
    /// The relay answered `{"ok":false,"error":…}` (or a plain-text refusal) with this status.
    case refused(status: Int, error: String)
    /// 421: the room's bucket is served elsewhere (re-resolve).
    case misdirected(owner: String?)
    /// A success status whose body is not what the call returns.
    case malformedAnswer(status: Int)

    /// What the client should do about it (client.md §14).
    public var signal: RelaySignal {
        switch self {
        case .unreachable: .transient
        case let .refused(status, _): RelaySignal.http(status: status)
        case let .misdirected(owner): .reResolve(owner: owner)
        case .malformedAnswer: .fatal
        }
    }

    public var description: String {
        switch self {
        case let .unreachable(why): "relay unreachable: \(why)"
        case let .refused(status, error): "relay refused (\(status)): \(error)"
        case let .misdirected(owner): "room served by another relay node\(owner.map { " (\($0))" } ?? "")"
        case let .malformedAnswer(status): "relay answer \(status) is not understood"
        }
    }
}

/// The room-level HTTP calls of client.md §8: `POST <origin><path>` with the room header and the
/// fixed User-Agent, a JSON body only when there is one, 15 s timeout, redirects never followed.
public struct RelayCalls: Sendable {
    /// The room every call addresses.
    public let room: RelayRoom
    private let loop: EventLoop
    private let tls: TLSClientContext?

    /// The room calls of `room`'s relay, made on `loop`.
    public init(room: RelayRoom, loop: EventLoop, tls: TLSClientContext? = nil) {
        self.room = room
        self.loop = loop
        self.tls = tls
    }

    /// A fresh single-use challenge (`/attest/challenge`), base64 as issued.
    public func challenge() async throws(RelayCallError) -> String {
        let answer = try await post("/attest/challenge", nil)
        guard let challenge = answer.string("challenge") else { throw .malformedAnswer(status: 200) }
        return challenge
    }

    /// `/attest`: an App Attest attestation over `challenge`; returns the ticket.
    public func attest(challenge: String, attestationObject: [UInt8]) async throws(RelayCallError) -> String {
        let answer = try await post("/attest", ["challenge": challenge, "attestationObject": Base64.encode(attestationObject)])
        guard let ticket = answer.string("ticket") else { throw .malformedAnswer(status: 200) }
        return ticket
    }

    /// `/register`: establishes the room with `verifier` (32 bytes). `already registered` counts as
    /// success, as in the shipping clients: the room is established either way.
    public func register(registrationToken: String, verifier: [UInt8], challenge: String? = nil, assertion: [UInt8]? = nil) async throws(RelayCallError) {
        var body = ["registrationToken": registrationToken, "verifier": Base64.encode(verifier)]
        if let challenge { body["challenge"] = challenge }
        if let assertion { body["assertion"] = Base64.encode(assertion) }
        do {
            _ = try await post("/register", body)
        } catch .refused(403, "already registered") {
            return
        }
    }

    /// `/delete`: a signed teardown (fresh challenge, delete transcript). `not established`
    /// counts as success: there is nothing left to delete.
    public func delete(roomSecret: RoomSecret) async throws(RelayCallError) {
        let challenge = try await challenge()
        let transcript = DeleteTranscript(challenge: (try? Base64.decode(challenge)) ?? [], room: room.name, origin: room.origin)
        let signature = roomSecret.joinSigningKey().signature(for: transcript.bytes)
        do {
            _ = try await post("/delete", ["challenge": challenge, "signature": Base64.encode(signature)])
        } catch .refused(403, "not established") {
            return
        }
    }

    // MARK: Plumbing

    private func post(_ path: String, _ body: [String: String]?) async throws(RelayCallError) -> JSONValue {
        var headers = HTTPHeaders(room.headers)
        // A bodiless POST carries no Content-Type (client.md §8).
        let bytes = body.flatMap { try? JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys]) }.map(Array.init)
        if bytes != nil { headers.add("Content-Type", "application/json") }
        let result: Result<HTTPClient.Response, NetError> = await withCheckedContinuation { continuation in
            HTTPClient.request("POST", room.origin + path, headers: headers, body: bytes, tls: tls, on: loop) { continuation.resume(returning: $0) }
        }
        let response: HTTPClient.Response
        switch result {
        case let .failure(error): throw .unreachable("\(error)")
        case let .success(answer): response = answer
        }
        if response.status == 421 { throw .misdirected(owner: response.headers["x-relay-owner"]) }
        let json = JSONValue.parse(response.body)
        guard response.status == 200 else {
            throw .refused(status: response.status, error: json?.string("error") ?? String(decoding: response.body.prefix(200), as: UTF8.self))
        }
        guard let json, json.bool("ok") == true else { throw .malformedAnswer(status: response.status) }
        return json
    }
}

public import TetherWire

/// Where a registration's `iceServers` come from (signaling.md §8): computed at once (coturn,
/// none) or fetched (Cloudflare). `issue` never blocks its caller; `completion` runs once, on
/// any thread.
public protocol TURNIssuer: Sendable {
    /// Whether the issuance limits of §8.1 apply (every mode that issues TURN credentials).
    var isLimited: Bool { get }
    /// Starts one issuance at `now` (UNIX seconds). The handle cancels it (the registering socket
    /// closed): a cancelled issuance may still complete, and its result is then discarded.
    func issue(now: Int64, completion: @escaping @Sendable (Result<Issued, IssuanceFailure>) -> Void) -> (any IssuanceHandle)?
}

/// Credentials as delivered in `registered`.
public struct Issued: Sendable, Equatable {
    public var iceServers: [ICEServer]
    /// UNIX seconds after which the TURN credentials stop working.
    public var expiresAt: Int64

    public init(iceServers: [ICEServer], expiresAt: Int64) {
        self.iceServers = iceServers
        self.expiresAt = expiresAt
    }
}

/// Why an issuance failed; the client only ever hears `unavailable` (§6.1 step 9). The reason
/// is a metric label and a diagnostic: no secret, no ID.
public struct IssuanceFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: Reason
    public let detail: String

    public enum Reason: String, Sendable, CaseIterable {
        case overLimit = "over_limit"
        case timeout
        case upstream
        case refused
        case malformed
        case noTURN = "no_turn"
    }

    public init(_ reason: Reason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    public var description: String { "\(reason.rawValue): \(detail)" }
}

public protocol IssuanceHandle: Sendable {
    func cancel()
}

/// Credentials last one hour and are not refreshed during a session [DOC §8.1].
public enum TURNCredentialLifetime {
    public static let seconds: Int64 = 3_600
}

/// `TURN_MODE=none`: the STUN URLs only, nothing limited (§8.1).
public struct STUNOnlyIssuer: TURNIssuer {
    public let stunURLs: [String]
    public var isLimited: Bool { false }

    public init(stunURLs: [String]) { self.stunURLs = stunURLs }

    public func issue(now: Int64, completion: @escaping @Sendable (Result<Issued, IssuanceFailure>) -> Void) -> (any IssuanceHandle)? {
        completion(.success(Issued(iceServers: ICEServer.split(urls: stunURLs), expiresAt: now + TURNCredentialLifetime.seconds)))
        return nil
    }
}

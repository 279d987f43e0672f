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
    /// The STUN and TURN servers, with the TURN credentials.
    public var iceServers: [ICEServer]
    /// UNIX seconds after which the TURN credentials stop working.
    public var expiresAt: Int64

    /// Credentials for `iceServers`, valid until `expiresAt`.
    public init(iceServers: [ICEServer], expiresAt: Int64) {
        self.iceServers = iceServers
        self.expiresAt = expiresAt
    }
}

/// Why an issuance failed; the client only ever hears `unavailable` (§6.1 step 9). The reason
/// is a metric label and a diagnostic: no secret, no ID.
public struct IssuanceFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The failure's class: the metric label.
    public let reason: Reason
    /// What happened, for the verbose log (no secret, no ID).
    public let detail: String

    /// The classes of failure.
    public enum Reason: String, Sendable, CaseIterable {
        /// The issuance limits were reached; none was started.
        case overLimit = "over_limit"
        /// The provider did not answer in time.
        case timeout
        /// The provider could not be reached (connection, TLS).
        case upstream
        /// The provider answered with an error status.
        case refused
        /// The provider's answer could not be read.
        case malformed
        /// The provider's answer held no TURN URL.
        case noTURN = "no_turn"
    }

    /// A failure of class `reason`, saying `detail`.
    public init(_ reason: Reason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    public var description: String { "\(reason.rawValue): \(detail)" }
}

/// A credential issuance in flight, which the registering socket cancels when it closes.
public protocol IssuanceHandle: Sendable {
    /// Abandons the issuance; a result that still arrives is discarded.
    func cancel()
}

/// Credentials last one hour and are not refreshed during a session [DOC §8.1].
public enum TURNCredentialLifetime {
    /// How long TURN credentials last: one hour.
    public static let seconds: Int64 = 3_600
}

/// `TURN_MODE=none`: the STUN URLs only, nothing limited (§8.1).
public struct STUNOnlyIssuer: TURNIssuer {
    /// The `stun:` URLs handed out.
    public let stunURLs: [String]
    public var isLimited: Bool { false }

    /// An issuer handing out `stunURLs` and no TURN server.
    public init(stunURLs: [String]) { self.stunURLs = stunURLs }

    public func issue(now: Int64, completion: @escaping @Sendable (Result<Issued, IssuanceFailure>) -> Void) -> (any IssuanceHandle)? {
        completion(.success(Issued(iceServers: ICEServer.split(urls: stunURLs), expiresAt: now + TURNCredentialLifetime.seconds)))
        return nil
    }
}

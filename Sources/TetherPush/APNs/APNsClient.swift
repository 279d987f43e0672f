public import TetherSync
public import TetherService
public import TetherStore

/// One notification for APNs (push.md §4.2), as a profile built it.
public struct APNsNotification: Sendable, Equatable {
    /// Production or sandbox: which APNs host the notification goes to.
    public var environment: PushEnvironment
    /// The device token, as lowercase hex.
    public var deviceToken: String
    /// `apns-topic`: the app's bundle id.
    public var topic: String
    /// `apns-collapse-id`, sent only when set.
    public var collapseID: String?
    /// The JSON payload, byte for byte.
    public var payload: [UInt8]

    /// A notification for `deviceToken` under `topic`, carrying `payload`.
    public init(environment: PushEnvironment, deviceToken: String, topic: String, collapseID: String? = nil, payload: [UInt8]) {
        self.environment = environment
        self.deviceToken = deviceToken
        self.topic = topic
        self.collapseID = collapseID
        self.payload = payload
    }
}

/// How a delivery ended.
public enum APNsOutcome: Sendable, Equatable {
    /// APNs accepted the notification (200).
    case delivered
    /// APNs answered with an error: its status, its `reason` (nil when its body had none), the
    /// class of push.md §4.5, and the body as received (Profile I quotes it).
    case rejected(status: Int, reason: String?, failureClass: APNsFailureClass, body: [UInt8])
    /// No answer from APNs (connection, TLS, timeout, reset; push.md §1.1). Zero-PII reason.
    case unreachable(String)
}

extension APNsOutcome {
    /// The registration must go (push.md §2.7, §3.7: any 410; 400 with `BadDeviceToken`,
    /// `DeviceTokenNotForTopic` or `Unregistered`).
    public var isTokenPermanent: Bool {
        if case let .rejected(_, _, failureClass, _) = self { return failureClass == .tokenPermanent }
        return false
    }
}

/// The APNs provider client: builds each request (§4.2: `authorization`, `apns-topic`,
/// `apns-push-type: alert`, `apns-priority: 10`, `apns-collapse-id` when given; never
/// `apns-expiration`), sends it over the shared HTTP/2 transport with the process's provider
/// token, and applies Tether's delivery policy (§4.6): at most one immediate retry, only after a
/// stale token was re-minted (`ExpiredProviderToken`), on a new connection after
/// `UnrelatedKeyIdInToken`, or when the request was refused unprocessed (GOAWAY).
public final class APNsClient: Sendable {
    /// The APNs hosts, overridable for a stand-in (`APNS_PRODUCTION_URL`, `APNS_SANDBOX_URL`).
    public struct Endpoints: Sendable, Equatable {
        /// The production host's base URL.
        public var production: String
        /// The sandbox host's base URL.
        public var sandbox: String

        /// Apple's hosts by default.
        public init(production: String = "https://api.push.apple.com", sandbox: String = "https://api.sandbox.push.apple.com") {
            self.production = production
            self.sandbox = sandbox
        }

        func base(_ environment: PushEnvironment) -> String {
            let url = environment == .production ? production : sandbox
            return url.hasSuffix("/") ? String(url.dropLast()) : url
        }
    }

    /// The HTTP/2 client requests go over.
    public let transport: any HTTP2Transport
    /// The process's provider token.
    public let tokens: ProviderTokenIssuer
    /// Where each environment's notifications go.
    public let endpoints: Endpoints
    private let clock: ServiceClock
    private let observe: @Sendable (APNsOutcome, _ latency: Duration) -> Void

    /// A client sending over `transport`, authenticated with `tokens`.
    ///
    /// - Parameters:
    ///   - transport: the HTTP/2 client (libcurl's in the service, a double in tests).
    ///   - tokens: the process's provider token.
    ///   - endpoints: where each environment's notifications go.
    ///   - clock: the wall clock for the token's `iat`, the monotonic one for the latency.
    ///   - observe: every finished delivery and how long it took (metrics).
    public init(transport: any HTTP2Transport, tokens: ProviderTokenIssuer, endpoints: Endpoints,
                clock: ServiceClock = .system, observe: @escaping @Sendable (APNsOutcome, Duration) -> Void = { _, _ in }) {
        self.transport = transport
        self.tokens = tokens
        self.endpoints = endpoints
        self.clock = clock
        self.observe = observe
    }

    /// A provider token's `iat`: whole seconds of wall time.
    private var iat: UInt64 { UInt64(clamping: clock.wall().unixSeconds) }

    /// Delivers `notification`; `completion` runs once, on the transport's thread.
    public func send(_ notification: APNsNotification, completion: @escaping @Sendable (APNsOutcome) -> Void) {
        let started = clock.monotonic()
        let token: ProviderToken
        do {
            token = try tokens.token(now: iat)
        } catch {
            return finish(.unreachable("cannot sign the provider token"), started, completion)
        }
        attempt(notification, token: token, retried: false, freshConnection: false) { [self] outcome in
            finish(outcome, started, completion)
        }
    }

    private func finish(_ outcome: APNsOutcome, _ started: MonotonicInstant, _ completion: @Sendable (APNsOutcome) -> Void) {
        observe(outcome, clock.monotonic().elapsed(since: started))
        completion(outcome)
    }

    private func attempt(_ notification: APNsNotification, token: ProviderToken, retried: Bool, freshConnection: Bool,
                         completion: @escaping @Sendable (APNsOutcome) -> Void) {
        let request = Self.request(for: notification, token: token, endpoints: endpoints, freshConnection: freshConnection)
        transport.send(request) { [self] outcome in
            switch outcome {
            case .response(200, _):
                completion(.delivered)
            case let .response(status, body):
                let reason = APNsReason.parse(body: body)
                let failureClass = APNsReason.classify(status: status, reason: reason)
                switch (failureClass, retried) {
                case (.retryWithFreshToken, false):
                    guard let fresh = try? tokens.replace(token, now: iat) else {
                        return completion(.rejected(status: status, reason: reason, failureClass: failureClass, body: body))
                    }
                    attempt(notification, token: fresh, retried: true, freshConnection: false, completion: completion)
                case (.retryOnNewConnection, false):
                    attempt(notification, token: token, retried: true, freshConnection: true, completion: completion)
                default:
                    completion(.rejected(status: status, reason: reason, failureClass: failureClass, body: body))
                }
            case let .failed(reason, refused):
                if refused, !retried {
                    attempt(notification, token: token, retried: true, freshConnection: true, completion: completion)
                } else {
                    completion(.unreachable(reason))
                }
            }
        }
    }

    /// The HTTP/2 request for a notification (push.md §2.6, §3.6, §4.2), header order fixed.
    public static func request(for notification: APNsNotification, token: ProviderToken, endpoints: Endpoints,
                               freshConnection: Bool = false) -> HTTP2Request {
        var headers = [
            HTTPField("authorization", "bearer \(token.compact)"),
            HTTPField("apns-topic", notification.topic),
            HTTPField("apns-push-type", "alert"),
            HTTPField("apns-priority", "10"),
        ]
        if let collapse = notification.collapseID { headers.append(HTTPField("apns-collapse-id", collapse)) }
        return HTTP2Request(url: endpoints.base(notification.environment) + "/3/device/" + notification.deviceToken,
                            headers: headers, body: notification.payload, freshConnection: freshConnection)
    }
}

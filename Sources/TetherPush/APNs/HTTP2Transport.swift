/// One HTTP/2 POST, as the APNs client sends it.
public struct HTTP2Request: Sendable {
    /// The `https://` URL to POST to.
    public var url: String
    /// Header fields in order (names lowercase, as HTTP/2 sends them).
    public var headers: [HTTPField]
    /// The request body.
    public var body: [UInt8]
    /// Send it on a connection opened for it (after `UnrelatedKeyIdInToken`, or a refusal).
    public var freshConnection = false

    /// A POST of `body` to `url` with `headers`.
    public init(url: String, headers: [HTTPField], body: [UInt8], freshConnection: Bool = false) {
        self.url = url
        self.headers = headers
        self.body = body
        self.freshConnection = freshConnection
    }
}

/// One header field.
public struct HTTPField: Sendable, Equatable {
    /// The field's name, lowercase.
    public let name: String
    /// The field's value.
    public let value: String
    /// The field `name: value`.
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// What came back for an `HTTP2Request`.
public enum HTTP2Outcome: Sendable, Equatable {
    /// An answer, with its status and body.
    case response(status: Int, body: [UInt8])
    /// No answer: the connection or TLS failed, the request timed out, the stream was reset, or
    /// the server does not speak HTTP/2. `refused` says the server is known not to have processed
    /// it (refused or dropped before any of it was answered, as after a GOAWAY), so it may be
    /// sent once more (push.md §4.6). `reason` is zero-PII.
    case failed(reason: String, refused: Bool)
}

/// The HTTP/2 client under the APNs client: libcurl in the service (`CurlHTTP2Client`), an
/// in-memory double in tests. `send` never blocks its caller; `completion` runs once, on the
/// transport's own thread.
public protocol HTTP2Transport: Sendable {
    /// Sends `request`; `completion` runs once, on the transport's own thread.
    func send(_ request: HTTP2Request, completion: @escaping @Sendable (HTTP2Outcome) -> Void)
    /// Connections opened so far (reuse is part of the contract: a healthy relay opens few).
    var connectionsOpened: Int { get }
    /// Finishes nothing more: requests in flight complete as failed, and the thread exits.
    func shutdown()
}

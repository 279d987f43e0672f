public import TetherNet
import TetherWire

/// Cloudflare's `generate-ice-servers` (signaling.md §8.3): one HTTPS POST per registration on
/// the network core's client — on an event loop, never blocking it — with a fixed path and
/// body, the API token as a bearer token, an 8 s deadline for the whole exchange, redirects
/// refused, the answer bounded to 65,536 bytes, and the request cancelled when the registering
/// socket closes. The key id and token never leave the server and never reach a log.
public struct CloudflareIssuer: TURNIssuer {
    /// The deadline of the whole exchange with Cloudflare.
    public static let timeout: Duration = .seconds(8)
    /// The largest answer read.
    public static let maxResponseBytes = 65_536
    static let body = Array(#"{"ttl": 3600}"#.utf8)

    let url: String
    private let token: String
    private let tls: TLSClientContext?
    private let loops: [EventLoop]

    public var isLimited: Bool { true }

    /// An issuer asking Cloudflare for credentials of the TURN key `keyID`.
    ///
    /// - Parameters:
    ///   - baseURL: `CLOUDFLARE_TURN_API_URL` (an origin; the path is fixed).
    ///   - keyID: `CLOUDFLARE_TURN_KEY_ID`: the TURN key, named in the request's path.
    ///   - token: `CLOUDFLARE_TURN_API_TOKEN`: the key's API token, sent as a bearer token.
    ///   - tls: the trust for the API (system roots plus `CLOUDFLARE_CA_FILE`).
    ///   - loops: where the exchanges run (spread by a counter).
    public init(baseURL: String, keyID: String, token: String, tls: TLSClientContext?, loops: [EventLoop]) {
        url = baseURL + "/v1/turn/keys/" + Self.pathSegment(keyID) + "/credentials/generate-ice-servers"
        self.token = token
        self.tls = tls
        self.loops = loops
    }

    /// The key id as one path segment: unreserved characters pass, everything else is escaped.
    static func pathSegment(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 15, radix: 16, uppercase: true)
            }
        }
        return out
    }

    public func issue(now: Int64, completion: @escaping @Sendable (Result<Issued, IssuanceFailure>) -> Void) -> (any IssuanceHandle)? {
        var headers = HTTPHeaders()
        headers.add("Authorization", "Bearer " + token)
        let loop = loops[Int(UInt64(bitPattern: now) % UInt64(loops.count))]
        // §13.1: iceExpiresAt is when the request was sent + 3,600.
        let expiresAt = now + TURNCredentialLifetime.seconds
        let cancellation = HTTPClient.postJSON(url, body: Self.body, headers: headers, tls: tls, on: loop, timeout: Self.timeout,
                                               maxResponseBody: Self.maxResponseBytes) { result in
            completion(Self.outcome(result).map { Issued(iceServers: $0, expiresAt: expiresAt) })
        }
        return CancelIssuance(cancellation: cancellation)
    }

    static func outcome(_ result: Result<HTTPClient.Response, NetError>) -> Result<[ICEServer], IssuanceFailure> {
        switch result {
        case let .failure(error):
            switch error {
            case .timedOut: return .failure(IssuanceFailure(.timeout, "no answer within 8 s"))
            case .responseTooLarge: return .failure(IssuanceFailure(.malformed, "answer over 65,536 bytes"))
            default: return .failure(IssuanceFailure(.upstream, "\(error)"))
            }
        case let .success(response):
            guard (200..<300).contains(response.status) else {
                // A 3xx is a redirect, never followed.
                return .failure(IssuanceFailure(.refused, "HTTP \(response.status)"))
            }
            return CloudflareAnswer.iceServers(from: response.body)
        }
    }

    struct CancelIssuance: IssuanceHandle {
        let cancellation: HTTPClient.Cancellation
        func cancel() { cancellation.cancel() }
    }
}

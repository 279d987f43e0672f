public import TetherNet
import TetherWire
import TetherEncoding

/// What a relay says of itself before pairing: the origin it binds into every signature
/// (`GET /.well-known/tether-relay.json` on a Tether relay). A link must carry exactly that
/// origin, or the pairing succeeds and every later signed join fails.
public enum RelayIdentity {
    /// Where a Tether relay answers with its origin.
    public static let path = "/.well-known/tether-relay.json"

    /// The relay's own origin, or nil when it does not say (a reference relay, an old Tether,
    /// or no answer: the pairing attempt itself reports an unreachable relay).
    public static func origin(of relay: String, loop: EventLoop, tls: TLSClientContext?) async -> String? {
        let result: Result<HTTPClient.Response, NetError> = await withCheckedContinuation { continuation in
            HTTPClient.request("GET", relay + path, tls: relay.hasPrefix("https://") ? tls : nil, on: loop, timeout: .seconds(10)) {
                continuation.resume(returning: $0)
            }
        }
        guard case let .success(response) = result, response.status == 200 else { return nil }
        return JSONValue.parse(response.body)?.string("origin")
    }
}

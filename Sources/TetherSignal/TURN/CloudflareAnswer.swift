import Foundation
public import TetherWire
public import TetherEncoding

/// Reading Cloudflare's `generate-ice-servers` answer (signaling.md §8.3, §13.1): the current
/// array form or the older single object; URLs kept only for `stun`/`turn`/`turns` on exactly
/// `stun.cloudflare.com` or `turn.cloudflare.com`; entries split to at most 4 URLs; no TURN URL
/// left is a failure.
public enum CloudflareAnswer {
    /// The only hosts a kept URL may name.
    public static let allowedHosts: Set<String> = ["stun.cloudflare.com", "turn.cloudflare.com"]
    static let schemes: Set<String> = ["stun", "turn", "turns"]

    /// The ICE servers in Cloudflare's answer `body`, or why there are none to hand out.
    public static func iceServers(from body: [UInt8]) -> Result<[ICEServer], IssuanceFailure> {
        guard case let .object(fields)? = JSONValue.parse(body), let servers = fields["iceServers"] else {
            return .failure(IssuanceFailure(.malformed, "no iceServers in the answer"))
        }
        let entries: [JSONValue]
        switch servers {
        case let .array(items): entries = items
        case .object: entries = [servers]
        default: return .failure(IssuanceFailure(.malformed, "iceServers is neither an array nor an object"))
        }
        var delivered: [ICEServer] = []
        for entry in entries {
            guard case let .object(entryFields) = entry else { return .failure(IssuanceFailure(.malformed, "an iceServers entry is not an object")) }
            var urls: [String] = []
            switch entryFields["urls"] {
            case let .string(url)?: urls = [url]
            case let .array(items)?:
                for item in items {
                    guard case let .string(url) = item else { return .failure(IssuanceFailure(.malformed, "a URL is not a string")) }
                    urls.append(url)
                }
            default: return .failure(IssuanceFailure(.malformed, "an entry has no urls"))
            }
            var username: String?
            var credential: String?
            if case let .string(text)? = entryFields["username"] { username = text }
            if case let .string(text)? = entryFields["credential"] { credential = text }
            delivered += ICEServer.split(urls: urls.filter(isAllowed), username: username, credential: credential)
        }
        guard delivered.contains(where: { $0.urls.contains { $0.hasPrefix("turn:") || $0.hasPrefix("turns:") } }) else {
            return .failure(IssuanceFailure(.noTURN, "no Cloudflare TURN URL in the answer"))
        }
        return .success(delivered)
    }

    /// `scheme:host[:port][?query]` (RFC 7064/7065) with an allowed scheme and host: the host
    /// compared in lowercase, with no trailing dot and no user part; any port.
    static func isAllowed(_ url: String) -> Bool {
        guard let colon = url.firstIndex(of: ":"), schemes.contains(String(url[..<colon])) else { return false }
        var rest = url[url.index(after: colon)...]
        if let query = rest.firstIndex(of: "?") { rest = rest[..<query] }
        guard !rest.contains("@"), !rest.contains("/") else { return false }
        let host = rest.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        if let portText = rest.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).dropFirst().first {
            guard let port = UInt16(portText), port > 0 else { return false }
        }
        return allowedHosts.contains(host.lowercased())
    }
}

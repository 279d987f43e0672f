import Foundation

/// Canonical forms of the two https URLs a pairing link can carry (client.md §2.3, §2.4).
///
/// Parsing follows Foundation's `URLComponents`, as the iTerm2 clients do, so both sides agree
/// on the exact origin string that is bound into signatures and App Attest hashes.
public enum RelayOrigin {
    /// The official relay and resolver (client.md §1).
    public static let officialRelayHost = "relay.iterm2.com"
    public static let officialResolverHost = "resolver.iterm2.com"
    public static let officialRelayOrigin = "https://relay.iterm2.com"
    public static let officialResolverURL = "https://resolver.iterm2.com/shardmap.json"

    /// `canonicalRelayOrigin`: https, a host, no userinfo, query or fragment, and a path that is
    /// empty or `/`. Output `https://host[:port]` (an explicit port is kept, even 443).
    ///
    /// With `allowLoopbackHTTP` (local test relays, as the reference clients allow them) an
    /// `http://` origin is accepted too, but only when its host is loopback; the scheme is kept.
    public static func canonicalize(_ text: String, allowLoopbackHTTP: Bool = false) -> String? {
        fixedPoint(text) { text in
            guard let (components, scheme) = webComponents(text, allowLoopbackHTTP: allowLoopbackHTTP) else { return nil }
            guard components.percentEncodedPath.isEmpty || components.percentEncodedPath == "/" else { return nil }
            return scheme + "://" + authority(components)
        }
    }

    /// `canonicalResolverURL`: the same rules, but the path is allowed and kept verbatim in its
    /// percent-encoded form (a trailing slash included).
    public static func canonicalizeResolver(_ text: String, allowLoopbackHTTP: Bool = false) -> String? {
        fixedPoint(text) { text in
            guard let (components, scheme) = webComponents(text, allowLoopbackHTTP: allowLoopbackHTTP) else { return nil }
            return scheme + "://" + authority(components) + components.percentEncodedPath
        }
    }

    /// A canonical form is stored and read again (the phone's pairing record, the relay's
    /// `RELAY_ORIGIN` check), so it must canonicalise to itself. The host comes out as Foundation
    /// decodes it, and some decoded hosts do not read back: `a%20b` gives a host with a space,
    /// `b%C2%BC` one that NFKC turns into `b1⁄4`, and a raw non-ASCII host punycode Foundation
    /// then refuses to read. Such a link was accepted and then found corrupt on the next start
    /// (found by fuzzing, Fuzz/PairingLink); now it is refused when read.
    private static func fixedPoint(_ text: String, _ canonical: (String) -> String?) -> String? {
        guard let once = canonical(text), canonical(once) == once else { return nil }
        return once
    }

    /// A loopback host: `localhost`, `::1` or a dotted `127.x.y.z`.
    public static func isLoopback(host: String) -> Bool {
        let host = host.lowercased()
        if host == "localhost" || host == "::1" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// The host (without port) of an https URL, or nil if it has none.
    public static func host(of text: String) -> String? {
        guard let host = URLComponents(string: text)?.host, !host.isEmpty else { return nil }
        return host
    }

    /// The origin that serves a shard-map host (a bare authority, `host[:port]`): https, except
    /// that a loopback resolver reached over http (local tests) names loopback owners over http.
    public static func origin(forShardHost host: String, resolverURL: String? = nil) -> String? {
        if let resolverURL, resolverURL.hasPrefix("http://"), let origin = canonicalize("http://" + host, allowLoopbackHTTP: true) {
            return origin
        }
        return canonicalize("https://" + host)
    }

    private static func webComponents(_ text: String, allowLoopbackHTTP: Bool) -> (URLComponents, String)? {
        guard let components = URLComponents(string: text),
              let scheme = components.scheme?.lowercased(),
              let host = components.host, !host.isEmpty,
              components.user == nil, components.password == nil,
              components.query == nil, components.fragment == nil else { return nil }
        if scheme == "https" { return (components, scheme) }
        if scheme == "http", allowLoopbackHTTP, isLoopback(host: host) { return (components, scheme) }
        return nil
    }

    private static func authority(_ components: URLComponents) -> String {
        (components.host ?? "") + (components.port.map { ":\($0)" } ?? "")
    }
}

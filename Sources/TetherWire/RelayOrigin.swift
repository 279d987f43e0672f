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
    public static func canonicalize(_ text: String) -> String? {
        guard let components = httpsComponents(text) else { return nil }
        guard components.percentEncodedPath.isEmpty || components.percentEncodedPath == "/" else { return nil }
        return "https://" + authority(components)
    }

    /// `canonicalResolverURL`: the same rules, but the path is allowed and kept verbatim in its
    /// percent-encoded form (a trailing slash included).
    public static func canonicalizeResolver(_ text: String) -> String? {
        guard let components = httpsComponents(text) else { return nil }
        return "https://" + authority(components) + components.percentEncodedPath
    }

    /// The host (without port) of an https URL, or nil if it has none.
    public static func host(of text: String) -> String? {
        guard let host = URLComponents(string: text)?.host, !host.isEmpty else { return nil }
        return host
    }

    /// The origin that serves a shard-map host (a bare authority, `host[:port]`).
    public static func origin(forShardHost host: String) -> String? { canonicalize("https://" + host) }

    private static func httpsComponents(_ text: String) -> URLComponents? {
        guard let components = URLComponents(string: text),
              components.scheme?.lowercased() == "https",
              let host = components.host, !host.isEmpty,
              components.user == nil, components.password == nil,
              components.query == nil, components.fragment == nil else { return nil }
        return components
    }

    private static func authority(_ components: URLComponents) -> String {
        (components.host ?? "") + (components.port.map { ":\($0)" } ?? "")
    }
}

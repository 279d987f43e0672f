/// Which address a request is counted against (relay.md §2.4). Used only as a rate-limit and
/// cap key; never logged or stored.
public struct ClientIPResolver: Sendable, Equatable {
    /// `RELAY_TRUST_CLOUDFLARE`: believe `CF-Connecting-IP` (and `X-Forwarded-For`).
    public var trustCloudflare = false
    /// `RELAY_TRUST_PROXY`: believe `X-Forwarded-For`.
    public var trustProxy = false
    /// `RELAY_TRUSTED_HOPS`: which `X-Forwarded-For` element, counted from the right (1 = rightmost).
    public var trustedHops = 1

    /// A resolver trusting the given headers; by default none, so the socket's peer address is the
    /// client.
    public init(trustCloudflare: Bool = false, trustProxy: Bool = false, trustedHops: Int = 1) {
        self.trustCloudflare = trustCloudflare
        self.trustProxy = trustProxy
        self.trustedHops = max(1, trustedHops)
    }

    /// The client key for a request with `cfConnectingIP` / `forwardedFor` header values (the
    /// first of each, if any) from TCP peer `peer`.
    public func clientIP(cfConnectingIP: String?, forwardedFor: String?, peer: String?) -> String {
        if trustCloudflare, let cf = cfConnectingIP {
            return String(cf.trimmingWhitespace())
        }
        if trustProxy || trustCloudflare, let chain = forwardedFor {
            let hops = chain.split(separator: ",").map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }
            if !hops.isEmpty {
                // The element `trustedHops` from the right; beyond the chain, the rightmost (fail
                // closed: the leftmost, the one a client writes, is never used).
                let index = trustedHops <= hops.count ? hops.count - trustedHops : hops.count - 1
                return String(hops[index])
            }
        }
        return peer ?? "unknown"
    }

    /// True when the process should warn: bound to loopback (so almost certainly behind a proxy)
    /// with no trust flag, which collapses every client into one bucket.
    public func shouldWarnBehindProxy(boundToLoopback: Bool) -> Bool { boundToLoopback && !trustProxy && !trustCloudflare }
}

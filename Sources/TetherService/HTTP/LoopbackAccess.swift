public import TetherNet

/// relay.md §2.10's access rule for operator endpoints (`/metrics`): the TCP peer is loopback,
/// and no header says a proxy forwarded someone else's request. Every proxy adds one of these,
/// so the public path through a proxy can never pass.
public enum LoopbackAccess {
    /// Loopback in each spelling a socket can report.
    public static let loopbackPeers: Set<String> = ["127.0.0.1", "::1", "::ffff:127.0.0.1"]

    /// Headers only a proxy sets: the reference's two, and the ones Tether adds (§2.10).
    public static let forwardingHeaders = ["X-Forwarded-For", "CF-Connecting-IP", "X-Real-IP", "Forwarded", "True-Client-IP", "X-Client-IP"]

    /// True for a request straight from this host.
    public static func isDirectLoopback(_ head: HTTPRequestHead, peer: SocketAddress?) -> Bool {
        guard let host = peer?.host, loopbackPeers.contains(host) else { return false }
        return !forwardingHeaders.contains { head.headers.contains($0) }
    }
}

/// A Noise handshake pattern (Noise revision 34, §7): pre-messages and message token lists.
public struct HandshakePattern: Sendable, Hashable {
    public enum Token: String, Sendable, Hashable {
        case e, s, ee, es, se, ss
    }

    public let name: String
    /// Keys the initiator's and responder's peers know before the handshake (`e` or `s`).
    public let initiatorPreMessage: [Token]
    public let responderPreMessage: [Token]
    /// Token lists, alternating initiator → responder starting with the initiator.
    public let messages: [[Token]]

    /// One-way patterns (N, K, X) carry a single message and then traffic flows initiator → responder only.
    public var isOneWay: Bool { messages.count == 1 }

    /// The fundamental patterns of §7.4 (one-way) and §7.5 (interactive).
    public static let all: [String: HandshakePattern] = {
        let table: [(String, [Token], [Token], [[Token]])] = [
            ("N", [], [.s], [[.e, .es]]),
            ("K", [.s], [.s], [[.e, .es, .ss]]),
            ("X", [], [.s], [[.e, .es, .s, .ss]]),
            ("NN", [], [], [[.e], [.e, .ee]]),
            ("NK", [], [.s], [[.e, .es], [.e, .ee]]),
            ("NX", [], [], [[.e], [.e, .ee, .s, .es]]),
            ("KN", [.s], [], [[.e], [.e, .ee, .se]]),
            ("KK", [.s], [.s], [[.e, .es, .ss], [.e, .ee, .se]]),
            ("KX", [.s], [], [[.e], [.e, .ee, .se, .s, .es]]),
            ("XN", [], [], [[.e], [.e, .ee], [.s, .se]]),
            ("XK", [], [.s], [[.e, .es], [.e, .ee], [.s, .se]]),
            ("XX", [], [], [[.e], [.e, .ee, .s, .es], [.s, .se]]),
            ("IN", [], [], [[.e, .s], [.e, .ee, .se]]),
            ("IK", [], [.s], [[.e, .es, .s, .ss], [.e, .ee, .se]]),
            ("IX", [], [], [[.e, .s], [.e, .ee, .se, .s, .es]]),
        ]
        var patterns: [String: HandshakePattern] = [:]
        for (name, initiator, responder, messages) in table {
            patterns[name] = HandshakePattern(name: name, initiatorPreMessage: initiator, responderPreMessage: responder, messages: messages)
        }
        return patterns
    }()

    /// Whether each side holds a static key, for callers (and tests) that set up peers.
    public var initiatorNeedsStaticForTests: Bool { initiatorNeedsStatic }
    public var responderNeedsStaticForTests: Bool { responderNeedsStatic }

    /// True if the initiator must hold a static key (it sends `s` or is pre-known).
    var initiatorNeedsStatic: Bool { initiatorPreMessage.contains(.s) || messages.enumerated().contains { $0.offset % 2 == 0 && $0.element.contains(.s) } }
    /// True if the responder must hold a static key.
    var responderNeedsStatic: Bool { responderPreMessage.contains(.s) || messages.enumerated().contains { $0.offset % 2 == 1 && $0.element.contains(.s) } }
}

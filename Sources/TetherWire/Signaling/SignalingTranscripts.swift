/// The exact bytes each signaling signature covers (signaling.md §5.7): UTF-8 text with fields
/// separated by one 0x0A and no trailing newline, and the binary identity binding of §3.2.
public enum SignalingTranscript {
    public static let identityLabel = Array("cryptext.identity.v2".utf8)

    /// `cryptext.identity.v2` ‖ 0x00 ‖ the 32 raw agreement-key bytes (53 bytes).
    public static func identityBinding(agreementKey: [UInt8]) -> [UInt8] {
        identityLabel + [0] + agreementKey
    }

    /// `cryptext.register.v2\n<challenge as sent>\n<ID>`.
    public static func register(challenge: String, id: SignalingID) -> [UInt8] {
        Array("cryptext.register.v2\n\(challenge)\n\(id.canonical)".utf8)
    }

    /// `cryptext.signal.v2\n<kind>\n<from>\n<to>\n<call>\n<body b64>`.
    public static func signal(kind: SignalKind, from: SignalingID, to: SignalingID, call: CallUUID, body: String) -> [UInt8] {
        // Built in place: the server builds one for every signal it verifies.
        let fields = [kind.rawValue, from.canonical, to.canonical, call.text, body]
        var out = signalLabel
        out.reserveCapacity(out.count + fields.reduce(0) { $0 + 1 + $1.utf8.count })
        for field in fields {
            out.append(0x0A)
            out.append(contentsOf: field.utf8)
        }
        return out
    }

    private static let signalLabel = Array("cryptext.signal.v2".utf8)
}

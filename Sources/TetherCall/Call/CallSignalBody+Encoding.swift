import TetherWire
import TetherEncoding

extension CallSignalBody {
    /// The body's JSON bytes: keys in code-point order, no whitespace, so one body always gives
    /// the same bytes (and the §12 offer vector exactly).
    public var encoded: [UInt8] {
        let fields: [(String, String)]
        switch self {
        case let .offer(description), let .answer(description):
            fields = [("agreementKey", JSONValue.quoted(Base64.encode(description.agreementKey))),
                      ("identitySig", JSONValue.quoted(Base64.encode(description.identitySignature))),
                      ("sdp", JSONValue.quoted(description.sdp))]
        case let .candidate(candidate):
            fields = [("candidate", JSONValue.quoted(candidate.candidate)),
                      ("sdpMLineIndex", candidate.sdpMLineIndex.map { String($0) } ?? "null"),
                      ("sdpMid", candidate.sdpMid.map(JSONValue.quoted) ?? "null")]
        case .channel:
            fields = []
        case let .reject(reason):
            fields = [("reason", JSONValue.quoted(reason.rawValue))]
        case let .close(reason):
            fields = [("reason", JSONValue.quoted(reason.rawValue))]
        }
        let members = fields.map { "\(JSONValue.quoted($0.0)):\($0.1)" }
        return Array(("{" + members.joined(separator: ",") + "}").utf8)
    }

    /// The envelope's `body`: b64std of `encoded`.
    public var base64: String { Base64.encode(encoded) }
}

import TetherWire
import TetherEncoding

extension CallPayload {
    /// The JSON bytes, fields in the order §9.5 and the §12 vector write them.
    var encoded: [UInt8] {
        switch self {
        case let .text(id, text, sentAt):
            Array(#"{"v":2,"type":"text","id":"\#(id.text)","text":\#(JSONValue.quoted(text)),"sentAt":\#(sentAt)}"#.utf8)
        case let .receipt(id):
            Array(#"{"v":2,"type":"receipt","id":"\#(id.text)"}"#.utf8)
        }
    }

    /// Reads a received payload as strictly as §9.5, §2 and §13.1 say: one JSON object without
    /// duplicate keys, `v` the integer 2, a known `type` and its fields. Unknown fields are
    /// ignored (§2).
    init(decoding bytes: [UInt8]) throws(CallPayloadProblem) {
        guard bytes.count <= CallChannelLimits.maxPayloadBytes else { throw .tooLarge }
        guard let json = JSONValue.parseStrict(bytes), case .object = json else { throw .notJSONObject }
        guard json.integer("v") == 2 else { throw .version }
        let type = json.string("type")
        guard type == "text" || type == "receipt" else { throw .unknownType }
        guard let id = json.string("id").flatMap(MessageID.init) else { throw .field("id") }
        guard type == "text" else {
            self = .receipt(id: id)
            return
        }
        guard let text = json.string("text") else { throw .field("text") }
        guard CallChannelLimits.textScalars.contains(text.unicodeScalars.count) else { throw .textLength }
        guard let sentAt = json.integer("sentAt") else { throw .field("sentAt") }
        self = .text(id: id, text: text, sentAt: sentAt)
    }

    /// Why this side may not send the payload (nil when it may): the limits a receiver enforces.
    var sendingProblem: CallPayloadProblem? {
        if case let .text(_, text, sentAt) = self {
            guard CallChannelLimits.textScalars.contains(text.unicodeScalars.count) else { return .textLength }
            guard sentAt.magnitude <= CallChannelLimits.maxIntegerMagnitude.magnitude else { return .field("sentAt") }
        }
        return encoded.count <= CallChannelLimits.maxPayloadBytes ? nil : .tooLarge
    }
}

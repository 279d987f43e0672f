import TetherWire
import TetherEncoding

/// What signaling nodes tell each other over a cluster connection (JSON text frames): a signal
/// for an ID the receiving node holds, forwarded unchanged, and — when that ID has gone from it
/// meanwhile — the `offline` answer for the node whose client sent it. Nothing else crosses.
enum ClusterMessage: Equatable {
    case signal(SignalMessage)
    /// `sender` gets `error offline` for its `kind` signal of `call`: `recipient` is not here.
    case offline(sender: SignalingID, recipient: SignalingID, call: CallUUID, kind: SignalKind)

    var json: String {
        switch self {
        case let .signal(message): #"{"t":"signal","signal":\#(message.json())}"#
        case let .offline(sender, recipient, call, kind):
            #"{"t":"offline","to":"\#(sender.canonical)","from":"\#(recipient.canonical)","call":"\#(call.text)","kind":"\#(kind.rawValue)"}"#
        }
    }

    /// Nil for anything but exactly one of the two shapes (a node of another build, a bug).
    static func parse(_ bytes: [UInt8]) -> ClusterMessage? {
        guard case let .object(fields)? = JSONValue.parseStrict(bytes), case let .string(type)? = fields["t"] else { return nil }
        switch type {
        case "signal":
            guard case let .object(envelope)? = fields["signal"], case let .success(message) = SignalMessage.parse(envelope) else { return nil }
            return .signal(message)
        case "offline":
            guard let sender = fields.string("to").flatMap(SignalingID.init(canonical:)),
                  let recipient = fields.string("from").flatMap(SignalingID.init(canonical:)),
                  let call = fields.string("call").flatMap(CallUUID.init),
                  let kind = fields.string("kind").flatMap(SignalKind.init(rawValue:)) else { return nil }
            return .offline(sender: sender, recipient: recipient, call: call, kind: kind)
        default:
            return nil
        }
    }
}

private extension [String: JSONValue] {
    func string(_ key: String) -> String? {
        if case let .string(text)? = self[key] { return text }
        return nil
    }
}

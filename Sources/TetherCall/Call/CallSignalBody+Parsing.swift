public import TetherWire
public import TetherEncoding

extension CallSignalBody {
    /// The body of a `kind` signal from its JSON bytes, checked against the kind's schema (§7.1,
    /// §13.1); nil when it does not match. Unknown fields are ignored, a duplicate key anywhere
    /// makes the body invalid, and so does one larger than a `signal` may carry (§5.4).
    public static func parse(kind: SignalKind, json bytes: [UInt8]) -> CallSignalBody? {
        guard bytes.count <= SignalMessage.maxBodyBytes, case let .object(fields)? = JSONValue.parseStrict(bytes) else { return nil }
        let object = JSONValue.object(fields)
        switch kind {
        case .offer: return description(object).map(CallSignalBody.offer)
        case .answer: return description(object).map(CallSignalBody.answer)
        case .candidate: return candidate(fields).map(CallSignalBody.candidate)
        // `{}` on the wire; any object is readiness, whatever fields it carries (unknown fields
        // are ignored, §7.1).
        case .channel: return .channel
        case .reject: return object.string("reason").flatMap(RejectReason.init(rawValue:)).map(CallSignalBody.reject)
        case .close: return object.string("reason").flatMap(CloseReason.init(rawValue:)).map(CallSignalBody.close)
        }
    }

    /// The body of an envelope: its b64std `body` decoded (canonically, §13.1) and parsed for
    /// its `kind`.
    public static func parse(_ signal: SignalMessage) -> CallSignalBody? {
        guard let bytes = try? Base64.decodeCanonical(signal.body) else { return nil }
        return parse(kind: signal.kind, json: bytes)
    }

    private static func description(_ object: JSONValue) -> Description? {
        guard let sdp = object.string("sdp"),
              let key = object.string("agreementKey").flatMap({ try? Base64.decodeCanonical($0) }), key.count == 32,
              let signature = object.string("identitySig").flatMap({ try? Base64.decodeCanonical($0) }), signature.count == 64
        else { return nil }
        return Description(sdp: sdp, agreementKey: key, identitySignature: signature)
    }

    /// §13.1: both locators present (each may be null, not both), the m-line index an integer.
    private static func candidate(_ fields: [String: JSONValue]) -> CallCandidate? {
        guard case let .string(text)? = fields["candidate"], let mid = fields["sdpMid"], let index = fields["sdpMLineIndex"] else { return nil }
        var candidate = CallCandidate(candidate: text, sdpMid: nil, sdpMLineIndex: nil)
        switch mid {
        case .null: break
        case let .string(value): candidate.sdpMid = value
        default: return nil
        }
        switch index {
        case .null: break
        case let .number(value) where value.rounded() == value: candidate.sdpMLineIndex = Int(value)
        default: return nil
        }
        return candidate.isWellFormed ? candidate : nil
    }
}

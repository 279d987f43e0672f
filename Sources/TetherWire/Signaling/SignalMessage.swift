public import TetherEncoding
/// A `signal` envelope (signaling.md §5.4) as a sender writes it and the server forwards it:
/// exactly eight fields, values unchanged.
public struct SignalMessage: Sendable, Equatable {
    public static let maxBodyBytes = 32_768

    public let kind: SignalKind
    public let from: SignalingID
    public let to: SignalingID
    public let call: CallUUID
    /// The body's b64std text exactly as signed.
    public let body: String
    public let signature: [UInt8]

    public init(kind: SignalKind, from: SignalingID, to: SignalingID, call: CallUUID, body: String, signature: [UInt8]) {
        self.kind = kind
        self.from = from
        self.to = to
        self.call = call
        self.body = body
        self.signature = signature
    }

    /// Why a `signal` was `bad_message`, with the `kind` and `call` it carried when those were
    /// valid (§13.1: an `error` names them only then).
    public struct Fault: Error, Sendable, Equatable {
        public let reason: String
        public let kind: SignalKind?
        public let call: CallUUID?
    }

    /// §6.2 step 1, everything but "`from` is this connection's ID": `kind` known, `from` and `to`
    /// canonical and different, `call` a lowercase canonical UUID, `body` b64std decoding to at
    /// most 32,768 bytes of a JSON object, `sig` b64std of 64 bytes.
    public static func parse(_ fields: [String: JSONValue]) -> Result<SignalMessage, Fault> {
        typealias M = SignalingClientMessage
        var kind: SignalKind?
        if case let .string(text)? = fields["kind"] { kind = SignalKind(rawValue: text) }
        var call: CallUUID?
        if case let .string(text)? = fields["call"] { call = CallUUID(text) }
        func fault(_ reason: String) -> Result<SignalMessage, Fault> { .failure(Fault(reason: reason, kind: kind, call: call)) }
        guard M.hasVersion2(fields) else { return fault("v must be 2") }
        guard let kind else { return fault("unknown or missing kind") }
        guard let from = M.id(fields, "from") else { return fault("from is not a canonical ID") }
        guard let to = M.id(fields, "to") else { return fault("to is not a canonical ID") }
        guard to != from else { return fault("to equals from") }
        guard let call else { return fault("call is not a lowercase canonical UUID") }
        guard case let .string(body)? = fields["body"], body.utf8.count <= (maxBodyBytes + 2) / 3 * 4,
              let decoded = try? Base64.decodeCanonical(body) else { return fault("body is not b64std") }
        guard decoded.count <= maxBodyBytes else { return fault("body too large") }
        guard case .object? = JSONValue.parseStrict(decoded) else { return fault("body is not a JSON object") }
        guard let signature = M.base64(fields, "sig", count: 64) else { return fault("sig is not b64std of 64 bytes") }
        return .success(SignalMessage(kind: kind, from: from, to: to, call: call, body: body, signature: signature))
    }

    /// The bytes `sig` covers (§5.7).
    public var signedBytes: [UInt8] { SignalingTranscript.signal(kind: kind, from: from, to: to, call: call, body: body) }

    /// The envelope as sent and as forwarded: every value is ASCII that needs no JSON escaping.
    public func json() -> String {
        #"{"type":"signal","v":2,"kind":"\#(kind.rawValue)","from":"\#(from.canonical)","to":"\#(to.canonical)","call":"\#(call.text)","body":"\#(body)","sig":"\#(Base64.encode(signature))"}"#
    }
}

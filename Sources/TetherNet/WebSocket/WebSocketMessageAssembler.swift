/// Turns frames into messages (RFC 6455 §5.4–§5.6): continuation rules, a per-message size
/// cap (→ 1009), UTF-8 validation of text across fragments (→ 1007), and close-frame payload
/// validation (→ 1002 / 1007). Control frames may arrive between fragments.
public struct WebSocketMessageAssembler: Sendable {
    public enum Event: Sendable, Equatable {
        case text([UInt8])
        case binary([UInt8])
        case ping([UInt8])
        case pong([UInt8])
        /// The peer's close: its code (nil when the frame carried none) and reason.
        case close(code: UInt16?, reason: String)
    }

    public var maxMessageSize: Int
    private var fragments: [UInt8] = []
    private var validator = UTF8Validator()
    private var fragmentOpcode: WebSocketOpcode?

    public init(maxMessageSize: Int) { self.maxMessageSize = maxMessageSize }

    /// True while a fragmented message is incomplete.
    public var isAssembling: Bool { fragmentOpcode != nil }

    public mutating func consume(_ frame: WebSocketFrame) throws(WebSocketProtocolError) -> Event? {
        switch frame.opcode {
        case .ping: return .ping(frame.payload)
        case .pong: return .pong(frame.payload)
        case .close: return try Self.close(frame.payload)
        case .text, .binary:
            guard fragmentOpcode == nil else { throw .protocolError("new message inside a fragmented one") }
            guard frame.payload.count <= maxMessageSize else { throw .tooBig }
            if frame.fin {
                if frame.opcode == .text {
                    guard UTF8Validator.isValid(frame.payload) else { throw .invalidUTF8 }
                    return .text(frame.payload)
                }
                return .binary(frame.payload)
            }
            fragmentOpcode = frame.opcode
            validator = UTF8Validator()
            fragments = []
            try append(frame.payload)
            return nil
        case .continuation:
            guard let opcode = fragmentOpcode else { throw .protocolError("continuation without a message") }
            try append(frame.payload)
            guard frame.fin else { return nil }
            fragmentOpcode = nil
            let message = fragments
            fragments = []
            if opcode == .text {
                guard validator.isComplete else { throw .invalidUTF8 }
                return .text(message)
            }
            return .binary(message)
        }
    }

    private mutating func append(_ payload: [UInt8]) throws(WebSocketProtocolError) {
        guard fragments.count + payload.count <= maxMessageSize else { throw .tooBig }
        if fragmentOpcode == .text, !validator.feed(payload) { throw .invalidUTF8 }
        fragments += payload
    }

    static func close(_ payload: [UInt8]) throws(WebSocketProtocolError) -> Event {
        if payload.isEmpty { return .close(code: nil, reason: "") }
        guard payload.count >= 2 else { throw .protocolError("close payload of one byte") }
        let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
        guard WebSocketCloseCode.isValidOnWire(code) else { throw .protocolError("invalid close code \(code)") }
        let reason = Array(payload[2...])
        guard UTF8Validator.isValid(reason) else { throw .invalidUTF8 }
        return .close(code: code, reason: String(decoding: reason, as: UTF8.self))
    }
}

/// RFC 6455 opcodes. Others are reserved and refused with 1002.
public enum WebSocketOpcode: UInt8, Sendable, Hashable {
    case continuation = 0x0
    case text = 0x1
    case binary = 0x2
    case close = 0x8
    case ping = 0x9
    case pong = 0xA

    public var isControl: Bool { rawValue & 0x8 != 0 }
}

/// One frame with its payload unmasked.
public struct WebSocketFrame: Sendable, Hashable {
    public var fin: Bool
    public var opcode: WebSocketOpcode
    public var payload: [UInt8]

    public init(fin: Bool = true, opcode: WebSocketOpcode, payload: [UInt8] = []) {
        self.fin = fin
        self.opcode = opcode
        self.payload = payload
    }
}

/// A protocol violation and the close code it earns (RFC 6455 §7.4.1).
public struct WebSocketProtocolError: Error, Equatable, Sendable, CustomStringConvertible {
    public let closeCode: UInt16
    public let reason: String

    public init(_ closeCode: UInt16, _ reason: String) {
        self.closeCode = closeCode
        self.reason = reason
    }

    public var description: String { "\(closeCode) \(reason)" }

    static func protocolError(_ reason: String) -> WebSocketProtocolError { WebSocketProtocolError(WebSocketCloseCode.protocolError, reason) }
    static let tooBig = WebSocketProtocolError(WebSocketCloseCode.messageTooBig, "frame too large")
    static let invalidUTF8 = WebSocketProtocolError(WebSocketCloseCode.invalidPayload, "invalid UTF-8")
}

/// Close codes (RFC 6455 §7.4).
public enum WebSocketCloseCode {
    public static let normal: UInt16 = 1000
    public static let goingAway: UInt16 = 1001
    public static let protocolError: UInt16 = 1002
    public static let unsupportedData: UInt16 = 1003
    public static let noStatus: UInt16 = 1005
    public static let abnormal: UInt16 = 1006
    public static let invalidPayload: UInt16 = 1007
    public static let policyViolation: UInt16 = 1008
    public static let messageTooBig: UInt16 = 1009
    public static let mandatoryExtension: UInt16 = 1010
    public static let internalError: UInt16 = 1011
    /// "Try again later" (RFC 6455 registry): the signaling server's `unavailable`.
    public static let tryAgainLater: UInt16 = 1013

    /// Whether a peer may send `code` in a close frame: 1000–1003, 1007–1014 (IANA-registered;
    /// the reference relay's `ws` accepts them too) and the application range 3000–4999.
    /// 1004–1006 and 1015 are never sent on the wire; other 1xxx and 2xxx codes are unassigned.
    /// This matches every case of Autobahn 7.7 (valid) and 7.9 (invalid).
    public static func isValidOnWire(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: true
        default: false
        }
    }
}

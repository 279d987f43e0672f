/// Why bytes on the DCEP identifier (50) are not a DCEP message (RFC 8832 §5).
public enum DCEPDecodingError: Error, Sendable, Equatable, CustomStringConvertible {
    case empty
    /// A Message Type other than DATA_CHANNEL_OPEN (0x03) and DATA_CHANNEL_ACK (0x02).
    case unknownMessageType(UInt8)
    case unknownChannelType(UInt8)
    /// Fewer bytes than the fixed header or the label and protocol lengths promise.
    case truncated
    /// More bytes than the message's fields account for (DCEP has no padding).
    case trailingBytes(Int)
    case labelNotUTF8
    case protocolNotUTF8

    public var description: String {
        switch self {
        case .empty: "empty DCEP message"
        case let .unknownMessageType(type): "unknown DCEP message type \(type)"
        case let .unknownChannelType(type): "unknown DCEP channel type \(type)"
        case .truncated: "truncated DCEP message"
        case let .trailingBytes(count): "\(count) bytes after the DCEP message"
        case .labelNotUTF8: "DCEP label is not UTF-8"
        case .protocolNotUTF8: "DCEP protocol is not UTF-8"
        }
    }
}

/// The Data Channel Establishment Protocol's two messages (RFC 8832 §5), a pure codec.
public enum DCEPMessage: Sendable, Equatable {
    case open(DCEPOpen)
    case ack

    /// Message Type values (RFC 8832 §8.2.1).
    public static let dataChannelOpen: UInt8 = 0x03
    public static let dataChannelAck: UInt8 = 0x02

    /// The fixed part of a DATA_CHANNEL_OPEN before its label: type, channel type, priority,
    /// reliability parameter, label length, protocol length.
    static let openHeaderLength = 12

    public func encoded() -> [UInt8] {
        switch self {
        case .ack:
            return [Self.dataChannelAck]
        case let .open(open):
            let label = Array(open.label.utf8), proto = Array(open.protocol.utf8)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(Self.openHeaderLength + label.count + proto.count)
            bytes.append(Self.dataChannelOpen)
            bytes.append(open.channelType.rawValue)
            bytes.append(bigEndian: open.priority)
            bytes.append(bigEndian: open.reliabilityParameter)
            bytes.append(bigEndian: UInt16(label.count))
            bytes.append(bigEndian: UInt16(proto.count))
            bytes += label
            bytes += proto
            return bytes
        }
    }

    /// Reads exactly one message: an ACK is the single type byte, an OPEN its header and the
    /// label and protocol its lengths name, nothing after.
    public static func decode(_ bytes: [UInt8]) throws(DCEPDecodingError) -> DCEPMessage {
        guard let type = bytes.first else { throw .empty }
        switch type {
        case dataChannelAck:
            guard bytes.count == 1 else { throw .trailingBytes(bytes.count - 1) }
            return .ack
        case dataChannelOpen:
            guard bytes.count >= openHeaderLength else { throw .truncated }
            guard let channelType = DCEPChannelType(rawValue: bytes[1]) else { throw .unknownChannelType(bytes[1]) }
            let priority = UInt16(bigEndianAt: 2, in: bytes)
            let reliability = UInt32(UInt16(bigEndianAt: 4, in: bytes)) << 16 | UInt32(UInt16(bigEndianAt: 6, in: bytes))
            let labelLength = Int(UInt16(bigEndianAt: 8, in: bytes)), protocolLength = Int(UInt16(bigEndianAt: 10, in: bytes))
            let end = openHeaderLength + labelLength + protocolLength
            guard bytes.count >= end else { throw .truncated }
            guard bytes.count == end else { throw .trailingBytes(bytes.count - end) }
            let labelEnd = openHeaderLength + labelLength
            guard let label = String(validating: bytes[openHeaderLength..<labelEnd], as: UTF8.self) else { throw .labelNotUTF8 }
            guard let proto = String(validating: bytes[labelEnd..<end], as: UTF8.self) else { throw .protocolNotUTF8 }
            return .open(DCEPOpen(channelType: channelType, priority: priority, reliabilityParameter: reliability,
                                  label: label, protocol: proto))
        default:
            throw .unknownMessageType(type)
        }
    }
}

private extension [UInt8] {
    mutating func append(bigEndian value: UInt16) {
        append(UInt8(value >> 8))
        append(UInt8(value & 0xFF))
    }

    mutating func append(bigEndian value: UInt32) {
        append(bigEndian: UInt16(value >> 16))
        append(bigEndian: UInt16(value & 0xFFFF))
    }
}

private extension UInt16 {
    init(bigEndianAt offset: Int, in bytes: [UInt8]) {
        self = UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }
}

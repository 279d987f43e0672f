/// The Channel Type of a DATA_CHANNEL_OPEN (RFC 8832 §5.1, §8.2.2).
public enum DCEPChannelType: UInt8, Sendable, CaseIterable {
    /// DATA_CHANNEL_RELIABLE: ordered and reliable, the only type Tether accepts.
    case reliable = 0x00
    case reliableUnordered = 0x80
    case partialReliableRexmit = 0x01
    case partialReliableRexmitUnordered = 0x81
    case partialReliableTimed = 0x02
    case partialReliableTimedUnordered = 0x82
}

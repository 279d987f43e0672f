/// A DATA_CHANNEL_OPEN's fields (RFC 8832 §5.1).
public struct DCEPOpen: Sendable, Equatable {
    public var channelType: DCEPChannelType
    /// RFC 8831 §6.4's scale; 256 is what browsers send for the W3C default ("low").
    public var priority: UInt16
    /// Retransmissions or milliseconds for the partially reliable types; ignored for the others.
    public var reliabilityParameter: UInt32
    public var label: String
    public var `protocol`: String

    public init(channelType: DCEPChannelType, priority: UInt16, reliabilityParameter: UInt32, label: String, protocol: String) {
        precondition(label.utf8.count <= Int(UInt16.max) && `protocol`.utf8.count <= Int(UInt16.max),
                     "DCEP label and protocol lengths are 16 bits")
        self.channelType = channelType
        self.priority = priority
        self.reliabilityParameter = reliabilityParameter
        self.label = label
        self.protocol = `protocol`
    }

    /// Tether's one channel (signaling.md §7.4): `cryptext`, reliable and ordered, no protocol.
    public static let cryptext = DCEPOpen(channelType: .reliable, priority: 256, reliabilityParameter: 0,
                                          label: "cryptext", protocol: "")
}

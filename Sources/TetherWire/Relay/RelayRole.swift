/// The two slots of a room. The raw value is the Hello `role` string.
public enum RelayRole: String, Sendable, Hashable, CaseIterable {
    case mac
    case phone

    /// The role byte bound into join transcripts (relay.md §3.6).
    public var transcriptByte: UInt8 {
        switch self {
        case .mac: 0x01
        case .phone: 0x02
        }
    }
}

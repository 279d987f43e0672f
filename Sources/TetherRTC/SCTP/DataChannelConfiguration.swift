/// What one side of a data channel association needs from the SDP and DTLS (RFC 8841, RFC 8832).
public struct DataChannelConfiguration: Sendable, Equatable {
    /// This side's DTLS role. It picks the parity of the stream ids this side opens (RFC 8832 §6):
    /// the client even, the server odd.
    public enum DTLSRole: Sendable, Equatable {
        case client
        case server
    }

    /// RFC 8841 §5's a=sctp-port default.
    public static let defaultPort: UInt16 = 5000
    /// What an absent a=max-message-size means (RFC 8841 §6.1), and what this side advertises:
    /// twice a secure-channel frame (32,785 bytes), and the most a peer can make this side buffer
    /// for one message.
    public static let defaultMaxMessageSize = 65_536

    public var role: DTLSRole
    /// Whether this side sends the DATA_CHANNEL_OPEN (the caller, whose offer has the channel,
    /// signaling.md §7.3) or waits for the peer's. Independent of `role`: the offerer is usually
    /// the DTLS server.
    public var opensChannel: Bool
    /// a=sctp-port: this side's, and the peer's.
    public var localPort: UInt16
    public var remotePort: UInt16
    /// The peer's a=max-message-size; 0 means the peer takes any size (RFC 8841 §6.1), so only
    /// `maxMessageSize` bounds sends.
    public var peerMaxMessageSize: Int
    /// This side's a=max-message-size: larger incoming messages are a protocol violation, and
    /// this side sends none larger either. At least 65,536.
    public var maxMessageSize: Int

    public init(role: DTLSRole, opensChannel: Bool, localPort: UInt16 = defaultPort, remotePort: UInt16 = defaultPort,
                peerMaxMessageSize: Int = defaultMaxMessageSize, maxMessageSize: Int = defaultMaxMessageSize) {
        precondition(peerMaxMessageSize >= 0, "a=max-message-size is not negative")
        precondition(maxMessageSize >= Self.defaultMaxMessageSize, "this side takes at least 65,536-byte messages")
        self.role = role
        self.opensChannel = opensChannel
        self.localPort = localPort
        self.remotePort = remotePort
        self.peerMaxMessageSize = peerMaxMessageSize
        self.maxMessageSize = maxMessageSize
    }

    /// The largest message `send` takes.
    public var sendLimit: Int {
        peerMaxMessageSize == 0 ? maxMessageSize : min(peerMaxMessageSize, maxMessageSize)
    }

    /// The most bytes `send` holds back while SCTP's send buffer is full before it refuses with
    /// `queueFull`, and the size of that buffer: 1 MiB (sixteen 64 KiB messages), or two of the
    /// largest messages if that is more.
    public var queueLimit: Int { max(1 << 20, 2 * maxMessageSize) }

    /// The stream this side's DATA_CHANNEL_OPEN goes on: the first of its parity.
    var openingStream: UInt16 { role == .client ? 0 : 1 }

    /// Whether `stream` has the parity of the streams the peer opens.
    func isPeerStream(_ stream: UInt16) -> Bool { stream % 2 != openingStream }
}

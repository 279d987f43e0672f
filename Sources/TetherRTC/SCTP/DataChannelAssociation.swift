import CTetherSCTP
import Dispatch
import Glibc
import TetherSync

/// One SCTP association inside DTLS (RFC 8831 §6) carrying Tether's one data channel,
/// `cryptext`, reliable and ordered (signaling.md §7.4), set up with DCEP (RFC 8832).
///
/// Create it once DTLS is connected: it binds and connects at once (both sides connect; SCTP
/// resolves the collision). Hand it DTLS's decrypted application data with `receivePacket`; it
/// hands SCTP packets to encrypt to `sendPacket`.
///
/// Threading contract — one hand-off, the association's private serial queue:
/// - `sendPacket` and `onEvent` are called on that queue only, one at a time, in order; never on
///   usrsctp's threads and never inside a usrsctp call. Owners hop from there to their own loop.
/// - Every public method may be called from any thread, the two closures included, and returns
///   at once: `receivePacket`, `closeChannel` and `close` queue their work; `send` checks and
///   queues the message synchronously (so its errors are synchronous) and SCTP takes it on the
///   queue.
/// - usrsctp calls back on its timer thread or inside usrsctp calls made on the queue; those
///   callbacks only copy and hop onto the queue (`SCTPStack`).
/// - After `close`, no event is reported; `sendPacket` may still get the ABORT that `close`
///   makes, and is then released (and `onEvent` with it), breaking any cycle through the owner.
public final class DataChannelAssociation: @unchecked Sendable { // usrsctp state only on the association's serial queue; callbacks hop onto it
    public let configuration: DataChannelConfiguration

    /// The path MTU inside DTLS: IPv6's minimum 1280 less IPv6 (40), UDP (8), a DTLS 1.2 GCM
    /// record (37) and a TURN ChannelData header (4), so a packet never fragments whichever way
    /// it goes. There is no path MTU discovery through DTLS.
    static let pathMTU: UInt32 = 1191
    /// RTO in ms: a faster first retransmission than RFC 9260's 3 s, as browsers use, with the
    /// ceiling low enough that a lossy call recovers in seconds.
    static let retransmissionTimeout = (initial: UInt32(1000), min: UInt32(400), max: UInt32(10_000))

    let id: UInt
    let queue: DispatchQueue
    /// What `send` reads and writes from any thread; everything else below is the queue's.
    let shared = Locked(Shared())

    var socket: OpaquePointer?
    var sendPacket: (@Sendable ([UInt8]) -> Void)?
    var onEvent: (@Sendable (DataChannelEvent) -> Void)?
    var ackReceived = false
    var partialMessages: [UInt16: PartialMessage] = [:]
    /// Streams whose outgoing reset usrsctp could not take yet (one request at a time).
    var pendingResets: [UInt16] = []
    var closeResetRequested = false

    struct Shared {
        var phase: Phase = .connecting
        var channelStream: UInt16?
        var outbox: [OutgoingMessage] = []
        var outboxBytes = 0
    }

    enum Phase: Equatable {
        case connecting
        /// Up; the side that does not open waits for the peer's DATA_CHANNEL_OPEN.
        case awaitingOpen
        case open
        /// This side reset its outgoing stream and waits for the peer's.
        case closing
        case closed
        case failed
    }

    public init(configuration: DataChannelConfiguration, sendPacket: @escaping @Sendable ([UInt8]) -> Void,
                onEvent: @escaping @Sendable (DataChannelEvent) -> Void) throws(DataChannelSetupError) {
        SCTPStack.start()
        self.configuration = configuration
        id = SCTPRegistry.allocateID()
        queue = DispatchQueue(label: "tether.sctp.\(id)")
        self.sendPacket = sendPacket
        self.onEvent = onEvent
        let bufferSize = UInt32(configuration.queueLimit)
        guard let socket = tether_sctp_open(id, bufferSize / 4) else { throw .socket(errno: errno) }
        self.socket = socket
        let timeout = Self.retransmissionTimeout
        let option = tether_sctp_configure(socket, bufferSize, UInt32(configuration.maxMessageSize),
                                           timeout.initial, timeout.min, timeout.max)
        guard option == 0 else { throw .option(option, errno: errno) }
        SCTPRegistry.insert(id, SCTPRegistry.Entry(queue: queue, association: self))
        let connected = tether_sctp_connect(socket, id, configuration.localPort, configuration.remotePort, Self.pathMTU)
        guard connected == 0 else { throw .connect(errno: -connected) }
    }

    deinit {
        if let socket { tether_sctp_close(socket, id) }
        SCTPRegistry.remove(id)
    }

    /// One SCTP packet from DTLS (a decrypted application data record).
    public func receivePacket(_ packet: [UInt8]) {
        queue.async { [self] in
            guard socket != nil else { return }
            packet.withUnsafeBytes { tether_sctp_input(id, $0.baseAddress, $0.count) }
        }
    }

    /// Queues one message (WebRTC Binary; WebRTC Binary Empty for an empty one) on the open
    /// channel; it reaches the peer whole, in order, or the association fails.
    public func send(_ message: [UInt8]) throws(DataChannelSendError) {
        let limit = configuration.sendLimit
        guard message.count <= limit else { throw .messageTooLarge(size: message.count, limit: limit) }
        let ppid: DataChannelPPID = message.isEmpty ? .webRTCBinaryEmpty : .webRTCBinary
        let payload = message.isEmpty ? [0] : message
        let wasEmpty = try shared.withLock { (shared) throws(DataChannelSendError) -> Bool in
            switch shared.phase {
            case .connecting, .awaitingOpen: throw .notOpen
            case .closing, .closed, .failed: throw .closed
            case .open: break
            }
            guard let stream = shared.channelStream else { throw .notOpen }
            let limit = configuration.queueLimit
            guard shared.outboxBytes + payload.count <= limit else { throw .queueFull(limit: limit) }
            let wasEmpty = shared.outbox.isEmpty
            shared.outbox.append(OutgoingMessage(stream: stream, ppid: ppid, payload: payload))
            shared.outboxBytes += payload.count
            return wasEmpty
        }
        // A non-empty outbox is already being flushed, or waits for usrsctp's send callback.
        if wasEmpty { queue.async { [self] in flushOutbox() } }
    }

    /// Closes the channel the WebRTC way (RFC 8831 §6.7): once the queued messages are in SCTP,
    /// this side resets its outgoing stream, the peer answers with its own, and both report
    /// `channelClosed`. The association stays up until `close`.
    public func closeChannel() {
        queue.async { [self] in beginChannelClose() }
    }

    /// Aborts the association (SO_LINGER 0) and releases everything: the socket, the AF_CONN
    /// address, the closures. Idempotent.
    public func close() {
        queue.async { [self] in
            shared.withLock { $0.phase = .closed }
            teardown()
        }
    }

    /// On the queue: the socket goes (its ABORT still reaches `sendPacket`, queued just now), then
    /// the closures, in a later turn of the queue after that packet.
    func teardown() {
        guard let socket else { return }
        self.socket = nil
        tether_sctp_close(socket, id)
        SCTPRegistry.remove(id)
        partialMessages = [:]
        pendingResets = []
        shared.withLock {
            $0.outbox = []
            $0.outboxBytes = 0
        }
        queue.async { [self] in
            sendPacket = nil
            onEvent = nil
        }
    }

    /// Reports unless torn down (`fail` reports before it tears down).
    func report(_ event: DataChannelEvent) {
        guard socket != nil else { return }
        onEvent?(event)
    }

    func deliverPacket(_ packet: [UInt8]) {
        sendPacket?(packet)
    }

    /// Ends the association for `failure`, aborting it, and reports that once.
    func fail(_ failure: DataChannelFailure) {
        guard socket != nil else { return }
        shared.withLock { $0.phase = .failed }
        report(.failed(failure))
        teardown()
    }

    var phase: Phase { shared.withLock { $0.phase } }

    var channelStream: UInt16? { shared.withLock { $0.channelStream } }
}

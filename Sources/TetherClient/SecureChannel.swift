public import TetherCrypto
import TetherNoise
import TetherSync
import TetherWire

/// Why the end-to-end channel failed. Any failure ends the channel: the caller reconnects and
/// runs a fresh handshake (client.md §9.6).
public enum SecureChannelError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The handshake did not complete: a wrong static key or pid, or a tampered message.
    case handshakeFailed(String)
    /// The phone's static key is not the one pinned at pairing (client.md §9.4).
    case unexpectedPeer
    /// The socket closed (before the handshake finished, or while waiting for a frame).
    case closed
    /// A transport message failed authentication: dropped, reordered, replayed or altered.
    case authenticationFailed
    /// `receive()` was called while another call was still waiting: frames are one ordered
    /// stream, so the channel has exactly one reader at a time.
    case receiveInProgress

    public var description: String {
        switch self {
        case let .handshakeFailed(why): "the secure handshake failed: \(why)"
        case .unexpectedPeer: "the peer is not the paired device"
        case .closed: "the connection closed"
        case .authenticationFailed: "a message failed authentication; reconnecting"
        case .receiveInProgress: "another receive is already waiting on this channel"
        }
    }
}

/// The Noise channel between the paired devices (client.md §9): `Noise_XK_25519_ChaChaPoly_BLAKE2s`
/// with the pid prologue and empty payloads, through the relay's splice, then chunked transport
/// frames. The phone initiates (it knows the Mac's static key from the link); the Mac responds.
public final class SecureChannel: @unchecked Sendable { // sending is locked in NoiseFrameSender; one receive() at a time holds the receive side
    /// Largest application frame accepted (a reassembly cap, so a peer cannot exhaust memory).
    public static let maxFrameLength = 16 * 1024 * 1024

    /// The Noise handshake hash, which both sides share and derive ``sas`` from.
    public let handshakeHash: [UInt8]
    /// The peer's static key (the phone's, as the Mac learns it from message 3).
    public let remoteStaticKey: X25519.PublicKey?
    /// The six-digit code both sides derive from the handshake hash (client.md §10).
    public var sas: String { SAS.derive(handshakeHash: handshakeHash) }

    private let socket: AdmittedSocket
    private let sender: NoiseFrameSender
    // The receive side: touched only by the one `receive()` call in progress, which `reading`
    // admits (one reader at a time is the channel's rule, checked, not assumed).
    private var receiver: NoiseFrameReceiver
    private var inbound: InboundFrames.AsyncIterator
    private var failed = false
    private let reading = Locked(false)

    private init(socket: AdmittedSocket, inbound: InboundFrames.AsyncIterator, transport: NoiseTransport) throws(SecureChannelError) {
        guard let sending = transport.sending, let receiving = transport.receiving else { throw .handshakeFailed("no transport keys") }
        self.socket = socket
        self.inbound = inbound
        handshakeHash = transport.handshakeHash
        remoteStaticKey = transport.remoteStaticKey
        sender = NoiseFrameSender(sending)
        receiver = NoiseFrameReceiver(receiving, maxFrameLength: Self.maxFrameLength)
    }

    /// The phone's side: `responderStaticKey` is `rs` from the pairing link.
    public static func initiate(over socket: AdmittedSocket, staticKey: X25519.PrivateKey, responderStaticKey: X25519.PublicKey,
                                pairingID: String) async throws(SecureChannelError) -> SecureChannel {
        var inbound = socket.frames.makeAsyncIterator()
        do throws(SecureChannelError) {
            var handshake = try noise { () throws(NoiseError) in
                try HandshakeState(.companionXK, role: .initiator, prologue: PairingLink.noisePrologue(pairingID: pairingID),
                                   staticKey: staticKey, remoteStaticKey: responderStaticKey)
            }
            socket.send(try noise { () throws(NoiseError) in try handshake.writeMessage() })
            guard let second = await inbound.next() else { throw SecureChannelError.closed }
            _ = try noise { () throws(NoiseError) in try handshake.readMessage(second) }
            socket.send(try noise { () throws(NoiseError) in try handshake.writeMessage() })
            let transport = try noise { () throws(NoiseError) in try handshake.transportChannel() }
            return try SecureChannel(socket: socket, inbound: inbound, transport: transport)
        } catch {
            socket.close()
            throw error
        }
    }

    /// The Mac's side. With `pinnedPeer` (every connection after the first pairing) any other
    /// phone static key is refused.
    public static func respond(over socket: AdmittedSocket, staticKey: X25519.PrivateKey, pairingID: String,
                               pinnedPeer: X25519.PublicKey? = nil) async throws(SecureChannelError) -> SecureChannel {
        var inbound = socket.frames.makeAsyncIterator()
        do throws(SecureChannelError) {
            var handshake = try noise { () throws(NoiseError) in
                try HandshakeState(.companionXK, role: .responder, prologue: PairingLink.noisePrologue(pairingID: pairingID), staticKey: staticKey)
            }
            guard let first = await inbound.next() else { throw SecureChannelError.closed }
            _ = try noise { () throws(NoiseError) in try handshake.readMessage(first) }
            socket.send(try noise { () throws(NoiseError) in try handshake.writeMessage() })
            guard let third = await inbound.next() else { throw SecureChannelError.closed }
            _ = try noise { () throws(NoiseError) in try handshake.readMessage(third) }
            let transport = try noise { () throws(NoiseError) in try handshake.transportChannel() }
            let channel = try SecureChannel(socket: socket, inbound: inbound, transport: transport)
            if let pinnedPeer, channel.remoteStaticKey != pinnedPeer { throw SecureChannelError.unexpectedPeer }
            return channel
        } catch {
            socket.close()
            throw error
        }
    }

    /// Runs a Noise step; its failure is a failed handshake.
    private static func noise<T>(_ body: () throws(NoiseError) -> T) throws(SecureChannelError) -> T {
        do { return try body() } catch { throw .handshakeFailed("\(error)") }
    }

    /// Sends one application frame of any size (chunked into transport messages, in order).
    public func send(_ frame: [UInt8]) throws(SecureChannelError) {
        do {
            for message in try sender.seal(frame) { socket.send(message) }
        } catch {
            throw .authenticationFailed
        }
    }

    /// The next application frame; nil once the socket has closed. After an authentication
    /// failure the socket is closed and every later call fails too. One caller at a time: a
    /// call made while another waits fails with `receiveInProgress`, touching nothing.
    public func receive() async throws(SecureChannelError) -> [UInt8]? {
        guard reading.withLock({ busy in
            defer { busy = true }
            return !busy
        }) else { throw .receiveInProgress }
        defer { reading.withLock { $0 = false } }
        guard !failed else { throw .authenticationFailed }
        while let message = await inbound.next() {
            do {
                if let frame = try receiver.receive(message) { return frame }
            } catch {
                failed = true
                socket.close()
                throw .authenticationFailed
            }
        }
        return nil
    }

    /// Closes the socket under the channel; a waiting ``receive()`` returns nil.
    public func close() { socket.close() }
}

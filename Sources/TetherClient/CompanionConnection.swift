import Foundation
public import TetherWire
import TetherSync
import TetherDevice

/// A working session between the paired devices, after pairing or reconnect setup: application
/// frames of any size both ways. The control envelopes that are not the application's own are
/// handled here: a `ping` is answered with `pong` (on the Mac), `unpairing`/`unpaired` end the
/// pairing, the phone's `pushStatus` is handed to the Mac; every other frame is the application's.
public final class CompanionConnection: Sendable {
    /// What ``receive()`` hands the application: its own frames, and the two protocol events it
    /// must act on.
    public enum Incoming: Sendable, Equatable {
        /// An application frame from the other device, as it sent it.
        case message([UInt8])
        /// The other device unpaired (its farewell arrived).
        case peerUnpaired
        /// On the Mac: the phone's push registration (client.md §12.6, push.md §3.3).
        case pushStatus(PushStatus)
    }

    /// Which side of the pairing this device plays.
    public let role: RelayRole
    /// The end-to-end channel the session runs over.
    public let channel: SecureChannel
    /// The relay socket under the channel.
    public let socket: AdmittedSocket

    /// The request id of the ping still awaiting its pong.
    private let unansweredPing = Locked<UInt64?>(nil)

    init(role: RelayRole, channel: SecureChannel, socket: AdmittedSocket) {
        self.role = role
        self.channel = channel
        self.socket = socket
    }

    /// The phone's liveness check of the other end of the channel, not just of the relay path:
    /// a `ping` request every `interval`, and no `pong` within `timeout` closes the
    /// channel so a fresh handshake follows. It matters when the relay re-splices the phone to
    /// a newer Mac (relay.md §3.5: "stale Noise state is left to the end-to-end layer"): that Mac
    /// waits for a handshake the idle phone would otherwise never start. Request ids continue
    /// after the setup requests (client.md §12.2).
    func startPinging(every interval: Duration, timeout: Duration, firstRequestID: UInt64, clock: any DeviceClock) -> Task<Void, Never> {
        Task { [weak self] in
            var id = firstRequestID
            while !Task.isCancelled {
                await clock.sleep(for: interval)
                guard let self, !Task.isCancelled else { return }
                self.unansweredPing.withLock { $0 = id }
                try? self.channel.send(CompanionEnvelope(requestID: id, .ping).frame)
                await clock.sleep(for: timeout)
                guard !Task.isCancelled else { return }
                if self.unansweredPing.withLock({ $0 == id }) {
                    self.channel.close()
                    return
                }
                id += 1
            }
        }
    }

    /// Sends one application frame (chunked as needed).
    public func send(_ frame: [UInt8]) throws(CompanionError) {
        do { try channel.send(frame) } catch { throw .channel(error) }
    }

    /// The next application frame or event; nil once the connection closed. Envelopes
    /// (client.md §12.2) are the protocol's, never the application's: they are answered or
    /// dropped here. Everything else, including chat lines, is the application's.
    public func receive() async throws(CompanionError) -> Incoming? {
        while true {
            let next: [UInt8]?
            do { next = try await channel.receive() } catch { throw .channel(error) }
            guard let frame = next else { return nil }
            if frame.isEmpty { continue }  // dropped (client.md §12.1)
            guard frame.first == UInt8(ascii: "{"), let envelope = CompanionEnvelope(frame: frame) else { return .message(frame) }
            switch envelope.payload {
            case .ping:
                if role == .mac { try? channel.send(CompanionEnvelope(requestID: envelope.requestID, .pong).frame) }
            case .unpairing, .unpaired:
                return .peerUnpaired
            case .hello:
                // A repeated hello is answered as the first was (client.md §12.5).
                if role == .mac, let id = envelope.requestID {
                    try? channel.send(CompanionEnvelope(requestID: id, .hello(revision: CompanionRevision.current, minimumPeer: CompanionRevision.minimumPeer,
                                                                              wantsNotificationPermission: false)).frame)
                }
            case let .pushStatus(status):
                if role == .mac { return .pushStatus(status) }
            case .unsupported:
                // A request this side does not serve gets a correlated error (client.md §12.2);
                // events without a request id are ignored.
                if role == .mac, let id = envelope.requestID {
                    try? channel.send(CompanionEnvelope(requestID: id, .error(code: "unsupported", message: "not supported by this Mac")).frame)
                }
            case .pong:
                unansweredPing.withLock { if $0 == envelope.requestID { $0 = nil } }
            case .error, .relayRoomSecretStored, .relayRoomSecret:
                continue
            }
        }
    }

    /// Tells the other device this pairing is over (`unpairing` from the phone, `unpaired` from
    /// the Mac, client.md §12.6), then closes.
    public func sayFarewell() {
        try? channel.send(CompanionEnvelope(role == .phone ? .unpairing : .unpaired).frame)
        channel.close()
    }

    /// Closes the channel and its socket without a farewell: the pairing stays, and the endpoint
    /// reconnects.
    public func close() { channel.close() }
}

import TetherCall
import TetherSync
import TetherNet

/// A media delegate that keeps every report, for the in-memory transport's tests.
final class MediaRecorder: CallMediaTransportDelegate, Sendable {
    private let lock = NetLock()
    nonisolated(unsafe) private var stored: [CallMediaEvent] = []

    func mediaTransport(_ transport: any CallMediaTransport, didReport event: CallMediaEvent) {
        lock.withLock { stored.append(event) }
    }

    var events: [CallMediaEvent] { lock.withLock { stored } }

    var messages: [[UInt8]] { events.compactMap { if case let .channelMessage(bytes) = $0 { bytes } else { nil } } }

    var description: String? { events.lazy.compactMap { if case let .localDescription(sdp) = $0 { sdp } else { nil } }.first }

    var candidates: [CallCandidate] { events.compactMap { if case let .localCandidate(candidate) = $0 { candidate } else { nil } } }
}

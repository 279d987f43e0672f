import TetherSync
import Dispatch
import Foundation
import TetherCall
import TetherRTC
import TetherWire

/// Monotonic nanoseconds: the one clock every measurement and the secure channel use.
func monotonicNow() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// The same clock as the secure channel reads it (`DispatchTime` is CLOCK_MONOTONIC on Linux).
func channelNow() -> MonotonicInstant { MonotonicInstant(nanoseconds: monotonicNow()) }

/// Two RTCMediaTransports in one process wired to each other the way two signaling clients would
/// be, but with no server in between: each description and candidate is handed to the other side
/// as soon as it is reported (trickle), so what is measured is the transport alone.
final class TransportPair: @unchecked Sendable {  // `lock` guards every var
    enum Role: Sendable { case offerer, answerer }

    let offerer: RTCMediaTransport
    let answerer: RTCMediaTransport
    private let offererEvents: Forwarder
    private let answererEvents: Forwarder
    private let lock = NSCondition()
    private var opened: [Role: UInt64] = [:]
    private var failure: String?
    private var handler: (@Sendable (Role, [UInt8]) -> Void)?

    init(iceServers: [ICEServer] = [], options: RTCMediaTransport.Options) {
        offerer = RTCMediaTransport(iceServers: iceServers, options: options)
        answerer = RTCMediaTransport(iceServers: iceServers, options: options)
        offererEvents = Forwarder()
        answererEvents = Forwarder()
        offerer.delegate = offererEvents
        answerer.delegate = answererEvents
        offererEvents.pair = self
        answererEvents.pair = self
        offererEvents.role = .offerer
        answererEvents.role = .answerer
    }

    /// Where data-channel messages go; set before the first one can arrive.
    func onMessage(_ handler: @escaping @Sendable (Role, [UInt8]) -> Void) { lock.withLock { self.handler = handler } }

    /// Runs createOffer and waits for the channel to open on both sides: the time it took, or the
    /// failure.
    func connect(timeout seconds: Double) -> Result<UInt64, BenchFailure> {
        let start = monotonicNow()
        offerer.perform(.createOffer)
        let deadline = Date().addingTimeInterval(seconds)
        lock.lock()
        defer { lock.unlock() }
        while opened.count < 2, failure == nil {
            if !lock.wait(until: deadline) { break }
        }
        if failure != nil {
            lock.unlock()
            defer { lock.lock() }
            return .failure(BenchFailure(failed ?? "failed"))
        }
        guard opened.count == 2, let last = opened.values.max() else {
            return .failure(BenchFailure("the channel did not open on both sides within \(seconds) s"))
        }
        return .success(last - start)
    }

    /// What failed, with the transports' own reasons; nil while nothing did. Not from a report:
    /// `lastProblem` waits for the transport's queue, the very thread that reports.
    var failed: String? {
        guard let failure = lock.withLock({ failure }) else { return nil }
        let reasons = [offerer.lastProblem, answerer.lastProblem].compactMap(\.self)
        return reasons.isEmpty ? failure : "\(failure): \(reasons.joined(separator: "; "))"
    }

    func close() {
        offerer.perform(.close)
        answerer.perform(.close)
    }

    fileprivate func report(_ event: CallMediaEvent, from role: Role) {
        let peer = role == .offerer ? answerer : offerer
        switch event {
        case let .localDescription(sdp):
            peer.perform(role == .offerer ? .acceptOffer(sdp: sdp) : .setRemoteAnswer(sdp: sdp))
        case let .localCandidate(candidate):
            peer.perform(.addRemoteCandidate(candidate))
        case .channelOpen:
            let now = monotonicNow()
            lock.withLock {
                opened[role] = now
                lock.broadcast()
            }
        case let .channelMessage(bytes):
            lock.withLock { handler }?(role, bytes)
        case .channelClosed, .failed:
            lock.withLock {
                if failure == nil { failure = "\(role): \(event)" }
                lock.broadcast()
            }
        }
    }
}

/// The delegate of one transport: it only forwards, tagged with the side, so the pair holds the
/// wiring in one place.
private final class Forwarder: CallMediaTransportDelegate, @unchecked Sendable {  // set once, before the first command
    weak var pair: TransportPair?
    var role: TransportPair.Role = .offerer

    func mediaTransport(_ transport: any CallMediaTransport, didReport event: CallMediaEvent) {
        pair?.report(event, from: role)
    }
}

struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

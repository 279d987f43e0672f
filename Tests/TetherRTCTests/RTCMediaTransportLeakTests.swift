import Foundation
import TetherCall
import TetherRTC
import TetherTestSupport
import XCTest

/// Whole calls' media come and go without leaks: 200 calls (400 transports) each set up on
/// loopback to an open data channel, carry a message, and close; descriptors and threads come
/// back to where they were after a warm-up call (usrsctp's stack threads live for the process).
final class RTCMediaTransportLeakTests: XCTestCase {
    /// Two transports wired back to back: descriptions, then trickled candidates, as the call
    /// machine orders them (a candidate only once the remote description is set).
    final class Pair: @unchecked Sendable {  // `lock` guards the queues
        let offerer = RTCMediaTransport(iceServers: [], options: .init(localAddresses: ["127.0.0.1"]))
        let answerer = RTCMediaTransport(iceServers: [], options: .init(localAddresses: ["127.0.0.1"]))
        let offererEvents = Relay(), answererEvents = Relay()

        final class Relay: CallMediaTransportDelegate, @unchecked Sendable {  // `lock` guards every member
            let lock = NSLock()
            var peer: RTCMediaTransport?
            var ready = false
            var held: [CallCandidate] = []
            var open = false
            var messages = 0
            var failed = false
            var onDescription: ((String) -> Void)?

            func mediaTransport(_ transport: any CallMediaTransport, didReport event: CallMediaEvent) {
                switch event {
                case let .localDescription(sdp): lock.withLock { onDescription }?(sdp)
                case let .localCandidate(candidate):
                    let target: RTCMediaTransport? = lock.withLock {
                        guard ready else { held.append(candidate); return nil }
                        return peer
                    }
                    target?.perform(.addRemoteCandidate(candidate))
                case .channelOpen: lock.withLock { open = true }
                case .channelMessage: lock.withLock { messages += 1 }
                case .failed: lock.withLock { failed = true }
                case .channelClosed: break
                }
            }

            /// The peer has our description now: what was held goes, and the rest follows.
            func release() {
                let (target, queued): (RTCMediaTransport?, [CallCandidate]) = lock.withLock {
                    ready = true
                    defer { held = [] }
                    return (peer, held)
                }
                for candidate in queued { target?.perform(.addRemoteCandidate(candidate)) }
            }
        }

        init() {
            offerer.delegate = offererEvents
            answerer.delegate = answererEvents
            offererEvents.peer = answerer
            answererEvents.peer = offerer
            let answerer = self.answerer, offerer = self.offerer, offererEvents = self.offererEvents, answererEvents = self.answererEvents
            offererEvents.onDescription = { sdp in
                answerer.perform(.acceptOffer(sdp: sdp))
                offererEvents.release()
            }
            answererEvents.onDescription = { sdp in
                offerer.perform(.setRemoteAnswer(sdp: sdp))
                answererEvents.release()
            }
        }

        /// Sets up, waits for both channels, sends one message each way; false if it did not.
        func run() -> Bool {
            offerer.perform(.createOffer)
            // True once `check` holds of both ends; false at a failure or after 10 s.
            func both(_ check: (Relay) -> Bool) -> Bool {
                Eventually.poll(within: 10, every: 0.002) { () -> Bool? in
                    if offererEvents.lock.withLock({ check(offererEvents) }), answererEvents.lock.withLock({ check(answererEvents) }) { return true }
                    if offererEvents.lock.withLock({ offererEvents.failed }) || answererEvents.lock.withLock({ answererEvents.failed }) { return false }
                    return nil
                }.0 ?? false
            }
            guard both({ $0.open }) else { return false }
            offerer.perform(.send([1, 2, 3]))
            answerer.perform(.send([4, 5, 6]))
            return both { $0.messages == 1 }
        }

        func close() {
            offerer.perform(.close)
            answerer.perform(.close)
        }
    }

    func testTwoHundredCallsOpenAndCloseAndDescriptorsAndThreadsComeBack() {
        let warmUp = Pair()
        XCTAssertTrue(warmUp.run(), "a warm-up call connects")
        warmUp.close()
        let before = ProcessResources.settled()
        for index in 0..<200 {
            let pair = Pair()
            guard pair.run() else { return XCTFail("call \(index) did not connect") }
            pair.close()
        }
        before.assertReturned()
    }
}

@testable import TetherCall
import TetherSync
import XCTest

/// The pacer against the receiver's rule when delivery jitters: frames released a pacing window
/// apart may arrive closer together, and the peer must still never count 41 in its window.
final class FramePacingJitterTests: XCTestCase {
    func testABurstPacedForTheSenderNeverExceedsTheReceiversWindowUnderAQuarterSecondOfJitter() {
        var pacer = FramePacer(limit: CallChannelLimits.framesPerWindow, window: CallChannelLimits.pacingWindow)
        for _ in 0..<400 { pacer.enqueue([0x02]) }
        var releases: [MonotonicInstant] = []
        var now = MonotonicInstant(nanoseconds: 1_000_000_000)
        while releases.count < 400 {
            releases += pacer.release(now: now).map { _ in now }
            now = pacer.nextRelease.map { max($0, now + .nanoseconds(1)) } ?? now + .milliseconds(1)
        }
        // The worst case: every other burst is delayed by just under 250 ms and the next is not,
        // so it catches up with the delayed one.
        let burst = CallChannelLimits.framesPerWindow
        let arrivals = releases.enumerated().map { index, at in at + ((index / burst) % 2 == 0 ? Duration.milliseconds(249) : .zero) }.sorted()
        var receiver = IncomingFrameWindow(limit: CallChannelLimits.framesPerWindow, window: CallChannelLimits.rateWindow)
        for (index, at) in arrivals.enumerated() {
            XCTAssertTrue(receiver.admit(now: at), "frame \(index) arriving at \(at) is the 41st in the peer's window")
        }
        // The same burst paced to exactly the receiver's 1 s fails under that jitter: the margin matters.
        var tight = FramePacer(limit: CallChannelLimits.framesPerWindow, window: CallChannelLimits.rateWindow)
        for _ in 0..<80 { tight.enqueue([0x02]) }
        var tightReleases: [MonotonicInstant] = []
        now = MonotonicInstant(nanoseconds: 1_000_000_000)
        while tightReleases.count < 80 {
            tightReleases += tight.release(now: now).map { _ in now }
            now = tight.nextRelease.map { max($0, now + .nanoseconds(1)) } ?? now + .milliseconds(1)
        }
        let jittered = tightReleases.enumerated().map { index, at in at + (index < burst ? Duration.microseconds(1) : .zero) }.sorted()
        var peer = IncomingFrameWindow(limit: CallChannelLimits.framesPerWindow, window: CallChannelLimits.rateWindow)
        XCTAssertFalse(jittered.allSatisfy { peer.admit(now: $0) }, "a microsecond of jitter is enough without the margin")
    }
}

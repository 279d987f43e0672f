import Foundation
import Glibc
@testable import TetherClient
import TetherNet
import TetherTestSupport
import TetherWire
import XCTest

/// Client keepalive (client.md §14): a ping every 15 s; no pong within 10 s ends the socket
/// (1001 `keepalive timeout`) so the reconnect loop can start. A manual clock drives the loop;
/// the relay answering is a real process, stopped (SIGSTOP) to play a dead path.
///
/// Every step waits for the loop to have run its timers before the clock moves again: on a
/// loaded machine a fixed sleep let the clock run ahead of the loop, so the 30 s ping went out
/// at 39 s and its timeout had not come due at 40 s.
final class KeepaliveTests: XCTestCase {
    func testAnAnsweredPingKeepsTheSocketAndAnUnansweredOneEndsItAfterTenSeconds() async throws {
        let relay = try RelayProcess()
        defer {
            kill(relay.process.processIdentifier, SIGCONT)
            relay.stop()
        }
        let clock = ManualClock()
        let group = try EventLoopGroup(count: 1, clock: clock)
        defer { group.shutdown() }
        let loop = group.loops[0]
        let room = RelayRoom(origin: relay.origin, name: RoomName(responderStaticKey: [UInt8](repeating: 9, count: 32), pairingID: "keepalive"))
        let socket = try await RelayAdmission.join(room, role: .mac, proof: .park, on: loop)

        /// Moves the clock and returns once the loop has run every timer now due.
        func advance(_ seconds: UInt64) async {
            clock.advance(by: .seconds(seconds))
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                loop.execute { loop.runTimers(); done.resume() }
            }
        }

        await advance(15)   // ping; the relay answers
        // On loopback the pong may be back before the loop answers this question.
        await eventually("the relay's pong arrived") { !(await socket.keepalivePongOverdue()) }
        var overdue: Bool
        await advance(10)
        XCTAssertNil(socket.closeReceived, "an answered ping keeps the socket")

        XCTAssertTrue(ProcessStop.stop(relay.process.processIdentifier), "the relay stopped")
        await advance(5)    // 30 s: the next ping, unanswered
        overdue = await socket.keepalivePongOverdue()
        XCTAssertTrue(overdue, "the 30 s ping went out")
        try await Task.sleep(nanoseconds: 200_000_000)   // must be a sleep: a pong, had the stopped relay sent one, would be back
        await advance(9)
        XCTAssertNil(socket.closeReceived, "not before 10 s")
        await advance(1)
        // The timeout closes the socket inside the timer, so the close is recorded by now.
        let end = try XCTUnwrap(socket.closeReceived, "ended 10 s after the unanswered ping")
        XCTAssertEqual(end.code, 1001)
        XCTAssertEqual(end.reason, "keepalive timeout")
        XCTAssertEqual(RelaySignal.close(code: end.code, reason: end.reason), .transient, "retried on the same host")
    }
}

import Foundation
import Glibc
import TetherClient
import TetherNet
import TetherTestSupport
import TetherWire
import XCTest

/// Client keepalive (client.md §14): a ping every 15 s; no pong within 10 s ends the socket
/// (1001 `keepalive timeout`) so the reconnect loop can start. A manual clock drives the loop;
/// the relay answering is a real process, stopped (SIGSTOP) to play a dead path.
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
        func advance(_ seconds: UInt64) async throws {
            clock.advance(by: .seconds(seconds))
            loop.execute { loop.runTimers() }
            try await Task.sleep(nanoseconds: 300_000_000)   // the ping or pong crosses loopback
        }
        let room = RelayRoom(origin: relay.origin, name: RoomName(responderStaticKey: [UInt8](repeating: 9, count: 32), pairingID: "keepalive"))
        let socket = try await RelayAdmission.join(room, role: .mac, proof: .park, on: loop)

        try await advance(15)   // ping; the relay answers
        try await advance(10)
        XCTAssertNil(socket.closeReceived, "an answered ping keeps the socket")

        kill(relay.process.processIdentifier, SIGSTOP)
        try await advance(5)    // 30 s: the next ping, unanswered
        try await advance(9)
        XCTAssertNil(socket.closeReceived, "not before 10 s")
        try await advance(1)
        let end = try XCTUnwrap(socket.closeReceived, "ended 10 s after the unanswered ping")
        XCTAssertEqual(end.code, 1001)
        XCTAssertEqual(end.reason, "keepalive timeout")
        XCTAssertEqual(RelaySignal.close(code: end.code, reason: end.reason), .transient, "retried on the same host")
    }
}

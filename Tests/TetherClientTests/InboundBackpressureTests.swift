@testable import TetherClient
import Foundation
import TetherNet
import TetherTestSupport
import TetherWire
import XCTest

/// Frames the application has not taken are bounded: past 4 MiB the socket stops reading and
/// the relay's splice holds the sender back; taking frames resumes reading, nothing is lost.
final class InboundBackpressureTests: RelayTestCase {
    func testAnUnreadSocketStopsReadingAtTheHighWaterMarkAndLosesNothing() async throws {
        let room = RelayRoom(origin: relay.origin, name: RoomName(responderStaticKey: [UInt8](repeating: 5, count: 32), pairingID: "backpressure"))
        let mac = try await RelayAdmission.join(room, role: .mac, proof: .park, on: loop)
        let phone = try await RelayAdmission.join(room, role: .phone, proof: .park, on: loop)
        let count = 160, size = 64 * 1024   // 10 MiB in all
        for index in 0..<count { phone.send([UInt8](repeating: UInt8(index & 0xFF), count: size)) }

        // Until the buffer is past the mark and has stopped growing (the same over three polls):
        // had reading not stopped, it would settle at the whole 10 MiB instead.
        var buffered = 0, previous = [-1, -2]
        await eventually("the Mac's buffer fills and stops (\(buffered) bytes)", within: 10, poll: 0.1) {
            buffered = await mac.bufferedByteCount()
            defer { previous = [previous[1], buffered] }
            return buffered > AdmissionSession.bufferHighWater && previous.allSatisfy { $0 == buffered }
        }
        XCTAssertGreaterThan(buffered, AdmissionSession.bufferHighWater, "it filled up to the mark")
        XCTAssertLessThan(buffered, AdmissionSession.bufferHighWater + 1 << 20, "and stopped reading there (one read's worth over)")

        var received = 0
        for await frame in mac.frames {
            XCTAssertEqual(frame, [UInt8](repeating: UInt8(received & 0xFF), count: size), "frame \(received) in order and whole")
            received += 1
            if received == count { break }
        }
        XCTAssertEqual(received, count)
        phone.close()
        mac.close()
    }
}

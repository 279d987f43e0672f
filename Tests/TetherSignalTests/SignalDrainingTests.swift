import TetherNet
import TetherSignal
import XCTest

/// The signaling server drains through its chassis runtime: shutdown turns `/readyz`'s
/// `accepting` check off, and new upgrades are refused while it drains.
final class SignalDrainingTests: XCTestCase {
    func testShutdownTurnsAcceptingOff() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        var configuration = SignalConfiguration()
        configuration.port = 0
        let server = try SignalServer(configuration: configuration, group: group, log: { _ in })
        try server.start()
        XCTAssertEqual(server.readiness.failing(), [])
        server.shutdown()
        XCTAssertEqual(server.readiness.failing(), ["accepting"])
    }
}

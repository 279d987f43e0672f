import TetherNet
@testable import TetherRelay
import TetherStore
import XCTest

/// Every service drains through its chassis runtime: the relay's shutdown turns `/readyz`'s
/// `accepting` check off first, ahead of the relay's own `storage` check.
final class RelayDrainingTests: XCTestCase {
    func testShutdownTurnsAcceptingOffAheadOfTheStorageCheck() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        var configuration = RelayConfiguration()
        configuration.port = 0
        let relay = RelayServer(configuration: configuration, group: group, store: InMemoryRoomStore()) { _ in }
        try relay.start()
        XCTAssertEqual(relay.readiness.failing(), [])
        relay.shutdown()
        XCTAssertEqual(relay.readiness.failing(), ["accepting"])
        XCTAssertTrue(relay.runtime.isDraining)
    }
}

import TetherNet
import TetherTestSupport
import XCTest

/// A test with one event loop and a fresh `tether relay --local` on loopback.
class RelayTestCase: XCTestCase {
    var group: EventLoopGroup!
    var relay: RelayProcess!
    var loop: EventLoop { group.loops[0] }

    override func setUpWithError() throws {
        group = try EventLoopGroup(count: 1)
        relay = try RelayProcess()
    }

    override func tearDown() {
        relay.stop()
        group.shutdown()
    }
}

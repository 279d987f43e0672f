import TetherNet
import TetherRelay
import TetherStore
import TetherTestSupport
import XCTest

final class MetricsReferenceTests: XCTestCase {
    func testDocsMetricsListsEveryFamilyTheRelayExposes() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let relay = RelayServer(configuration: RelayConfiguration(), group: group, store: InMemoryRoomStore()) { _ in }
        if let difference = try GeneratedDocument.check("docs/metrics.md", section: "relay", generated: relay.metrics.registry.markdownReference()) {
            XCTFail(difference)
        }
    }
}

import TetherNet
import TetherSignal
import TetherTestSupport
import XCTest

final class SignalMetricsReferenceTests: XCTestCase {
    func testDocsMetricsListsEveryFamilyTheSignalingServerExposes() throws {
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let server = try SignalServer(configuration: SignalConfiguration(), group: group, log: { _ in })
        if let difference = try GeneratedDocument.check("docs/metrics.md", section: "signal", generated: server.metrics.registry.markdownReference()) {
            XCTFail(difference)
        }
    }
}

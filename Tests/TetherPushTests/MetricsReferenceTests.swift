@testable import TetherPush
import TetherTestSupport
import XCTest

final class PushMetricsReferenceTests: XCTestCase {
    func testDocsMetricsListsEveryFamilyThePushRelayExposes() throws {
        // The families a running push relay registers: its own and the chassis' gauges.
        let metrics = PushMetrics()
        metrics.register(storageBacklog: { 0 }, apnsConnections: { 0 }, tokensMinted: { 0 }, droppedLogLines: { 0 })
        if let difference = try GeneratedDocument.check("docs/metrics.md", section: "push", generated: metrics.registry.markdownReference()) {
            XCTFail(difference)
        }
    }
}

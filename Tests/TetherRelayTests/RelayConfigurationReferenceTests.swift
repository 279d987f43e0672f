import Foundation
import TetherRelay
import TetherTestSupport
import XCTest

/// docs/configuration.md's relay reference is generated from the relay's settings table.
final class RelayConfigurationReferenceTests: XCTestCase {
    static let begin = "<!-- BEGIN generated: tether relay --help-markdown (RelayConfigurationReferenceTests fails when stale) -->\n"
    static let end = "<!-- END generated -->"

    func testTheReadmeReferenceIsTheOneTheSettingsTableGenerates() throws {
        let page = try String(contentsOf: Vectors.packageRoot().appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        let start = try XCTUnwrap(page.range(of: Self.begin), "docs/configuration.md lacks the generated relay configuration reference")
        let stop = try XCTUnwrap(page.range(of: Self.end, range: start.upperBound..<page.endIndex))
        XCTAssertEqual(String(page[start.upperBound..<stop.lowerBound]), RelayConfiguration.markdownReference,
                       "docs/configuration.md is stale: run scripts/update-readme-reference")
    }

    func testTheReferenceListsEverySettingAndFlag() {
        let reference = RelayConfiguration.markdownReference
        for setting in RelaySetting.all {
            XCTAssertTrue(reference.contains("`\(setting.name)`"), setting.name)
            for flag in setting.flags { XCTAssertTrue(reference.contains("`\(flag)`"), flag) }
        }
        XCTAssertTrue(reference.contains("`PORT`"))
        XCTAssertTrue(reference.contains("`--local`"))
        XCTAssertTrue(reference.contains("`--config ENV-FILE`"))
    }
}

import Foundation
import TetherRelay
import TetherTestSupport
import XCTest

/// The README's configuration reference is generated from the relay's settings table.
final class RelayConfigurationReferenceTests: XCTestCase {
    static let begin = "<!-- BEGIN generated: tether relay --help-markdown (RelayConfigurationReferenceTests fails when stale) -->\n"
    static let end = "<!-- END generated -->"

    func testTheReadmeReferenceIsTheOneTheSettingsTableGenerates() throws {
        let readme = try String(contentsOf: Vectors.packageRoot().appendingPathComponent("README.md"), encoding: .utf8)
        let start = try XCTUnwrap(readme.range(of: Self.begin), "README.md lacks the generated configuration reference")
        let stop = try XCTUnwrap(readme.range(of: Self.end, range: start.upperBound..<readme.endIndex))
        XCTAssertEqual(String(readme[start.upperBound..<stop.lowerBound]), RelayConfiguration.markdownReference,
                       "README.md is stale: replace its generated section with `tether relay --help-markdown`")
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

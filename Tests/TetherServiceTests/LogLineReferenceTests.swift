import Foundation
import TetherTestSupport
import XCTest

/// docs/log-lines.md lists every line the services write: each line's fixed text in the code (up
/// to its first interpolation) must be on the page.
final class LogLineReferenceTests: XCTestCase {
    /// A string literal that starts a log line: a service prefix (or the chassis' `\(service): `
    /// and `\(name): `), or a room line's `relay \(tag) `.
    private static let linePattern = try! NSRegularExpression(pattern:
        #""(?:(?:relay|push|signal|\\\((?:service|name)\)): |relay \\\((?:tag|key\.logTag|room\.logTag)\) )([^"\\]*)"#)
    /// A start-up note, printed with the service's prefix.
    private static let notePattern = try! NSRegularExpression(pattern: #"notes\.append\("([^"\\]*)"#)

    func testEveryLineTheServicesWriteIsOnTheLogLinePage() throws {
        let root = Vectors.packageRoot()
        let page = try String(contentsOf: root.appendingPathComponent("docs/log-lines.md"), encoding: .utf8)
        var checked = 0
        for directory in ["Sources/TetherRelay", "Sources/TetherPush", "Sources/TetherSignal", "Sources/TetherService", "Sources/tether"] {
            let enumerator = FileManager.default.enumerator(at: root.appendingPathComponent(directory), includingPropertiesForKeys: nil)
            while let file = enumerator?.nextObject() as? URL {
                guard file.pathExtension == "swift", !["PeerCommands.swift", "DemoCommand.swift"].contains(file.lastPathComponent) else { continue }
                let text = try String(contentsOf: file, encoding: .utf8)
                for line in text.split(separator: "\n") where !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                    let source = String(line)
                    for pattern in [Self.linePattern, Self.notePattern] {
                        for match in pattern.matches(in: source, range: NSRange(source.startIndex..., in: source)) {
                            let fixed = String(source[Range(match.range(at: 1), in: source)!]).trimmingCharacters(in: .whitespaces)
                            // A prefix alone ("relay: " + something) says nothing to look up.
                            guard fixed.count >= 4 else { continue }
                            checked += 1
                            XCTAssertTrue(page.contains(fixed), "docs/log-lines.md lacks \(fixed.debugDescription) (\(file.lastPathComponent))")
                        }
                    }
                }
            }
        }
        XCTAssertGreaterThan(checked, 40, "the scan found the lines")
    }
}

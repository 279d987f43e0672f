import XCTest

extension Wycheproof {
    /// Asserts that `accepts` returns true for every `valid` case and false for every `invalid`
    /// one; any other result label fails (callers handle `acceptable` themselves).
    public static func assertVerdicts(_ cases: [WycheproofCase], file: StaticString = #filePath, line: UInt = #line,
                                      _ accepts: (WycheproofCase) throws -> Bool) rethrows {
        for c in cases {
            let accepted = try accepts(c)
            switch c.result {
            case "valid": XCTAssertTrue(accepted, c.label, file: file, line: line)
            case "invalid": XCTAssertFalse(accepted, c.label, file: file, line: line)
            default: XCTFail("unexpected result \(c.result) in \(c.label)", file: file, line: line)
            }
        }
    }
}

import TetherRTC
import TetherTestSupport
import XCTest

/// `a=ice-ufrag`/`a=ice-pwd` (RFC 8839 §5.4): drawn fresh per agent, checked when the peer's arrive.
final class ICECredentialsTests: XCTestCase {
    func testCredentialsAreICECharsOfTheRightLengthsAndFreshCredentialsDiffer() throws {
        let first = ICECredentials.random(), second = ICECredentials.random()
        XCTAssertNotEqual(first, second)
        XCTAssertEqual(first.ufrag.count, 8)
        XCTAssertEqual(first.password.count, 24)
        XCTAssertEqual(try ICECredentials(ufrag: first.ufrag, password: first.password), first)
        XCTAssertFalse(first.description.contains(first.password), "the password is never printed")
        for (ufrag, password, expected) in [("abc", first.password, ICECredentials.ValidationError.malformedUfrag), ("ab:d", first.password, .malformedUfrag),
                                            (first.ufrag, "short", .malformedPassword), (first.ufrag, String(repeating: "a", count: 21) + "-", .malformedPassword)] {
            XCTAssertEqual(thrownError { () throws(ICECredentials.ValidationError) in _ = try ICECredentials(ufrag: ufrag, password: password) }, expected)
        }
    }
}

import TetherRTC
import TetherTestSupport
import XCTest

/// `a=ice-ufrag`/`a=ice-pwd` (RFC 8839 §5.4): drawn fresh per agent, checked when the peer's arrive.
final class ICECredentialsTests: XCTestCase {
    func testCredentialsAreICECharsOfTheRightLengthsAndFreshCredentialsDiffer() throws {
        let first = ICECredentials.random(), second = ICECredentials.random()
        XCTAssertNotEqual(first, second)
        XCTAssertEqual(first.ufrag.count, 8)
        XCTAssertEqual(first.pwd.count, 24)
        XCTAssertEqual(try ICECredentials(ufrag: first.ufrag, pwd: first.pwd), first)
        XCTAssertFalse(first.description.contains(first.pwd), "the password is never printed")
        for (ufrag, pwd, expected) in [("abc", first.pwd, ICECredentials.Failure.invalidUfrag), ("ab:d", first.pwd, .invalidUfrag),
                                       (first.ufrag, "short", .invalidPwd), (first.ufrag, String(repeating: "a", count: 21) + "-", .invalidPwd)] {
            XCTAssertEqual(thrownError { () throws(ICECredentials.Failure) in _ = try ICECredentials(ufrag: ufrag, pwd: pwd) }, expected)
        }
    }
}

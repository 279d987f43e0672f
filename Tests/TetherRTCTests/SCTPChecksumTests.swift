import CTetherSCTP
import XCTest

/// The checksum Tether writes into every SCTP packet it sends (usrsctp's own is off): it must be
/// exactly what usrsctp computes, or a peer that checks (every browser and aiortc) drops the call.
final class SCTPChecksumTests: XCTestCase {
    func testTheChecksumIsTheCRC32cCheckValue() {
        // CRC-32C's check value (the CRC of "123456789"), RFC 9260 Appendix A's polynomial.
        let check = Array("123456789".utf8)
        XCTAssertEqual(tether_sctp_checksum(check, check.count), 0xE306_9283)
        // RFC 3720 B.4: 32 bytes of zeros.
        let zeros = [UInt8](repeating: 0, count: 32)
        XCTAssertEqual(tether_sctp_checksum(zeros, zeros.count), 0x8A91_36AA)
    }

    func testTheChecksumMatchesUsrsctpsForEveryLengthAndAlignment() {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<2_100).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes.withUnsafeBytes { buffer in
            for offset in 0..<8 {
                for length in stride(from: 0, through: 2_048, by: offset == 0 ? 1 : 7) {
                    let start = buffer.baseAddress! + offset
                    XCTAssertEqual(tether_sctp_checksum(start, length), tether_sctp_reference_checksum(start, length),
                                   "length \(length) at offset \(offset)")
                }
            }
        }
    }
}

@testable import TetherRTC
import XCTest

/// DCEP's two messages (RFC 8832 §5) byte for byte, and every way bytes fail to be one.
final class DCEPMessageTests: XCTestCase {
    /// DATA_CHANNEL_OPEN: type 0x03, channel type, priority, reliability, label length, protocol
    /// length, label, protocol; big-endian, no padding.
    let cryptextOpen: [UInt8] = [0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00]
        + Array("cryptext".utf8)

    func testTheCryptextOpenIsReliableOrderedPriority256WithTheLabelAndNoProtocol() throws {
        XCTAssertEqual(DCEPMessage.open(.cryptext).encoded(), cryptextOpen)
        XCTAssertEqual(try DCEPMessage.decode(cryptextOpen), .open(.cryptext))
    }

    func testTheAckIsTheSingleTypeByte() throws {
        XCTAssertEqual(DCEPMessage.ack.encoded(), [0x02])
        XCTAssertEqual(try DCEPMessage.decode([0x02]), .ack)
    }

    func testEveryFieldRoundTripsBigEndian() throws {
        let open = DCEPOpen(channelType: .partialReliableTimedUnordered, priority: 0x0102, reliabilityParameter: 0x0304_0506,
                            label: "é", protocol: "xy")
        let bytes: [UInt8] = [0x03, 0x82, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x00, 0x02, 0x00, 0x02, 0xC3, 0xA9, 0x78, 0x79]
        XCTAssertEqual(DCEPMessage.open(open).encoded(), bytes)
        XCTAssertEqual(try DCEPMessage.decode(bytes), .open(open))
        for type in DCEPChannelType.allCases {
            var typed = open
            typed.channelType = type
            XCTAssertEqual(try DCEPMessage.decode(DCEPMessage.open(typed).encoded()), .open(typed))
        }
    }

    func testMalformedMessagesAreRefusedWithTheirReason() {
        let cases: [([UInt8], DCEPDecodingError)] = [
            ([], .empty),
            ([0x01], .unknownMessageType(0x01)),
            ([0x02, 0x00], .trailingBytes(1)),
            (Array(cryptextOpen.prefix(11)), .truncated),
            (Array(cryptextOpen.dropLast()), .truncated),
            (cryptextOpen + [0x00], .trailingBytes(1)),
            ([0x03, 0x03] + Array(cryptextOpen.dropFirst(2)), .unknownChannelType(0x03)),
            ([0x03, 0x00, 0, 0, 0, 0, 0, 0, 0x00, 0x01, 0x00, 0x00, 0xFF], .labelNotUTF8),
            ([0x03, 0x00, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x00, 0x01, 0xC3], .protocolNotUTF8),
        ]
        for (bytes, expected) in cases {
            XCTAssertThrowsError(try DCEPMessage.decode(bytes), "\(bytes)") { error in
                XCTAssertEqual(error as? DCEPDecodingError, expected, "\(bytes)")
            }
        }
    }

    func testThePPIDsAreRFC8831s() {
        XCTAssertEqual(DataChannelPPID.webRTCDCEP.rawValue, 50)
        XCTAssertEqual(DataChannelPPID.webRTCString.rawValue, 51)
        XCTAssertEqual(DataChannelPPID.webRTCBinary.rawValue, 53)
        XCTAssertEqual(DataChannelPPID.webRTCStringEmpty.rawValue, 56)
        XCTAssertEqual(DataChannelPPID.webRTCBinaryEmpty.rawValue, 57)
    }
}

import TetherWire
import XCTest

final class CompanionMessagesTests: XCTestCase {
    func testTheVerdictIsExactBytesAndStrictlyDecoded() {
        XCTAssertEqual(String(decoding: PairingVerdict.accepted.frame, as: UTF8.self), #"{"pairing":"accepted"}"#)
        XCTAssertEqual(String(decoding: PairingVerdict.rejected.frame, as: UTF8.self), #"{"pairing":"rejected"}"#)
        XCTAssertEqual(PairingVerdict(frame: PairingVerdict.accepted.frame), .accepted)
        XCTAssertEqual(PairingVerdict(frame: PairingVerdict.rejected.frame), .rejected)
        for text in ["", "hello", #"{"pairing":"maybe"}"#, #"{"other":"accepted"}"#, #"{"payload":{"pairing":"accepted"}}"#,
                     #"{"pairing":true}"#, #"["pairing","accepted"]"#, #"{"pairing":"Accepted"}"#] {
            XCTAssertNil(PairingVerdict(frame: Array(text.utf8)), text)
        }
    }

    /// client.md §12.6: `pushStatus` in the reference's Codable shape, both ways; push.md §3.3:
    /// the Mac's hex credentials need a token and a 32-byte secret.
    func testAPushStatusRoundTripsAndYieldsHexCredentials() throws {
        let status = PushStatus(authorization: .authorized, token: [0xDE, 0xAD, 0xBE, 0xEF], relaySecret: [UInt8](repeating: 9, count: 32), sandbox: true)
        let json = #"{"payload":{"pushStatus":{"authorization":"authorized","token":"3q2+7w==","relaySecret":"CQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQk=","sandbox":true}}}"#
        XCTAssertEqual(CompanionEnvelope(.pushStatus(status)).json, json)
        XCTAssertEqual(CompanionEnvelope(frame: Array(json.utf8))?.payload, .pushStatus(status))
        XCTAssertEqual(status.relayCredentials?.token, "deadbeef")
        XCTAssertEqual(status.relayCredentials?.secret, String(repeating: "09", count: 32))
        XCTAssertEqual(CompanionEnvelope(.pushStatus(PushStatus(authorization: .notDetermined, sandbox: false))).json,
                       #"{"payload":{"pushStatus":{"authorization":"notDetermined","sandbox":false}}}"#)
        var short = status
        short.relaySecret = [UInt8](repeating: 9, count: 31)
        XCTAssertNil(short.relayCredentials)
        short.relaySecret = nil
        XCTAssertNil(short.relayCredentials)
        // The reference's optional fields may be null.
        XCTAssertEqual(CompanionEnvelope(frame: Array(#"{"payload":{"pushStatus":{"authorization":"denied","sandbox":true,"token":null,"relaySecret":null}}}"#.utf8))?.payload,
                       .pushStatus(PushStatus(authorization: .denied, sandbox: true)))
        // One that does not decode is an unsupported event, which the connection drops (an
        // event has no request id to answer), never an application frame.
        for body in [#"{"sandbox":true}"#, #"{"authorization":"maybe","sandbox":true}"#, #"{"authorization":"denied"}"#,
                     #"{"authorization":"denied","sandbox":"yes"}"#, #"{"authorization":"denied","sandbox":true,"token":"%%"}"#,
                     #"{"authorization":"denied","sandbox":true,"relaySecret":7}"#] {
            XCTAssertEqual(CompanionEnvelope(frame: Array(#"{"payload":{"pushStatus":\#(body)}}"#.utf8))?.payload, .unsupported("pushStatus"), body)
        }
    }

    func testEnvelopesEncodeInTheClientsShapes() {
        let secret = [UInt8](repeating: 0x5A, count: 32)
        XCTAssertEqual(CompanionEnvelope(requestID: 1, .relayRoomSecret(secret)).json,
                       #"{"requestID":1,"payload":{"relayRoomSecret":{"_0":"WlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlo="}}}"#)
        XCTAssertEqual(CompanionEnvelope(requestID: 1, .relayRoomSecretStored).json, #"{"requestID":1,"payload":{"relayRoomSecretStored":{}}}"#)
        XCTAssertEqual(CompanionEnvelope(requestID: 2, .hello(revision: 11, minimumPeer: 11, wantsNotificationPermission: nil)).json,
                       #"{"requestID":2,"payload":{"hello":{"revision":11,"minimumPeer":11}}}"#)
        XCTAssertEqual(CompanionEnvelope(requestID: 2, .hello(revision: 11, minimumPeer: 11, wantsNotificationPermission: true)).json,
                       #"{"requestID":2,"payload":{"hello":{"revision":11,"minimumPeer":11,"wantsNotificationPermission":true}}}"#)
        XCTAssertEqual(CompanionEnvelope(requestID: 3, .error(code: "internalError", message: "say \"no\"\n")).json,
                       #"{"requestID":3,"payload":{"error":{"_0":{"code":"internalError","message":"say \"no\"\n"}}}}"#)
        XCTAssertEqual(CompanionEnvelope(.unpairing).json, #"{"payload":{"unpairing":{}}}"#)
        XCTAssertEqual(CompanionEnvelope(.unpaired).json, #"{"payload":{"unpaired":{}}}"#)
        XCTAssertEqual(CompanionEnvelope(requestID: 7, .ping).json, #"{"requestID":7,"payload":{"ping":{}}}"#)
    }

    func testEnvelopesRoundTripAndMalformedOnesAreDropped() {
        let all: [CompanionEnvelope] = [
            .init(requestID: 1, .relayRoomSecret([UInt8](repeating: 1, count: 32))), .init(requestID: 1, .relayRoomSecretStored),
            .init(requestID: 9, .hello(revision: 11, minimumPeer: 11, wantsNotificationPermission: false)),
            .init(requestID: 4, .error(code: "badRequest", message: "Companion app upgrade required")),
            .init(requestID: 5, .ping), .init(requestID: 5, .pong), .init(.unpairing), .init(.unpaired),
        ]
        for envelope in all { XCTAssertEqual(CompanionEnvelope(frame: envelope.frame), envelope, envelope.json) }
        XCTAssertEqual(CompanionEnvelope(frame: Array(#"{"requestID":3,"payload":{"listChats":{}}}"#.utf8))?.payload, .unsupported("listChats"))
        for text in ["{}", #"{"payload":{}}"#, #"{"payload":{"ping":{},"pong":{}}}"#, #"{"requestID":-1,"payload":{"ping":{}}}"#,
                     #"{"requestID":1.5,"payload":{"ping":{}}}"#, #"{"payload":{"relayRoomSecret":{"_0":"AAAA"}}}"#,
                     #"{"payload":{"hello":{"revision":11}}}"#, #"{"payload":{"ping":1}}"#, "not json"] {
            XCTAssertNil(CompanionEnvelope(frame: Array(text.utf8)), text)
        }
    }

    /// A hello's revisions are integers: a peer's `1e300` made `Int(_:)` trap (found by fuzzing,
    /// Fuzz/Companion); a fraction is as malformed as it is to the reference's Int fields.
    func testAHelloWhoseRevisionIsNoIntegerIsDropped() {
        for revision in ["1e300", "1e999", "-1e300", "11.5"] {
            let text = #"{"payload":{"hello":{"revision":\#(revision),"minimumPeer":11}}}"#
            XCTAssertNil(CompanionEnvelope(frame: Array(text.utf8)), revision)
            XCTAssertNil(CompanionEnvelope(frame: Array(#"{"payload":{"hello":{"revision":11,"minimumPeer":\#(revision)}}}"#.utf8)), revision)
        }
        XCTAssertEqual(CompanionEnvelope(frame: Array(#"{"payload":{"hello":{"revision":11.0,"minimumPeer":1.1e1}}}"#.utf8))?.payload,
                       .hello(revision: 11, minimumPeer: 11, wantsNotificationPermission: nil))
    }

    func testRevisionVerdictsAreConsistentOnBothSides() {
        XCTAssertEqual(CompanionRevision.compare(peerRevision: 11, peerMinimumPeer: 11), .compatible)
        XCTAssertEqual(CompanionRevision.compare(peerRevision: 12, peerMinimumPeer: 12), .upgradeSelf)
        XCTAssertEqual(CompanionRevision.compare(peerRevision: 10, peerMinimumPeer: 10), .upgradePeer)
        XCTAssertEqual(CompanionRevision.compare(localRevision: 12, localMinimumPeer: 12, peerRevision: 11, peerMinimumPeer: 11), .upgradePeer)
    }

    func testFramesAreDemultiplexedByTheirFirstByte() {
        XCTAssertEqual(CompanionFrameKind([]), .empty)
        XCTAssertEqual(CompanionFrameKind([0x01, 0xFF]), .media)
        XCTAssertEqual(CompanionFrameKind(Array("{}".utf8)), .control)
    }
}

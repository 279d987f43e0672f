import Foundation
import TetherCall
import TetherCrypto
import TetherTestSupport
import TetherWire
import TetherSync
import XCTest

/// The channel against `Tests/Peers/call_channel_peer.py`, an independent implementation on the
/// PyPI `noiseprotocol` package: KK handshake, confirmation both ways, texts and receipts both
/// ways, and an NN rotation started by each side, with Tether as the caller and as the callee.
final class CallChannelInteropTests: XCTestCase {
    private static let frame = UInt8(ascii: "F"), command = UInt8(ascii: "C"), done = UInt8(ascii: "A")

    /// One channel and its Python peer; frames cross until both are quiet after every step.
    private final class Session {
        let peer: PythonPeer
        var channel: CallSecureChannel
        var now = Fixture.start
        /// The peer's reports (every record but frames and `A`), in order.
        var reports: [(kind: UInt8, body: [UInt8])] = []
        /// The channel's actions other than frames, in order.
        var events: [CallChannelAction] = []

        init(channelRole: CallSecureChannel.Role) throws {
            channel = Fixture.channel(channelRole)
            let (peerKey, channelKey) = channelRole == .initiator ? (Fixture.bobKey, Fixture.aliceKey) : (Fixture.aliceKey, Fixture.bobKey)
            peer = try PythonPeer(script: "call_channel_peer.py", arguments: [
                "--role", channelRole == .initiator ? "responder" : "initiator",
                "--static", hexString(peerKey.rawRepresentation),
                "--remote-static", hexString(channelKey.publicKey.rawRepresentation),
                "--call", Fixture.callID.text,
                "--initiator-id", Fixture.alice.canonical,
                "--responder-id", Fixture.bob.canonical,
            ])
            try run(channelFrames: [], peerFrames: try collect())
            try run(channel.start(now: now))
        }

        /// The peer's output for the record just sent, up to its `A`.
        private func collect() throws -> [[UInt8]] {
            var frames: [[UInt8]] = []
            while true {
                let record = try peer.receive()
                switch record.kind {
                case CallChannelInteropTests.done: return frames
                case CallChannelInteropTests.frame: frames.append(record.body)
                default: reports.append(record)
                }
            }
        }

        private func absorb(_ actions: [CallChannelAction]) -> [[UInt8]] {
            events += actions.filter { if case .send = $0 { false } else { true } }
            return actions.frames
        }

        func run(_ actions: [CallChannelAction]) throws { try run(channelFrames: absorb(actions), peerFrames: []) }

        /// Carries frames both ways, in order, until neither side has anything more to say.
        private func run(channelFrames: [[UInt8]], peerFrames: [[UInt8]]) throws {
            var toPeer = channelFrames, toChannel = peerFrames
            while !toPeer.isEmpty || !toChannel.isEmpty {
                if !toChannel.isEmpty { toPeer += absorb(channel.receive(toChannel.removeFirst(), now: now)) }
                if !toPeer.isEmpty {
                    try peer.send(kind: CallChannelInteropTests.frame, toPeer.removeFirst())
                    toChannel += try collect()
                }
            }
            XCTAssertEqual(channel.pacedFrameCount, 0)
        }

        func tellPeer(_ json: String) throws {
            try peer.send(kind: CallChannelInteropTests.command, Array(json.utf8))
            try run(channelFrames: [], peerFrames: try collect())
        }

        func reports(_ kind: Character) -> [String] {
            reports.filter { $0.kind == UInt8(ascii: kind.unicodeScalars.first!) }.map { String(decoding: $0.body, as: UTF8.self) }
        }

        /// A text each way, with its receipt, under the current keys.
        func exchangeTexts(_ label: String) throws {
            let mine = MessageID.random(), theirs = MessageID.random()
            let text = "\(label) from Tether: héllo \"quoted\" 🎉"
            try run(try channel.sendText(text, id: mine, sentAt: 1_700_000_000_123, now: now))
            let received = #"{"id": "\#(mine.text)", "sentAt": 1700000000123, "text": "\#(text.replacingOccurrences(of: "\"", with: "\\\""))"}"#
            let report = try XCTUnwrap(reports("T").last, "the peer reported no text")
            XCTAssertEqual(try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(report.utf8)) as? NSDictionary),
                           try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(received.utf8)) as? NSDictionary))
            XCTAssertEqual(reports("T").count, reports("K").count + 1, "one new text reported")
            XCTAssertEqual(events.last, .deliver(.receipt(id: mine)))
            try tellPeer(#"{"op":"text","id":"\#(theirs.text)","text":"\#(label) from Python: ok ✓","sentAt":1700000000456}"#)
            XCTAssertEqual(events.last, .deliver(.text(id: theirs, text: "\(label) from Python: ok ✓", sentAt: 1_700_000_000_456)))
            XCTAssertEqual(reports("K").last, theirs.text)
            now += Fixture.seconds(1)
        }
    }

    private func converse(channelRole: CallSecureChannel.Role) throws {
        let session = try Session(channelRole: channelRole)
        XCTAssertEqual(session.events.first, .authenticated(safetyNumber: SafetyNumber.of(Fixture.alice, Fixture.bob)))
        XCTAssertEqual(session.reports("R").count, 1, "the peer read Tether's confirmation")
        XCTAssertEqual(session.reports.first { $0.kind == UInt8(ascii: "H") }?.body, session.channel.sessionID)
        try session.exchangeTexts("epoch 0")

        try session.tellPeer(#"{"op":"rotate"}"#)
        XCTAssertEqual(session.channel.epoch, 1)
        XCTAssertEqual(session.reports("E"), ["1"])
        try session.exchangeTexts("epoch 1")

        try session.run(try session.channel.rotate(now: session.now))
        XCTAssertEqual(session.channel.epoch, 2)
        XCTAssertEqual(session.reports("E"), ["1", "2"])
        try session.exchangeTexts("epoch 2")

        XCTAssertNil(session.channel.failure)
        XCTAssertEqual(session.peer.finish(), 0, session.peer.stderrText())
    }

    func testTetherAsTheCallerTalksToAnIndependentCallee() throws {
        try converse(channelRole: .initiator)
    }

    func testTetherAsTheCalleeTalksToAnIndependentCaller() throws {
        try converse(channelRole: .responder)
    }
}

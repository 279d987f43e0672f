import TetherCrypto
import TetherRTC
import XCTest

/// Interop with aiortc (Tests/Peers/rtc_sdp_peer.py), a WebRTC stack written independently of
/// Tether: its descriptions pass Tether's strict parser, and it takes Tether's offer and answer
/// as remote descriptions.
final class DataChannelSDPInteropTests: XCTestCase {
    func fingerprint() throws -> CertificateFingerprint {
        let key = P256.PrivateKey()
        return CertificateFingerprint(of: try Certificate.issue(subject: "WebRTC", subjectKey: key.publicKey, issuer: "WebRTC", issuerKey: key,
                                                                notBefore: 1_700_000_000, notAfter: 1_800_000_000))
    }

    func tetherCandidate() throws -> ICECandidate {
        try ICECandidate.parse("candidate:1 1 udp 2122260223 127.0.0.1 50000 typ host generation 0")
    }

    func testAiortcsOfferPassesTheStrictParser() throws {
        let run = try RTCSDPPeer.run("offer")
        XCTAssertEqual(run.status, 0, run.errors)
        let offer = try DataChannelSDP.parse(run.output, as: .offer)
        XCTAssertEqual(offer.mediaProtocol, .udp)
        XCTAssertTrue(offer.bundled)
        XCTAssertEqual(offer.setup, .actpass)
        XCTAssertEqual(offer.fingerprints.count, 1, "its sha-384 and sha-512 fingerprints are read past")
        XCTAssertEqual(offer.sctpPort, 5000)
        XCTAssertGreaterThan(offer.maxMessageSize, 0)
        XCTAssertFalse(offer.candidates.isEmpty)
        XCTAssertTrue(offer.candidates.allSatisfy { $0.connectionAddress == "127.0.0.1" && $0.type == .host })
        XCTAssertTrue(offer.endOfCandidates, "gathered before printing")
        XCTAssertEqual(offer.connectionAddress, "127.0.0.1")
        XCTAssertTrue(offer.candidates.contains { $0.port == offer.port }, "the m-line names a candidate")
        XCTAssertEqual(try DataChannelSDP.parse(offer.text, as: .offer), offer, "Tether writes back what it read")
    }

    func testAiortcAcceptsTethersOfferAndItsAnswerPassesTheStrictParser() throws {
        let offer = DataChannelSDP.offer(origin: .random(), ice: try ICECredentials(ufrag: "Tthr", pwd: "abcdefghijklmnopqrstuv+/"),
                                         fingerprint: try fingerprint(), candidates: [try tetherCandidate()], endOfCandidates: true)
        let run = try RTCSDPPeer.run("answer", input: offer.text)
        XCTAssertEqual(run.status, 0, "aiortc refused Tether's offer: \(run.errors)")
        let answer = try DataChannelSDP.parseAnswer(run.output, to: offer)
        XCTAssertEqual(answer.mid, offer.mid)
        XCTAssertTrue([.active, .passive].contains(answer.setup))
        XCTAssertEqual(answer.fingerprints.count, 1)
        XCTAssertFalse(answer.candidates.isEmpty)
        XCTAssertNotEqual(answer.ice, offer.ice)
    }

    func testAiortcAcceptsTethersAnswerToItsOffer() throws {
        let peer = try RTCSDPPeer("exchange")
        let offer = try DataChannelSDP.parse(peer.readOutput(), as: .offer)
        let answer = DataChannelSDP.answer(to: offer, origin: .random(), ice: try ICECredentials(ufrag: "aN5w", pwd: "ZYXWVUTSRQPONMLKJIHGFEDCBA"),
                                           fingerprint: try fingerprint(), candidates: [try tetherCandidate()], endOfCandidates: true)
        let (status, errors) = peer.finish(writing: answer.text)
        XCTAssertEqual(status, 0, "aiortc refused Tether's answer: \(errors)")
    }

    /// The peer does refuse what is wrong, so its acceptance above means something.
    func testAiortcRefusesAnAnswerThatSaysActpass() throws {
        let peer = try RTCSDPPeer("exchange")
        let offer = try DataChannelSDP.parse(peer.readOutput(), as: .offer)
        var answer = DataChannelSDP.answer(to: offer, origin: .random(), ice: try ICECredentials(ufrag: "aN5w", pwd: "ZYXWVUTSRQPONMLKJIHGFEDCBA"),
                                           fingerprint: try fingerprint())
        answer.setup = .actpass
        let (status, errors) = peer.finish(writing: answer.text)
        XCTAssertEqual(status, 1)
        XCTAssertTrue(errors.contains("refused"), errors)
    }
}

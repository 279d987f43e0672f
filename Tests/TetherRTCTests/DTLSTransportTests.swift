import TetherCrypto
import TetherRTC
import TetherTestSupport
import XCTest

/// DTLS 1.2 between two transports over an in-memory datagram pipe: the handshake, the
/// fingerprint check, application data, retransmission, hostile datagrams and close_notify.
final class DTLSTransportTests: XCTestCase {
    /// Short timers so retransmission tests run in wall-clock milliseconds (OpenSSL times
    /// its own retransmissions; the transport only reports them).
    let fast = DTLSTransport.Options(initialRetransmissionTimeout: .milliseconds(50), handshakeTimeout: .seconds(5))

    func testTheHandshakeAuthenticatesBothFingerprintsAndCarriesDataBothWays() throws {
        let pipe = try DatagramPipe()
        pipe.handshake()
        XCTAssertTrue(pipe.bothConnected)
        XCTAssertEqual(pipe.connections, [.client: 1, .server: 1])
        for end in DatagramPipe.End.allCases {
            let transport = pipe.transports[end]!
            XCTAssertEqual(transport.peerCertificate, pipe.certificates[end.other]!.certificate)
            XCTAssertEqual(transport.localFingerprint, pipe.certificates[end]!.fingerprint)
            XCTAssertEqual(transport.protocolVersion, "DTLSv1.2")
            XCTAssertEqual(transport.cipherSuite, .ecdheECDSAWithAES128GCMSHA256, "the client's first choice")
            XCTAssertNil(transport.nextTimeout, "no timer once connected")
        }
        XCTAssertTrue(pipe.sent.values.joined().allSatisfy { $0.count <= 1200 }, "every handshake datagram fits the MTU")

        let payload = try XCTUnwrap(pipe.client.maxPayloadPerDatagram)
        XCTAssertTrue((1100..<1200).contains(payload), "\(payload)")
        let messages: [[UInt8]] = [[1], SecureRandom.bytes(payload), SecureRandom.bytes(16 * 1024)]
        let before = pipe.sent[.client]!.count
        for message in messages { try pipe.client.send(message) }
        for message in messages.reversed() { try pipe.server.send(message) }
        pipe.pump()
        XCTAssertEqual(pipe.received[.server]!, messages)
        XCTAssertEqual(pipe.received[.client]!, messages.reversed())
        XCTAssertEqual(pipe.sent[.client]!.count - before, messages.count, "one record, one datagram per send")
        XCTAssertEqual(pipe.sent[.client]![before + 1].count, 1200, "a full payload fills the MTU exactly")
    }

    func testASendLargerThanOneRecordIsRefusedAndTheSessionGoesOn() throws {
        let pipe = try DatagramPipe()
        pipe.handshake()
        for size in [16 * 1024 + 1, 64 * 1024] {
            XCTAssertEqual(thrownError { () throws(DTLSError) in try pipe.client.send([UInt8](repeating: 7, count: size)) },
                           .messageTooLarge(size: size, limit: 16 * 1024))
        }
        try pipe.client.send([]) // nothing to send, and not an error
        try pipe.client.send([9])
        pipe.pump()
        XCTAssertEqual(pipe.received[.server]!, [[9]])
        XCTAssertEqual(pipe.client.state, .connected)
    }

    func testASmallMTUFragmentsTheHandshakeAndEveryDatagramFits() throws {
        let pipe = try DatagramPipe(options: DTLSTransport.Options(mtu: 300))
        pipe.handshake()
        XCTAssertTrue(pipe.bothConnected)
        XCTAssertTrue(pipe.sent.values.joined().allSatisfy { $0.count <= 300 }, "\(pipe.sent.values.joined().map(\.count))")
        XCTAssertLessThan(try XCTUnwrap(pipe.server.maxPayloadPerDatagram), 300)
    }

    func testRolesFollowTheNegotiatedSetupAttribute() throws {
        XCTAssertEqual(DTLSRole(localSetup: "active"), .client)
        XCTAssertEqual(DTLSRole(localSetup: "PASSIVE"), .server)
        XCTAssertNil(DTLSRole(localSetup: "actpass"), "an offer is not a role")
        XCTAssertNil(DTLSRole(localSetup: "holdconn"))
        // The answerer picks active and so opens the handshake; the offerer becomes passive.
        let answerer = try XCTUnwrap(DTLSRole(localSetup: "active"))
        let offerer = try XCTUnwrap(DTLSRole(localSetup: "passive"))
        let pipe = try DatagramPipe(roles: [.client: answerer, .server: offerer])
        pipe.server.start()
        pipe.pump()
        XCTAssertTrue(pipe.sent[.server]!.isEmpty, "the passive side waits for a ClientHello")
        pipe.client.start()
        pipe.pump()
        XCTAssertTrue(pipe.bothConnected)
    }

    func testTwoClientsFailInsteadOfConnecting() throws {
        let pipe = try DatagramPipe(roles: [.client: .client, .server: .client])
        pipe.handshake()
        XCTAssertEqual(pipe.client.state, .closed)
        XCTAssertEqual(pipe.server.state, .closed)
        XCTAssertEqual(pipe.connections, [.client: 0, .server: 0])
        XCTAssertNotNil(pipe.client.failure)
    }

    func testAWrongFingerprintAtTheClientFailsTheHandshakeAndNoDataIsEverDelivered() throws {
        let stranger = try DTLSCertificate().fingerprint
        let pipe = try DatagramPipe(expected: [.client: stranger])
        pipe.handshake()
        XCTAssertEqual(pipe.client.failure, .fingerprintMismatch)
        XCTAssertEqual(pipe.closes[.client]!, [.fingerprintMismatch])
        XCTAssertEqual(pipe.server.failure, .peerAlert(.badCertificate), "the client says why")
        assertNothingFlows(pipe)
    }

    func testAWrongFingerprintAtTheServerFailsTheHandshakeAndNoDataIsEverDelivered() throws {
        let stranger = try DTLSCertificate().fingerprint
        let pipe = try DatagramPipe(expected: [.server: stranger])
        pipe.handshake()
        XCTAssertEqual(pipe.server.failure, .fingerprintMismatch)
        XCTAssertEqual(pipe.client.failure, .peerAlert(.badCertificate), "the client never gets the server's Finished")
        assertNothingFlows(pipe)
    }

    /// Neither end connected, can send, or has heard anything, and no late datagram changes that.
    private func assertNothingFlows(_ pipe: DatagramPipe, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(pipe.connections, [.client: 0, .server: 0], file: file, line: line)
        for end in DatagramPipe.End.allCases {
            let transport = pipe.transports[end]!
            XCTAssertEqual(transport.state, .closed, file: file, line: line)
            XCTAssertNil(transport.peerCertificate, file: file, line: line)
            XCTAssertEqual(thrownError { () throws(DTLSError) in try transport.send([1, 2, 3]) }, .notConnected, file: file, line: line)
            for datagram in pipe.sent[end.other]! { transport.receive(datagram) }   // replayed: still nothing
        }
        XCTAssertEqual(pipe.received, [.client: [], .server: []], file: file, line: line)
    }

    func testADroppedFirstFlightIsRetransmittedAfterTheTimeout() throws {
        let pipe = try DatagramPipe(options: fast)
        pipe.tamper = { $0.from == .client && $0.index == 0 ? [] : [$0.bytes] }   // the first ClientHello
        pipe.handshake()
        XCTAssertEqual(pipe.server.state, .handshaking)
        XCTAssertTrue(pipe.sent[.server]!.isEmpty)
        let wait = try XCTUnwrap(pipe.client.nextTimeout)
        XCTAssertLessThanOrEqual(wait, .milliseconds(50))
        pipe.client.handleTimeout()
        XCTAssertEqual(pipe.sent[.client]!.count, 1, "too early: nothing is resent")
        pipe.advance(until: { pipe.bothConnected })
        XCTAssertTrue(pipe.bothConnected)
        XCTAssertEqual(pipe.sent[.client]![1].count, pipe.sent[.client]![0].count, "the ClientHello again")
    }

    func testALostServerFlightAndALostFinalFlightAreBothRecovered() throws {
        let pipe = try DatagramPipe(options: fast)
        // The first transmission of the server's first flight (from ServerHello) and of its
        // last (from ChangeCipherSpec). The client retransmits both times; the second time the
        // server is already done and must still answer the retransmitted flight.
        var dropping = false, droppedFirst = false, droppedLast = false
        pipe.tamper = { sent in
            guard sent.from == .server else {
                dropping = false
                return [sent.bytes]
            }
            if sent.bytes[0] == 22, sent.bytes[13] == 2, !droppedFirst { (droppedFirst, dropping) = (true, true) }
            if sent.bytes[0] == 20, !droppedLast { (droppedLast, dropping) = (true, true) }
            return dropping ? [] : [sent.bytes]
        }
        pipe.handshake()
        XCTAssertEqual(pipe.connections, [.client: 0, .server: 0])
        pipe.advance(until: { pipe.bothConnected })
        XCTAssertTrue(droppedFirst && droppedLast)
        XCTAssertTrue(pipe.bothConnected)
        XCTAssertEqual(pipe.connections, [.client: 1, .server: 1])
        try pipe.server.send([42])
        pipe.pump()
        XCTAssertEqual(pipe.received[.client]!, [[42]])
    }

    func testAnUnansweredHandshakeTimesOutOnBothSides() throws {
        let pipe = try DatagramPipe(options: DTLSTransport.Options(initialRetransmissionTimeout: .milliseconds(50),
                                                                   handshakeTimeout: .milliseconds(400)))
        pipe.tamper = { _ in [] }
        let started = ContinuousClock.now
        pipe.handshake()
        pipe.advance(until: { pipe.client.state == .closed && pipe.server.state == .closed })
        let elapsed = ContinuousClock.now - started
        XCTAssertEqual(pipe.closes, [.client: [.handshakeTimeout], .server: [.handshakeTimeout]])
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(400))
        XCTAssertLessThan(elapsed, .seconds(2))
        // 50, 100, 200 ms: three retransmissions of the ClientHello before the deadline.
        XCTAssertEqual(pipe.sent[.client]!.count, 4, "\(pipe.sent[.client]!.count)")
        XCTAssertNil(pipe.client.nextTimeout)
    }

    func testDuplicatedAndReorderedDatagramsAreHarmless() throws {
        let pipe = try DatagramPipe(options: fast)
        pipe.tamper = { [$0.bytes, $0.bytes] }
        pipe.reorder = true
        pipe.handshake()
        pipe.advance(until: { pipe.bothConnected })
        XCTAssertTrue(pipe.bothConnected)
        let messages = (0..<5).map { [UInt8($0)] + SecureRandom.bytes(100) }
        for message in messages { try pipe.client.send(message) }
        pipe.pump()
        XCTAssertEqual(pipe.received[.server]!.count, messages.count, "a replayed record is discarded")
        XCTAssertEqual(Set(pipe.received[.server]!), Set(messages), "DTLS delivers records in arrival order")
    }

    func testASendClosureThatDeliversSynchronouslyStillWorks() throws {
        let pipe = try DatagramPipe()
        pipe.synchronous = true
        pipe.transports[.server]!.onApplicationData = { [unowned pipe] bytes in
            try? pipe.server.send([UInt8](bytes.reversed()))   // answered from inside the callback
        }
        pipe.handshake()
        XCTAssertTrue(pipe.bothConnected)
        try pipe.client.send([1, 2, 3])
        XCTAssertEqual(pipe.received[.client]!, [[3, 2, 1]])
    }

    func testGarbageDatagramsDoNotBreakTheSession() throws {
        let pipe = try DatagramPipe()
        // Mid-handshake: datagrams another protocol would send on the same 5-tuple.
        pipe.client.start()
        let stun: [UInt8] = [0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xA4, 0x42] + SecureRandom.bytes(12)
        for garbage in [stun, [], [0x80] + SecureRandom.bytes(40), [0xFF]] { pipe.server.receive(garbage) }
        XCTAssertEqual(pipe.server.droppedDatagrams, 4)
        pipe.server.start()
        pipe.pump()
        XCTAssertTrue(pipe.bothConnected)

        // Connected: random bytes dressed as every DTLS content type, a truncated record, and a
        // genuine record with one bit flipped.
        for contentType: UInt8 in [20, 21, 22, 23, 63] {
            pipe.client.receive([contentType, 0xFE, 0xFD] + SecureRandom.bytes(60))
            pipe.client.receive([contentType, 0xFE, 0xFD, 0, 1, 0, 0, 0, 0, 0, 9, 0xFF, 0xFF])
        }
        try pipe.server.send([1, 2, 3, 4])
        let record = pipe.sent[.server]!.last!
        var forged = record
        forged[forged.count - 1] ^= 1
        let queuedGenuine = pipe.sent[.server]!.count
        pipe.client.receive(forged)
        XCTAssertEqual(pipe.received[.client]!, [], "a record that does not authenticate is discarded")
        pipe.pump()
        XCTAssertEqual(pipe.received[.client]!, [[1, 2, 3, 4]], "the genuine record still arrives")
        XCTAssertEqual(pipe.sent[.server]!.count, queuedGenuine)
        try pipe.client.send([5])
        pipe.pump()
        XCTAssertEqual(pipe.received[.server]!, [[5]])
        XCTAssertTrue(pipe.bothConnected)
        XCTAssertEqual(pipe.closes, [.client: [], .server: []])
    }

    func testCloseNotifyIsSeenByThePeer() throws {
        for closer in DatagramPipe.End.allCases {
            let pipe = try DatagramPipe()
            pipe.handshake()
            let transport = pipe.transports[closer]!, peer = pipe.transports[closer.other]!
            transport.close()
            XCTAssertEqual(transport.state, .closed)
            XCTAssertEqual(thrownError { () throws(DTLSError) in try transport.send([1]) }, .notConnected)
            pipe.pump()
            XCTAssertEqual(peer.state, .closed)
            XCTAssertEqual(pipe.closes[closer.other]!.count, 1)
            XCTAssertEqual(pipe.closes[closer.other]!.first, .some(nil), "a clean close, not an error")
            XCTAssertEqual(pipe.closes[closer]!.count, 0, "a local close is not reported back")
            XCTAssertNil(peer.failure)
            XCTAssertEqual(pipe.sent[closer.other]!.count > 0, true)
        }
    }

    func testEverySuiteNegotiatesAndShrugsOffForgedRecords() throws {
        for suite in DTLSCipherSuite.allCases {
            let pipe = try DatagramPipe(options: DTLSTransport.Options(cipherSuites: [suite]))
            pipe.handshake()
            XCTAssertEqual(pipe.client.cipherSuite, suite)
            XCTAssertEqual(pipe.server.cipherSuite, suite)
            // Encrypted records of every length up to a plausible alert's: too short for the
            // nonce and tag (which OpenSSL 3.0 would take for a fatal internal error), or long
            // enough and failing authentication. None may end the session.
            for length in 0...40 {
                pipe.client.receive([21, 0xFE, 0xFD, 0, 1, 0, 0, 0, 0, 0, UInt8(50 + length), 0, UInt8(length)] + SecureRandom.bytes(length))
            }
            XCTAssertEqual(pipe.client.droppedDatagrams, suite == .ecdheECDSAWithChaCha20Poly1305 ? 16 : 24, "\(suite)")
            XCTAssertEqual(pipe.client.state, .connected, "\(suite)")
            try pipe.server.send([UInt8](repeating: 1, count: 100))
            pipe.pump()
            XCTAssertEqual(pipe.received[.client]!, [[UInt8](repeating: 1, count: 100)], "\(suite)")
            XCTAssertEqual(pipe.closes, [.client: [], .server: []])
        }
    }

    func testOptionsOutsideWhatDTLSAllowsAreRefused() throws {
        let certificate = try DTLSCertificate()
        for options in [DTLSTransport.Options(mtu: 255), DTLSTransport.Options(mtu: 65508), DTLSTransport.Options(cipherSuites: []),
                        DTLSTransport.Options(initialRetransmissionTimeout: .zero), DTLSTransport.Options(handshakeTimeout: .seconds(-1))] {
            let error = thrownError { () throws(DTLSError) in
                _ = try DTLSTransport(role: .client, certificate: certificate, remoteFingerprint: certificate.fingerprint, options: options) { _ in }
            }
            guard case .configuration = error else { return XCTFail("\(options): \(String(describing: error))") }
        }
    }
}

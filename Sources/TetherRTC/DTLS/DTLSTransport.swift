import COpenSSL
public import TetherCrypto

/// DTLS 1.2 over an unreliable datagram transport (ICE), for a WebRTC data channel: the
/// handshake, then application data (SCTP packets) in records, then close_notify.
///
/// A machine driven from outside, on one thread (the owner's loop; for ICE, libnice's
/// context): datagrams from the network go in through `receive`, datagrams for the network
/// come out through the `send` closure given at init, and the retransmission timer is the
/// owner's to schedule (`nextTimeout`, `handleTimeout()`). It starts no thread and keeps no
/// timer of its own, so it lives on whichever loop carries the ICE agent without locks; it is
/// not Sendable, and every call must come from that one thread.
///
/// Every callback (`send`, `onConnected`, `onApplicationData`, `onClose`) runs on the calling
/// thread and outside OpenSSL, so it may call back in: `send(_:)` and `close()` act at once, a
/// `receive` from inside a callback is queued and handled before the outer call returns.
///
/// The peer is authenticated only by its certificate's fingerprint, checked against the one
/// the signed SDP carries while the handshake is still in progress (`DTLSTransport+OpenSSL`):
/// a mismatch aborts the handshake with an alert, so neither side ever gets to send or
/// receive application data.
public final class DTLSTransport {
    public enum State: Sendable, Hashable {
        /// Made; `start()` (or the first datagram) begins the handshake.
        case idle
        case handshaking
        /// Handshake complete and the peer's fingerprint verified.
        case connected
        /// Closed locally, by the peer's close_notify, or by a failure (`failure`).
        case closed
    }

    public struct Options: Sendable {
        /// The largest datagram produced, DTLS record headers included. 1200 bytes, as browsers
        /// use: with IPv6, UDP and a TURN ChannelData header it stays within the 1280 bytes
        /// every IPv6 link carries (a TURN Send indication adds 48, still far from 1500).
        public var mtu: Int
        /// The first retransmission wait (RFC 6347 §4.2.4.1: 1 s); doubled per retransmission up
        /// to 60 s.
        public var initialRetransmissionTimeout: Duration
        /// How long the handshake may take from `start()`, retransmissions included.
        public var handshakeTimeout: Duration
        /// Offered in this order of preference (the client's order decides).
        public var cipherSuites: [DTLSCipherSuite]

        public init(mtu: Int = 1200, initialRetransmissionTimeout: Duration = .seconds(1), handshakeTimeout: Duration = .seconds(30),
                    cipherSuites: [DTLSCipherSuite] = DTLSCipherSuite.allCases) {
            self.mtu = mtu
            self.initialRetransmissionTimeout = initialRetransmissionTimeout
            self.handshakeTimeout = handshakeTimeout
            self.cipherSuites = cipherSuites
        }
    }

    /// The most `send` accepts at once: one record's plaintext (RFC 6347 §4.1, 2^14 bytes).
    /// A DTLS record is never split across datagrams, so to cross the network in one packet a
    /// message should also stay within `maxPayloadPerDatagram`, as SCTP's packets do.
    public static let maxMessageSize = 16384

    public let role: DTLSRole
    public let localFingerprint: CertificateFingerprint
    /// The peer's fingerprint from the signed SDP: the only certificate accepted.
    public let remoteFingerprint: CertificateFingerprint
    public let options: Options
    public private(set) var state: State = .idle
    /// Why the association closed, when it was not by `close()` or the peer's close_notify.
    public private(set) var failure: DTLSError?
    /// The peer's certificate, once the handshake has verified it.
    public private(set) var peerCertificate: Certificate?
    /// Datagrams refused before OpenSSL saw them: not DTLS by RFC 7983 demultiplexing (first
    /// byte outside 20...63; STUN is 0...3, which the ICE layer should have kept), empty,
    /// larger than UDP allows, or holding an encrypted record too short to be genuine.
    public private(set) var droppedDatagrams = 0

    /// The handshake completed with the expected peer; `send` works from now on.
    public var onConnected: (() -> Void)?
    /// One record's decrypted plaintext; the bytes are valid only during the call.
    public var onApplicationData: ((UnsafeRawBufferPointer) -> Void)?
    /// The association ended other than by `close()`: nil for the peer's close_notify, else why.
    /// Called once; nothing is delivered after it.
    public var onClose: ((DTLSError?) -> Void)?

    let ssl: OpaquePointer
    /// Network → OpenSSL: one datagram at a time, emptied after each.
    private let networkIn: OpaquePointer
    private let sink: DTLSDatagramSink
    private let transmit: ([UInt8]) -> Void
    private let plaintext: UnsafeMutableRawBufferPointer
    private var handshakeDeadline: ContinuousClock.Instant?
    /// Datagrams received from inside a callback, handled when the outer call finishes.
    private var inbox: [[UInt8]] = []
    private var busy = false
    /// Set from OpenSSL's callbacks during a handshake or read.
    var rejectedPeer = false
    var fatalAlertReceived: DTLSAlert?
    let initialTimeoutMicroseconds: UInt32

    /// - Parameters:
    ///   - role: from the negotiated `a=setup` (`DTLSRole(localSetup:)`).
    ///   - certificate: this side's, whose fingerprint went into the local SDP.
    ///   - remoteFingerprint: the peer's `a=fingerprint` from its signed SDP.
    ///   - send: hands one datagram to the network (the ICE agent).
    public init(role: DTLSRole, certificate: DTLSCertificate, remoteFingerprint: CertificateFingerprint,
                options: Options = Options(), send: @escaping ([UInt8]) -> Void) throws(DTLSError) {
        guard (256...65507).contains(options.mtu) else { throw .configuration("MTU \(options.mtu) is outside 256...65507") }
        guard options.initialRetransmissionTimeout > .zero, options.handshakeTimeout > .zero else {
            throw .configuration("timeouts must be positive")
        }
        guard !options.cipherSuites.isEmpty else { throw .configuration("no cipher suite") }
        let sink = DTLSDatagramSink(mtu: options.mtu)
        (ssl, networkIn) = try Self.makeSession(role: role, credential: certificate.credential, options: options, sink: sink)
        self.sink = sink
        self.role = role
        self.options = options
        self.remoteFingerprint = remoteFingerprint
        localFingerprint = certificate.fingerprint
        transmit = send
        initialTimeoutMicroseconds = Self.microseconds(options.initialRetransmissionTimeout)
        plaintext = .allocate(byteCount: Self.maxMessageSize, alignment: 16)
        SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        // OpenSSL's callbacks find the transport through this slot; none may run during SSL_free.
        SSL_set_ex_data(ssl, 0, nil)
        SSL_free(ssl)   // and both BIOs with it
        plaintext.deallocate()
    }

    // MARK: Driving

    /// Begins the handshake: the client sends its ClientHello, the server waits for one. The
    /// handshake deadline runs from here.
    public func start() {
        guard state == .idle else { return }
        state = .handshaking
        handshakeDeadline = .now + options.handshakeTimeout
        entry {
            advanceHandshake()
            flushOutbound()
        }
    }

    /// One datagram from the network. Anything that is not DTLS is dropped; records that do
    /// not authenticate are discarded by OpenSSL without harm to the session.
    public func receive(_ datagram: some BytesView) {
        datagram.withUnsafeBytes { bytes in
            guard let first = bytes.first, (20...63).contains(first), bytes.count <= 65535, !holdsImpossibleRecord(bytes) else {
                droppedDatagrams += 1
                return
            }
            if state == .idle { start() }
            guard state != .closed else { return }
            if busy { return inbox.append([UInt8](bytes)) }
            entry { process(bytes) }
        }
    }

    /// Encrypts `message` into one record and sends it. At most `maxMessageSize` bytes; an
    /// empty message sends nothing.
    public func send(_ message: some BytesView) throws(DTLSError) {
        guard state == .connected else { throw .notConnected }
        let count = message.byteCount
        guard count <= Self.maxMessageSize else { throw .messageTooLarge(size: count, limit: Self.maxMessageSize) }
        guard count > 0 else { return }
        var written = true
        entry {
            let status = message.withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
            if status <= 0 {
                written = false
                fail(failureReason(SSL_get_error(ssl, status)))
            }
            flushOutbound()
        }
        if !written { throw failure ?? .notConnected }
    }

    /// Sends close_notify if connected, and stops: nothing is sent or delivered afterwards,
    /// and `onClose` is not called.
    public func close() {
        guard state != .closed else { return }
        entry {
            if state == .connected {
                _ = SSL_shutdown(ssl)   // sends close_notify; the peer's answer is not awaited
                ERR_clear_error()
            }
            state = .closed
            handshakeDeadline = nil
            flushOutbound()
        }
    }

    // MARK: Engine

    /// Runs one call's work, then the datagrams that arrived from inside its callbacks.
    private func entry(_ body: () -> Void) {
        if busy { return body() }
        busy = true
        body()
        while !inbox.isEmpty, state != .closed {
            let next = inbox.removeFirst()
            next.withUnsafeBytes { process($0) }
        }
        inbox = []
        busy = false
    }

    /// Whether `datagram` holds an encrypted record too short for the AEAD's nonce and tag.
    /// OpenSSL 3.0 takes such a record for an internal error and ends the session, where RFC
    /// 6347 §4.1.2.7 has invalid records discarded: one forged datagram would end a call. No
    /// peer sends one, so the datagram is dropped before OpenSSL sees it. Until a suite is
    /// chosen, the largest minimum applies (nothing encrypted can be valid before that).
    private func holdsImpossibleRecord(_ datagram: UnsafeRawBufferPointer) -> Bool {
        let suite = DTLSCipherSuite(SSL_get_pending_cipher(ssl)) ?? DTLSCipherSuite(SSL_get_current_cipher(ssl))
        let minimum = suite?.minimumEncryptedFragment ?? 8 + 16
        var impossible = false
        DTLSRecordFraming.forEachRecord(in: datagram) { record in
            if record.epoch != 0, record.fragmentLength < minimum { impossible = true }
        }
        return impossible
    }

    private func process(_ datagram: UnsafeRawBufferPointer) {
        guard BIO_write(networkIn, datagram.baseAddress, Int32(datagram.count)) == datagram.count else {
            // A memory BIO fails only to allocate; the datagram is as good as lost.
            ERR_clear_error()
            _ = BIO_ctrl(networkIn, BIO_CTRL_RESET, 0, nil)
            return
        }
        if state == .handshaking { advanceHandshake() }
        if state == .connected { readApplicationData() }
        // Datagram boundaries matter in DTLS: what OpenSSL left of this one (a truncated
        // record) must not run into the next.
        _ = BIO_ctrl(networkIn, BIO_CTRL_RESET, 0, nil)
        flushOutbound()
    }

    func flushOutbound() {
        for datagram in sink.take() { transmit(datagram) }
    }

    private func advanceHandshake() {
        let status = SSL_do_handshake(ssl)
        guard status != 1 else { return completeHandshake() }
        let error = SSL_get_error(ssl, status)
        guard error != SSL_ERROR_WANT_READ, error != SSL_ERROR_WANT_WRITE else {
            ERR_clear_error()
            return
        }
        fail(failureReason(error))
    }

    private func completeHandshake() {
        // The verify callback has already checked the certificate; this repeats it on what
        // the session ended up with, so a path that skips the callback (resumption, which is
        // off) would still fail closed.
        guard let peer = peerCertificateInSession(), remoteFingerprint.matches(peer) else {
            rejectedPeer = true
            _ = SSL_shutdown(ssl)
            return fail(.fingerprintMismatch)
        }
        peerCertificate = peer
        state = .connected
        handshakeDeadline = nil
        onConnected?()
    }

    private func readApplicationData() {
        while state == .connected {
            let count = SSL_read(ssl, plaintext.baseAddress, Int32(plaintext.count))
            if count > 0 {
                onApplicationData?(UnsafeRawBufferPointer(rebasing: plaintext[..<Int(count)]))
                continue
            }
            let error = SSL_get_error(ssl, count)
            if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE {
                ERR_clear_error()
                return
            }
            if error == SSL_ERROR_ZERO_RETURN { return peerClosed() }
            return fail(failureReason(error))
        }
    }

    /// The peer's close_notify: answered with ours (RFC 5246 §7.2.1), then closed.
    private func peerClosed() {
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
        state = .closed
        flushOutbound()
        onClose?(nil)
    }

    func fail(_ error: DTLSError) {
        guard state != .closed else { return }
        state = .closed
        failure = error
        handshakeDeadline = nil
        ERR_clear_error()
        flushOutbound()   // the alert OpenSSL queued, so the peer learns at once
        onClose?(error)
    }

    // MARK: Timers

    /// How long until `handleTimeout()` is due (retransmission, or the handshake deadline);
    /// nil when nothing is pending. Read it again after every call into the transport.
    public var nextTimeout: Duration? {
        guard state == .handshaking || state == .connected else { return nil }
        var remaining = timeval()
        var next: Duration? = tether_DTLSv1_get_timeout(ssl, &remaining) == 1
            ? .seconds(Int64(remaining.tv_sec)) + .microseconds(Int64(remaining.tv_usec)) : nil
        if let handshakeDeadline {
            let left = max(.zero, handshakeDeadline - .now)
            next = min(next ?? left, left)
        }
        return next
    }

    /// Retransmits the last flight if its timer has run out, or fails the handshake past its
    /// deadline. Calling it early does nothing.
    public func handleTimeout() {
        guard state == .handshaking || state == .connected else { return }
        entry {
            if state == .handshaking, let handshakeDeadline, ContinuousClock.now >= handshakeDeadline {
                return fail(.handshakeTimeout)
            }
            if tether_DTLSv1_handle_timeout(ssl) < 0 { fail(failureReason(SSL_ERROR_SSL)) }
            flushOutbound()
        }
    }

    // MARK: Session facts

    /// The negotiated cipher suite, once connected.
    public var cipherSuite: DTLSCipherSuite? {
        guard state == .connected else { return nil }
        return DTLSCipherSuite(SSL_get_current_cipher(ssl))
    }

    /// The negotiated protocol version ("DTLSv1.2"), once connected.
    public var protocolVersion: String? {
        guard state == .connected, let name = SSL_get_version(ssl) else { return nil }
        return String(cString: name)
    }

    /// The most plaintext one record can carry within the MTU under the negotiated cipher
    /// (SCTP's packet size), once connected.
    public var maxPayloadPerDatagram: Int? {
        guard state == .connected else { return nil }
        let size = DTLS_get_data_mtu(ssl)
        return size > 0 ? Int(size) : nil
    }
}

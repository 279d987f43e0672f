import COpenSSL

/// TLS over a TCP connection. Ciphertext arrives through a memory BIO (socket → OpenSSL) and
/// leaves through a sink BIO straight into the TCP connection (`TLSSocketSink`); plaintext
/// moves between OpenSSL and the layer above.
///
/// Plaintext written between two of the loop's flush points is gathered and encrypted once,
/// at the second (`TLSConnection+Output.swift`), so a burst of small frames becomes one record.
/// Writes made before the handshake completes are held and sent after it. The connection, SSL
/// session included, can move to another loop (`TLSConnection+Handoff.swift`).
public final class TLSConnection: Transport, TransportDelegate, FlushPointWriter {
    public let tcp: TCPConnection
    // Loop-confined state (one thread touches it), so exclusivity is not checked at run time:
    // on the splice path those checks were a quarter of the instructions (callgrind).
    @exclusivity(unchecked) public var delegate: (any TransportDelegate)?
    let ssl: OpaquePointer
    /// Socket → OpenSSL.
    let networkIn: OpaquePointer
    private let contextBox: SSLContextBox
    /// Plaintext accepted by `write` and not yet given to `SSL_write`: the callers' arrays, and
    /// frame headers in a small arena (as `TCPConnection` queues them).
    @exclusivity(unchecked) var outgoing: [OutgoingChunk] = []
    @exclusivity(unchecked) var headerArena: [UInt8] = []
    @exclusivity(unchecked) var outgoingBytes = 0
    @exclusivity(unchecked) var flushSlot = 0
    @exclusivity(unchecked) var handshakeDone = false
    @exclusivity(unchecked) var closed = false
    /// Why the handshake failed, for whoever hears of the close (a certificate problem must not
    /// read as "connection closed").
    @exclusivity(unchecked) private var handshakeFailure: TLSError?
    @exclusivity(unchecked) var flushScheduled = false
    /// Between `handoff` and the arrival on the target loop.
    @exclusivity(unchecked) var isHandingOff = false
    /// Inside an OpenSSL call that may emit records: delegate callbacks wait until it returns.
    @exclusivity(unchecked) var inEngine = false
    /// `notifyWhenDrained` was asked and the plaintext and ciphertext queues have not both emptied since.
    @exclusivity(unchecked) var drainNotice = false
    public internal(set) var isWritable = true
    @exclusivity(unchecked) private var retainSelf: TLSConnection?
    /// After the handshake: the negotiated ALPN protocol, if any.
    @exclusivity(unchecked) public private(set) var alpnProtocol: String?
    /// Server side: the SNI name the client asked for.
    @exclusivity(unchecked) public private(set) var serverName: String?
    /// Called once the handshake completes (or fails with the error).
    @exclusivity(unchecked) public var onHandshake: ((TLSError?) -> Void)?

    public var loop: EventLoop { tcp.loop }
    public var peer: SocketAddress? { tcp.peer }
    public var isClosed: Bool { closed }
    /// Plaintext not yet encrypted plus ciphertext not yet sent.
    public var queuedBytes: Int { outgoingBytes + tcp.queuedBytes }

    enum OutgoingChunk {
        case array([UInt8])
        case header(start: Int, count: Int)
    }

    /// The server side of an accepted connection.
    public init(server context: TLSServerContext, over tcp: TCPConnection) throws(TLSError) {
        tcp.loop.assertInEventLoop()
        (ssl, networkIn, contextBox) = try Self.make(context.context, over: tcp)
        self.tcp = tcp
        SSL_set_accept_state(ssl)
        attach()
    }

    /// The client side: `serverName` is sent as SNI and checked against the certificate.
    public init(client context: TLSClientContext, serverName: String, over tcp: TCPConnection) throws(TLSError) {
        tcp.loop.assertInEventLoop()
        (ssl, networkIn, contextBox) = try Self.make(context.box, over: tcp)
        self.tcp = tcp
        guard tether_SSL_set_tlsext_host_name(ssl, serverName) == 1 || SocketAddressText.isNumeric(serverName) else {
            throw .configuration("SNI \(serverName)")
        }
        guard SSL_set1_host(ssl, serverName) == 1 else { throw .configuration("hostname \(serverName)") }
        SSL_set_connect_state(ssl)
        attach()
        advanceHandshake()
    }

    private static func make(_ box: SSLContextBox, over tcp: TCPConnection) throws(TLSError) -> (OpaquePointer, OpaquePointer, SSLContextBox) {
        guard let ssl = SSL_new(box.ctx) else { throw .configuration("SSL_new: \(TLSError.lastError())") }
        guard let rbio = BIO_new(BIO_s_mem()), let wbio = TLSSocketSink.make(for: tcp) else {
            SSL_free(ssl)
            throw .configuration("BIO_new: \(TLSError.lastError())")
        }
        SSL_set_bio(ssl, rbio, wbio)   // the SSL object now owns both BIOs
        return (ssl, rbio, box)
    }

    private func attach() {
        retainSelf = self
        tcp.delegate = self
    }

    deinit { SSL_free(ssl) }

    // MARK: Transport

    public func closeAfterFlush() {
        loop.assertInEventLoop()
        guard !closed else { return }
        if handshakeDone {
            sendOutgoing()
            engine { _ = SSL_shutdown(ssl) }
        }
        markClosed()
        tcp.closeAfterFlush()
    }

    public func close() {
        loop.assertInEventLoop()
        guard !closed else { return }
        markClosed()
        tcp.close()
    }

    public func pauseReading() { tcp.pauseReading() }   // TCPConnection checks the thread
    public func resumeReading() { tcp.resumeReading() }

    /// Stops output: nothing more is encrypted, and a pending flush is withdrawn.
    private func markClosed() {
        closed = true
        if flushScheduled {
            loop.cancelFlush(slot: flushSlot, of: self)
            flushScheduled = false
        }
        outgoing = []
        headerArena = []
        outgoingBytes = 0
    }

    // MARK: TransportDelegate (the TCP side)

    public func transport(_ connection: any Transport, didRead bytes: UnsafeRawBufferPointer) {
        guard !closed else { return }
        var offset = 0
        while offset < bytes.count {
            let n = BIO_write(networkIn, bytes.baseAddress! + offset, Int32(bytes.count - offset))
            guard n > 0 else { return fail(.handshake("BIO_write")) }
            offset += Int(n)
        }
        processInput()
    }

    public func transportDidClose(_ connection: any Transport, error: NetError?) {
        if !closed { markClosed() }
        if !handshakeDone, let onHandshake {
            self.onHandshake = nil
            onHandshake(.handshake("connection closed"))
        }
        let delegate = self.delegate
        self.delegate = nil
        retainSelf = nil
        delegate?.transportDidClose(self, error: error ?? handshakeFailure.map(Self.netError))
    }

    public func transportWritabilityChanged(_ connection: any Transport) {
        // Inside OpenSSL (a record just queued), the check waits for the call to return.
        if !inEngine { updateWritability() }
    }

    public func transportDidDrain(_ connection: any Transport) { checkDrained() }

    // MARK: Engine

    /// Runs an OpenSSL call that may emit records, then catches up on the writability
    /// changes those records caused.
    @discardableResult
    func engine<R>(_ body: () -> R) -> R {
        inEngine = true
        let result = body()
        inEngine = false
        updateWritability()
        return result
    }

    /// Feeds what the memory BIO holds (and OpenSSL has buffered) through the handshake and
    /// then to the delegate as plaintext.
    func processInput() {
        if !handshakeDone {
            advanceHandshake()
            guard handshakeDone else { return }
        }
        readPlaintext()
    }

    private func advanceHandshake() {
        let status = engine { SSL_do_handshake(ssl) }
        if status == 1 {
            handshakeDone = true
            var name: UnsafePointer<UInt8>?
            var length: UInt32 = 0
            SSL_get0_alpn_selected(ssl, &name, &length)
            if let name, length > 0 { alpnProtocol = String(decoding: UnsafeBufferPointer(start: name, count: Int(length)), as: UTF8.self) }
            if let sni = tether_SSL_get_servername(ssl) { serverName = String(cString: sni) }
            onHandshake?(nil)
            onHandshake = nil
            // What was written during the handshake leaves at this iteration's flush point.
            scheduleFlushIfNeeded()
            return
        }
        let error = SSL_get_error(ssl, status)
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return }
        let reason = TLSError.lastError()
        let verify = SSL_get_verify_result(ssl)
        fail(.handshake(verify != X509_V_OK ? "certificate: \(cText(X509_verify_cert_error_string(verify)))" : reason))
    }

    private func readPlaintext() {
        let buffer = loop.plaintextBuffer
        // A handoff requested by the delegate stops the loop here; the records still buffered
        // are read on the target loop.
        while !closed, !isHandingOff {
            let n = engine { SSL_read(ssl, buffer.baseAddress, Int32(buffer.count)) }
            if n > 0 {
                delegate?.transport(self, didRead: UnsafeRawBufferPointer(rebasing: buffer[..<Int(n)]))
                continue
            }
            let error = SSL_get_error(ssl, n)
            if error == SSL_ERROR_WANT_READ { break }
            if error == SSL_ERROR_ZERO_RETURN {
                // The peer's close_notify: answer it and close.
                closeAfterFlush()
                return
            }
            fail(.handshake("SSL_read: \(TLSError.lastError())"))
            return
        }
    }

    func fail(_ error: TLSError) {
        if !handshakeDone, handshakeFailure == nil {
            handshakeFailure = error
            if SSL_is_server(ssl) == 1 { TLSServerContext.handshakeFailed("\(error)") }
        }
        if let onHandshake {
            self.onHandshake = nil
            onHandshake(error)
        }
        close()
    }
}

extension TLSConnection {
    /// A handshake failure as the transport layer reports it: `TLS: handshake failed: certificate: …`.
    static func netError(_ error: TLSError) -> NetError {
        switch error {
        case let .handshake(what): .tls("handshake failed: \(what)")
        case let .configuration(what): .tls("configuration: \(what)")
        }
    }
}

enum SocketAddressText {
    /// True for a numeric IPv4 or IPv6 address (SNI carries names only).
    static func isNumeric(_ text: String) -> Bool { (try? SocketAddress(host: text, port: 0)) != nil }
}

private func cText(_ pointer: UnsafePointer<CChar>?) -> String {
    guard let pointer else { return "" }
    return String(cString: pointer)
}

import COpenSSL

/// TLS over a TCP connection, through memory BIOs: ciphertext moves between the socket and
/// OpenSSL, plaintext between OpenSSL and the layer above. Writes made before the handshake
/// completes are held and sent after it.
public final class TLSConnection: Transport, TransportDelegate {
    public let tcp: TCPConnection
    public var delegate: (any TransportDelegate)?
    private let ssl: OpaquePointer
    private let networkIn: OpaquePointer   // socket → OpenSSL
    private let networkOut: OpaquePointer  // OpenSSL → socket
    private let contextBox: SSLContextBox
    private var handshakeDone = false
    private var heldWrites: [[UInt8]] = []
    private var closed = false
    private var retainSelf: TLSConnection?
    /// After the handshake: the negotiated ALPN protocol, if any.
    public private(set) var alpnProtocol: String?
    /// Server side: the SNI name the client asked for.
    public private(set) var serverName: String?
    /// Called once the handshake completes (or fails with the error).
    public var onHandshake: ((TLSError?) -> Void)?

    public var loop: EventLoop { tcp.loop }
    public var peer: SocketAddress? { tcp.peer }
    public var isWritable: Bool { tcp.isWritable }
    public var isClosed: Bool { closed }
    public var queuedBytes: Int { tcp.queuedBytes }

    /// The server side of an accepted connection.
    public init(server context: TLSServerContext, over tcp: TCPConnection) throws(TLSError) {
        (ssl, networkIn, networkOut, contextBox) = try Self.make(context.context)
        self.tcp = tcp
        SSL_set_accept_state(ssl)
        attach()
    }

    /// The client side: `serverName` is sent as SNI and checked against the certificate.
    public init(client context: TLSClientContext, serverName: String, over tcp: TCPConnection) throws(TLSError) {
        (ssl, networkIn, networkOut, contextBox) = try Self.make(context.box)
        self.tcp = tcp
        guard tether_SSL_set_tlsext_host_name(ssl, serverName) == 1 || SocketAddressText.isNumeric(serverName) else {
            throw .configuration("SNI \(serverName)")
        }
        guard SSL_set1_host(ssl, serverName) == 1 else { throw .configuration("hostname \(serverName)") }
        SSL_set_connect_state(ssl)
        attach()
        advanceHandshake()
    }

    private static func make(_ box: SSLContextBox) throws(TLSError) -> (OpaquePointer, OpaquePointer, OpaquePointer, SSLContextBox) {
        guard let ssl = SSL_new(box.ctx), let rbio = BIO_new(BIO_s_mem()), let wbio = BIO_new(BIO_s_mem()) else {
            throw .configuration("SSL_new: \(TLSError.lastError())")
        }
        SSL_set_bio(ssl, rbio, wbio)   // the SSL object now owns both BIOs
        return (ssl, rbio, wbio, box)
    }

    private func attach() {
        retainSelf = self
        tcp.delegate = self
    }

    deinit { SSL_free(ssl) }

    // MARK: Transport

    public func write(_ bytes: [UInt8]) {
        guard !closed, !bytes.isEmpty else { return }
        guard handshakeDone else {
            heldWrites.append(bytes)
            return
        }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { SSL_write(ssl, $0.baseAddress! + offset, Int32($0.count - offset)) }
            guard n > 0 else {
                fail(.handshake("SSL_write: \(TLSError.lastError())"))
                return
            }
            offset += Int(n)
        }
        flushNetwork()
    }

    public func write(header: UnsafeRawBufferPointer, payload: [UInt8]) {
        // TLS copies into records anyway; one contiguous write keeps header and payload in one record.
        write(Array(header) + payload)
    }

    public func closeAfterFlush() {
        guard !closed else { return }
        if handshakeDone {
            SSL_shutdown(ssl)
            flushNetwork()
        }
        closed = true
        tcp.closeAfterFlush()
    }

    public func close() {
        guard !closed else { return }
        closed = true
        tcp.close()
    }

    public func pauseReading() { tcp.pauseReading() }
    public func resumeReading() { tcp.resumeReading() }

    // MARK: TransportDelegate (the TCP side)

    public func transport(_ connection: any Transport, didRead bytes: UnsafeRawBufferPointer) {
        guard !closed else { return }
        var offset = 0
        while offset < bytes.count {
            let n = BIO_write(networkIn, bytes.baseAddress! + offset, Int32(bytes.count - offset))
            guard n > 0 else { return fail(.handshake("BIO_write")) }
            offset += Int(n)
        }
        if !handshakeDone {
            advanceHandshake()
            guard handshakeDone else { return }
        }
        readPlaintext()
    }

    public func transportDidClose(_ connection: any Transport, error: NetError?) {
        closed = true
        if !handshakeDone, let onHandshake {
            self.onHandshake = nil
            onHandshake(.handshake("connection closed"))
        }
        let delegate = self.delegate
        self.delegate = nil
        retainSelf = nil
        delegate?.transportDidClose(self, error: error)
    }

    public func transportWritabilityChanged(_ connection: any Transport) {
        delegate?.transportWritabilityChanged(self)
    }

    // MARK: Engine

    private func advanceHandshake() {
        let status = SSL_do_handshake(ssl)
        flushNetwork()
        if status == 1 {
            handshakeDone = true
            var name: UnsafePointer<UInt8>?
            var length: UInt32 = 0
            SSL_get0_alpn_selected(ssl, &name, &length)
            if let name, length > 0 { alpnProtocol = String(decoding: UnsafeBufferPointer(start: name, count: Int(length)), as: UTF8.self) }
            if let sni = tether_SSL_get_servername(ssl) { serverName = String(cString: sni) }
            onHandshake?(nil)
            onHandshake = nil
            let held = heldWrites
            heldWrites = []
            for bytes in held { write(bytes) }
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
        while !closed {
            let n = SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
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
        flushNetwork()
    }

    /// Moves whatever OpenSSL produced onto the socket.
    private func flushNetwork() {
        let pending = Int(BIO_ctrl_pending(networkOut))
        guard pending > 0 else { return }
        var out = [UInt8](repeating: 0, count: pending)
        let n = out.withUnsafeMutableBytes { BIO_read(networkOut, $0.baseAddress, Int32(pending)) }
        if n > 0 { tcp.write(n == pending ? out : Array(out[..<Int(n)])) }
    }

    private func fail(_ error: TLSError) {
        if let onHandshake {
            self.onHandshake = nil
            onHandshake(error)
        }
        close()
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

import COpenSSL

/// The BIO OpenSSL writes its records to: a sink that hands each record to the TCP connection
/// at once (`TCPConnection.sendOrQueue`). A record is sent from OpenSSL's own buffer when
/// nothing is queued, so ciphertext is not copied on the way out — an output memory BIO would
/// copy it in, and again out. It always takes everything, so OpenSSL never sees a retry; the
/// connection's queue and water marks do the back-pressure.
enum TLSSocketSink {
    /// A BIO_METHOD is immutable once made and OpenSSL shares it between threads.
    private final class Method: @unchecked Sendable { // an immutable BIO_METHOD, which OpenSSL shares between threads
        let pointer: OpaquePointer
        init(_ pointer: OpaquePointer) { self.pointer = pointer }
    }

    private static let method: Method? = {
        guard let method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tether TCP sink") else { return nil }
        _ = BIO_meth_set_write(method) { bio, data, length in
            guard let bio, let data, length > 0, let context = BIO_get_data(bio) else { return 0 }
            let tcp = Unmanaged<TCPConnection>.fromOpaque(context).takeUnretainedValue()
            tcp.sendOrQueue(UnsafeRawBufferPointer(start: data, count: Int(length)))
            return length
        }
        // Flush is the only control OpenSSL needs answered (it flushes after each handshake
        // flight); everything else (pending counts, kTLS queries) is "no" / zero.
        _ = BIO_meth_set_ctrl(method) { _, command, _, _ in command == BIO_CTRL_FLUSH ? 1 : 0 }
        return Method(method)
    }()

    /// A sink BIO writing to `tcp`, which must outlive it (the TLS connection holds both, and
    /// frees the BIO with its SSL object).
    static func make(for tcp: TCPConnection) -> OpaquePointer? {
        guard let method, let bio = BIO_new(method.pointer) else { return nil }
        BIO_set_data(bio, Unmanaged.passUnretained(tcp).toOpaque())
        BIO_set_init(bio, 1)
        return bio
    }
}

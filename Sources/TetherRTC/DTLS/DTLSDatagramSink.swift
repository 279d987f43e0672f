import COpenSSL

/// Where OpenSSL's DTLS records go: the BIO it writes to cuts what it is given into records
/// and packs consecutive records into datagrams of at most `mtu` bytes (RFC 6347 §4.1.1
/// allows several per datagram), so a handshake flight of five small messages leaves as one
/// packet. OpenSSL packs a flight itself too, but counts no AEAD nonce or tag for the
/// encrypted Finished and so overshoots the MTU by a few bytes; repacking here keeps every
/// datagram within it (a single record larger than the MTU, which only `send` can make, goes
/// alone).
///
/// Nothing leaves during an OpenSSL call: the transport takes the datagrams once the call has
/// returned, so a send closure that loops straight back into the transport (a test pipe, a
/// synchronous ICE agent) never re-enters OpenSSL.
final class DTLSDatagramSink {
    let mtu: Int
    private(set) var datagrams: [[UInt8]] = []

    init(mtu: Int) { self.mtu = mtu }

    func append(_ bytes: UnsafeRawBufferPointer) {
        var end = 0
        DTLSRecordFraming.forEachRecord(in: bytes) { record in
            place(UnsafeRawBufferPointer(rebasing: bytes[record.range]))
            end = record.range.upperBound
        }
        // OpenSSL writes whole records; anything else is passed on as it came.
        if end < bytes.count { place(UnsafeRawBufferPointer(rebasing: bytes[end...])) }
    }

    private func place(_ record: UnsafeRawBufferPointer) {
        if let last = datagrams.indices.last, datagrams[last].count + record.count <= mtu {
            datagrams[last].append(contentsOf: record)
        } else {
            datagrams.append([UInt8](record))
        }
    }

    /// The datagrams written since the last take, in order.
    func take() -> [[UInt8]] {
        defer { datagrams = [] }
        return datagrams
    }

    /// A BIO_METHOD is immutable once made and OpenSSL shares it between threads.
    private final class Method: @unchecked Sendable { // an immutable BIO_METHOD, which OpenSSL shares between threads
        let pointer: OpaquePointer
        init(_ pointer: OpaquePointer) { self.pointer = pointer }
    }

    private static let method: Method? = {
        guard let method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tether DTLS datagrams") else { return nil }
        _ = BIO_meth_set_write(method) { bio, data, length in
            guard let bio, let data, length > 0, let context = BIO_get_data(bio) else { return 0 }
            Unmanaged<DTLSDatagramSink>.fromOpaque(context).takeUnretainedValue()
                .append(UnsafeRawBufferPointer(start: data, count: Int(length)))
            return length
        }
        // Flush is answered (OpenSSL flushes after each flight). The datagram queries are "no":
        // no MTU to discover (the link MTU is set, and SSL_OP_NO_QUERY_MTU keeps OpenSSL from
        // asking) and no per-datagram overhead below the link MTU, which is already the size
        // of what ICE carries.
        _ = BIO_meth_set_ctrl(method) { _, command, _, _ in command == BIO_CTRL_FLUSH ? 1 : 0 }
        return Method(method)
    }()

    /// A BIO writing into this sink, which must outlive it (the transport holds both and frees
    /// the BIO with its SSL object).
    func makeBIO() -> OpaquePointer? {
        guard let method = Self.method, let bio = BIO_new(method.pointer) else { return nil }
        BIO_set_data(bio, Unmanaged.passUnretained(self).toOpaque())
        BIO_set_init(bio, 1)
        return bio
    }
}

/// The framing of DTLS records in a datagram (RFC 6347 §4.1): a 13-byte header (content
/// type, version, epoch, sequence number, length) and the fragment. Read, never interpreted:
/// OpenSSL does the protocol; this only finds where records begin and end, to pack them into
/// datagrams and to screen what arrives.
enum DTLSRecordFraming {
    static let headerLength = 13

    /// One record: its epoch (0 = unencrypted) and where it lies in the datagram.
    struct Record {
        let epoch: UInt16
        let range: Range<Int>
        var fragmentLength: Int { range.count - DTLSRecordFraming.headerLength }
    }

    /// Calls `body` for each whole record in `datagram`, in order; false if the datagram ends
    /// in something that is not a whole record (the records before it were still reported).
    @discardableResult
    static func forEachRecord(in datagram: UnsafeRawBufferPointer, _ body: (Record) -> Void) -> Bool {
        var offset = 0
        while offset < datagram.count {
            guard datagram.count - offset >= headerLength else { return false }
            let epoch = UInt16(datagram[offset + 3]) << 8 | UInt16(datagram[offset + 4])
            let length = Int(datagram[offset + 11]) << 8 | Int(datagram[offset + 12])
            let end = offset + headerLength + length
            guard end <= datagram.count else { return false }
            body(Record(epoch: epoch, range: offset..<end))
            offset = end
        }
        return true
    }
}

import COpenSSL

/// Bytes from OpenSSL's CSPRNG (seeded from the kernel's getrandom).
public enum SecureRandom {
    /// `count` random bytes. A CSPRNG that cannot produce output leaves nothing safe to do,
    /// so that failure stops the process rather than returning predictable bytes.
    public static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0, "negative random byte count")
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, written in
            fill(UnsafeMutableRawBufferPointer(buffer))
            written = count
        }
    }

    /// Fills `buffer` with random bytes.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard buffer.count > 0 else { return }
        var offset = 0
        while offset < buffer.count {
            let chunk = min(buffer.count - offset, Int(Int32.max))
            guard RAND_bytes(buffer.baseAddress!.advanced(by: offset).assumingMemoryBound(to: UInt8.self), Int32(chunk)) == 1 else {
                fatalError("RAND_bytes failed: the CSPRNG is unavailable")
            }
            offset += chunk
        }
    }
}

/// Serialises frames (RFC 6455 §5.2). A server sends unmasked frames; a client masks every
/// frame with a fresh random key.
public enum WebSocketFrameEncoder {
    /// The header for a frame of `length` payload bytes (2, 4 or 10 bytes, plus 4 for a mask).
    public static func header(fin: Bool = true, opcode: WebSocketOpcode, length: Int,
                              maskingKey: (UInt8, UInt8, UInt8, UInt8)? = nil) -> [UInt8] {
        var header: [UInt8] = [(fin ? 0x80 : 0) | opcode.rawValue]
        let maskBit: UInt8 = maskingKey == nil ? 0 : 0x80
        if length < 126 {
            header.append(maskBit | UInt8(length))
        } else if length <= 0xFFFF {
            header += [maskBit | 126, UInt8(length >> 8), UInt8(length & 0xFF)]
        } else {
            header.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { header.append(UInt8(truncatingIfNeeded: UInt64(length) >> UInt64(shift))) }
        }
        if let key = maskingKey { header += [key.0, key.1, key.2, key.3] }
        return header
    }

    /// Runs `body` with an unmasked frame header built on the stack (no allocation).
    @inline(__always)
    public static func withHeader<R>(fin: Bool = true, opcode: WebSocketOpcode, length: Int,
                                     _ body: (UnsafeRawBufferPointer) -> R) -> R {
        var bytes: (UInt64, UInt16) = (0, 0)
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[0] = (fin ? 0x80 : 0) | opcode.rawValue
            var count = 2
            if length < 126 {
                raw[1] = UInt8(length)
            } else if length <= 0xFFFF {
                raw[1] = 126
                raw[2] = UInt8(length >> 8)
                raw[3] = UInt8(length & 0xFF)
                count = 4
            } else {
                raw[1] = 127
                for i in 0..<8 { raw[2 + i] = UInt8(truncatingIfNeeded: UInt64(length) >> UInt64(56 - 8 * i)) }
                count = 10
            }
            return body(UnsafeRawBufferPointer(rebasing: raw[..<count]))
        }
    }

    /// A whole frame. With a masking key the payload is masked.
    public static func encode(_ frame: WebSocketFrame, maskingKey: (UInt8, UInt8, UInt8, UInt8)? = nil) -> [UInt8] {
        var payload = frame.payload
        if let key = maskingKey { WebSocketMask.apply(key, to: &payload) }
        return header(fin: frame.fin, opcode: frame.opcode, length: payload.count, maskingKey: maskingKey) + payload
    }

    /// A close frame payload: the code (big-endian) and a UTF-8 reason, cut to fit 125 bytes
    /// on a character boundary.
    public static func closePayload(code: UInt16, reason: String) -> [UInt8] {
        var reasonBytes = Array(reason.utf8)
        if reasonBytes.count > 123 {
            var cut = 123
            // Do not split a multi-byte character.
            while cut > 0, reasonBytes[cut] & 0xC0 == 0x80 { cut -= 1 }
            reasonBytes = Array(reasonBytes[..<cut])
        }
        return [UInt8(code >> 8), UInt8(code & 0xFF)] + reasonBytes
    }
}

import TetherSync
/// Parses WebSocket frames from a byte stream (RFC 6455 §5.2), with no I/O.
///
/// Enforced here, per frame: the mask rule of the role (a server requires masked frames, a
/// client refuses them), reserved bits clear (no extension is ever negotiated), known opcodes,
/// control frames unfragmented and ≤ 125 bytes, the minimal length encoding's top bit clear, and
/// the per-frame payload cap (→ 1009) — checked from the header, before the payload is buffered.
public struct WebSocketFrameParser: Sendable {
    public enum Role: Sendable {
        /// Receives client frames: they must be masked.
        case server
        /// Receives server frames: they must not be masked.
        case client
    }

    /// Largest payload accepted in one frame.
    public var maxFramePayload: Int
    private var buffer: [UInt8] = []
    private var index = 0
    public let role: Role
    private var failureStorage = OutOfLine<WebSocketProtocolError>()
    private var failure: WebSocketProtocolError? {
        get { failureStorage.value }
        set { failureStorage.value = newValue }
    }

    public init(role: Role, maxFramePayload: Int) {
        self.role = role
        self.maxFramePayload = maxFramePayload
    }

    public var bufferedByteCount: Int { buffer.count - index }

    public mutating func feed(_ bytes: some Collection<UInt8>) {
        if index == buffer.count {
            buffer = []
            index = 0
        } else if index > 64 * 1024, index > buffer.count / 2 {
            buffer.removeSubrange(..<index)
            index = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete frame from what was fed, or nil if more bytes are needed.
    public mutating func nextFrame() throws(WebSocketProtocolError) -> WebSocketFrame? {
        if !failureStorage.isEmpty, let failure { throw failure }
        let parsed: Result<(WebSocketFrame, Int)?, WebSocketProtocolError> = buffer.withUnsafeBytes { raw in
            Result { () throws(WebSocketProtocolError) in try parse(UnsafeRawBufferPointer(rebasing: raw[index...])) }
        }
        do throws(WebSocketProtocolError) {
            guard let (frame, consumed) = try parsed.get() else { return nil }
            index += consumed
            if index == buffer.count {
                // Drained: drop the storage, so an idle connection holds no buffer.
                buffer = []
                index = 0
            }
            return frame
        } catch {
            poison(error)
            throw error
        }
    }

    /// Parses every complete frame in `bytes`, handing each to `body`, without copying them
    /// first. A large frame that is still arriving is unmasked straight into its final payload
    /// array as its bytes come in (one copy in all, however many reads it spans); only a few
    /// bytes of a split header, or a small partial frame, are kept in the buffer.
    /// `body` returns false to stop early; the rest of `bytes` is then kept for later.
    public mutating func consume(_ bytes: UnsafeRawBufferPointer,
                                 _ body: (WebSocketFrame) -> Bool) throws(WebSocketProtocolError) {
        if !failureStorage.isEmpty, let failure { throw failure }
        var input = bytes
        if !pendingStorage.isEmpty {
            let used = fillPending(input)
            input = UnsafeRawBufferPointer(rebasing: input[used...])
            guard let frame = takeCompletedPending() else { return }
            if !body(frame) {
                if input.count > 0 { feed(input) }
                return
            }
        }
        if bufferedByteCount > 0 {
            feed(input)
            while let frame = try nextFrame() {
                if !body(frame) { return }
            }
            try streamBufferedRemainder()
            return
        }
        var offset = 0
        do throws(WebSocketProtocolError) {
            while offset < input.count {
                let rest = UnsafeRawBufferPointer(rebasing: input[offset...])
                guard let (frame, consumed) = try parse(rest) else {
                    if try startPending(rest) { return }
                    break
                }
                offset += consumed
                if !body(frame) { break }
            }
        } catch {
            poison(error)
            throw error
        }
        if offset < input.count { feed(UnsafeRawBufferPointer(rebasing: input[offset...])) }
    }

    /// Frames at least this large are streamed into their payload array rather than buffered.
    static let streamingThreshold = 4096

    private struct PendingFrame {
        let fin: Bool
        let opcode: WebSocketOpcode
        let key: UInt32?
        var payload: [UInt8]
        var filled: Int
    }

    /// Out of line: only a connection receiving a large frame pays for it.
    private var pendingStorage = OutOfLine<PendingFrame>()
    private var pending: PendingFrame? {
        get { pendingStorage.value }
        set { pendingStorage.value = newValue }
    }

    /// If `bytes` starts with a complete header of a large frame whose payload is incomplete,
    /// starts streaming it (copying what is there) and returns true.
    private mutating func startPending(_ bytes: UnsafeRawBufferPointer) throws(WebSocketProtocolError) -> Bool {
        guard let header = try parseHeader(bytes), header.payloadLength >= Self.streamingThreshold else { return false }
        pending = PendingFrame(fin: header.fin, opcode: header.opcode, key: header.key,
                               payload: Self.unfilledPayload(header.payloadLength), filled: 0)
        _ = fillPending(UnsafeRawBufferPointer(rebasing: bytes[header.headerLength...]))
        return true
    }

    /// A payload array of `count` bytes that `fill` writes front to back before anything reads
    /// it (`filled` says how far): no zeroing pass over a frame that is about to be overwritten
    /// (otherwise every large frame costs an extra pass over its whole size).
    private static func unfilledPayload(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { _, initialized in initialized = count }
    }

    /// After the buffered path: a large partial frame left in the buffer moves to streaming.
    private mutating func streamBufferedRemainder() throws(WebSocketProtocolError) {
        guard bufferedByteCount > 0 else { return }
        let started: Result<Bool, WebSocketProtocolError> = buffer.withUnsafeBytes { raw in
            let rest = UnsafeRawBufferPointer(rebasing: raw[index...])
            guard let header = try? parseHeader(rest), header.payloadLength >= Self.streamingThreshold else { return .success(false) }
            var frame = PendingFrame(fin: header.fin, opcode: header.opcode, key: header.key,
                                     payload: Self.unfilledPayload(header.payloadLength), filled: 0)
            Self.fill(&frame, from: UnsafeRawBufferPointer(rebasing: rest[header.headerLength...]))
            pending = frame
            return .success(true)
        }
        if try started.get() {
            buffer = []
            index = 0
        }
    }

    /// Copies (and unmasks) as much of `bytes` as the pending payload still needs; returns the count used.
    private mutating func fillPending(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard var frame = pending else { return 0 }
        pending = nil   // keep the payload array uniquely referenced while it is written
        let used = Self.fill(&frame, from: bytes)
        pending = frame
        return used
    }

    @discardableResult
    private static func fill(_ frame: inout PendingFrame, from bytes: UnsafeRawBufferPointer) -> Int {
        let count = min(frame.payload.count - frame.filled, bytes.count)
        guard count > 0 else { return 0 }
        let start = frame.filled
        frame.payload.withUnsafeMutableBytes { out in
            let destination = UnsafeMutableRawBufferPointer(rebasing: out[start..<(start + count)])
            let source = UnsafeRawBufferPointer(rebasing: bytes[..<count])
            if let key = frame.key {
                // The mask continues where it left off: rotate the key by the bytes already done.
                let shift = UInt32((start & 3) * 8)
                let rotated = shift == 0 ? key : (key >> shift) | (key << (32 - shift))
                WebSocketMask.copy(source, into: destination, key: rotated)
            } else {
                destination.copyMemory(from: source)
            }
        }
        frame.filled += count
        return count
    }

    private mutating func takeCompletedPending() -> WebSocketFrame? {
        guard let frame = pending, frame.filled == frame.payload.count else { return nil }
        pending = nil
        return WebSocketFrame(fin: frame.fin, opcode: frame.opcode, payload: frame.payload)
    }

    private mutating func poison(_ error: WebSocketProtocolError) {
        failure = error
        buffer = []
        index = 0
        pending = nil
    }

    private struct Header {
        let fin: Bool
        let opcode: WebSocketOpcode
        /// The masking key as it sits in the frame (read as a native UInt32).
        let key: UInt32?
        let headerLength: Int
        let payloadLength: Int
    }

    /// A frame header from the start of `bytes`, validated; nil if incomplete.
    private func parseHeader(_ bytes: UnsafeRawBufferPointer) throws(WebSocketProtocolError) -> Header? {
        let available = bytes.count
        guard available >= 2 else { return nil }
        let b0 = bytes[0], b1 = bytes[1]
        guard b0 & 0x70 == 0 else { throw .protocolError("reserved bits set") }
        guard let opcode = WebSocketOpcode(rawValue: b0 & 0x0F) else { throw .protocolError("reserved opcode") }
        let fin = b0 & 0x80 != 0
        let masked = b1 & 0x80 != 0
        switch role {
        case .server: guard masked else { throw .protocolError("unmasked client frame") }
        case .client: guard !masked else { throw .protocolError("masked server frame") }
        }
        var length = Int(b1 & 0x7F)
        var headerLength = 2
        if opcode.isControl {
            guard fin else { throw .protocolError("fragmented control frame") }
            guard length <= 125 else { throw .protocolError("control frame too long") }
        }
        if length == 126 {
            guard available >= 4 else { return nil }
            length = Int(bytes[2]) << 8 | Int(bytes[3])
            headerLength = 4
        } else if length == 127 {
            guard available >= 10 else { return nil }
            guard bytes[2] & 0x80 == 0 else { throw .protocolError("64-bit length with the top bit set") }
            var value: UInt64 = 0
            for i in 2..<10 { value = value << 8 | UInt64(bytes[i]) }
            guard value <= UInt64(Int.max) else { throw .tooBig }
            length = Int(value)
            headerLength = 10
        }
        guard length <= maxFramePayload else { throw .tooBig }
        var key: UInt32?
        if masked {
            guard available >= headerLength + 4 else { return nil }
            key = bytes.loadUnaligned(fromByteOffset: headerLength, as: UInt32.self)
            headerLength += 4
        }
        return Header(fin: fin, opcode: opcode, key: key, headerLength: headerLength, payloadLength: length)
    }

    /// One frame from the start of `bytes` and how many bytes it used, or nil if incomplete.
    private func parse(_ bytes: UnsafeRawBufferPointer) throws(WebSocketProtocolError) -> (WebSocketFrame, Int)? {
        guard let header = try parseHeader(bytes), bytes.count >= header.headerLength + header.payloadLength else { return nil }
        let length = header.payloadLength
        // The one copy of the payload: straight from the read into the frame's own array,
        // unmasked on the way.
        let source = UnsafeRawBufferPointer(rebasing: bytes[header.headerLength..<(header.headerLength + length)])
        let payload: [UInt8]
        if let key = header.key {
            payload = [UInt8](unsafeUninitializedCapacity: length) { out, count in
                WebSocketMask.copy(source, into: UnsafeMutableRawBufferPointer(out), key: key)
                count = length
            }
        } else {
            payload = [UInt8](source)
        }
        return (WebSocketFrame(fin: header.fin, opcode: header.opcode, payload: payload), header.headerLength + length)
    }
}

/// XOR masking (RFC 6455 §5.3); applying it twice restores the payload.
public enum WebSocketMask {
    /// Copies `source` into `destination` (same length), XORing with the 4-byte key as it goes
    /// (the key as it sits in the frame, read as a native UInt32). 32 bytes per step.
    @inline(__always)
    public static func copy(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer, key: UInt32) {
        let count = source.count
        let wide = UInt64(key) | UInt64(key) << 32
        guard let from = source.baseAddress, let to = destination.baseAddress else { return }
        var i = 0
        while i + 32 <= count {
            to.storeBytes(of: from.loadUnaligned(fromByteOffset: i, as: UInt64.self) ^ wide, toByteOffset: i, as: UInt64.self)
            to.storeBytes(of: from.loadUnaligned(fromByteOffset: i + 8, as: UInt64.self) ^ wide, toByteOffset: i + 8, as: UInt64.self)
            to.storeBytes(of: from.loadUnaligned(fromByteOffset: i + 16, as: UInt64.self) ^ wide, toByteOffset: i + 16, as: UInt64.self)
            to.storeBytes(of: from.loadUnaligned(fromByteOffset: i + 24, as: UInt64.self) ^ wide, toByteOffset: i + 24, as: UInt64.self)
            i += 32
        }
        while i + 8 <= count {
            to.storeBytes(of: from.loadUnaligned(fromByteOffset: i, as: UInt64.self) ^ wide, toByteOffset: i, as: UInt64.self)
            i += 8
        }
        var keyBytes = key
        withUnsafeBytes(of: &keyBytes) { k in
            while i < count {
                to.storeBytes(of: from.load(fromByteOffset: i, as: UInt8.self) ^ k[i & 3], toByteOffset: i, as: UInt8.self)
                i += 1
            }
        }
    }

    public static func apply(_ key: (UInt8, UInt8, UInt8, UInt8), to payload: inout [UInt8]) {
        let word = UInt32(key.0) | UInt32(key.1) << 8 | UInt32(key.2) << 16 | UInt32(key.3) << 24
        payload.withUnsafeMutableBytes { bytes in
            let count = bytes.count
            var i = 0
            // Eight bytes at a time, then the tail.
            let wide = UInt64(word) | UInt64(word) << 32
            while i + 8 <= count {
                let v = bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                bytes.storeBytes(of: v ^ wide, toByteOffset: i, as: UInt64.self)
                i += 8
            }
            let keyBytes = [key.0, key.1, key.2, key.3]
            while i < count {
                bytes[i] ^= keyBytes[i & 3]
                i += 1
            }
        }
    }
}

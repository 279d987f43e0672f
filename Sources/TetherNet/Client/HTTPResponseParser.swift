/// Parses one HTTP/1.1 response (status line, headers, and a body delimited by
/// Content-Length, chunked coding, or the connection closing). Strict like the request parser.
public struct HTTPResponseParser: Sendable {
    public struct Head: Sendable, Equatable {
        public let status: Int
        public let headers: HTTPHeaders
    }

    public let maxHeadBytes: Int
    public let maxBodyBytes: Int
    private var buffer: [UInt8] = []
    public private(set) var head: Head?
    /// Set when the response to a HEAD request or an upgrade has no body to read.
    public var expectsBody = true

    public init(maxHeadBytes: Int = 16 * 1024, maxBodyBytes: Int = 16 * 1024 * 1024) {
        self.maxHeadBytes = maxHeadBytes
        self.maxBodyBytes = maxBodyBytes
    }

    public mutating func feed(_ bytes: some Collection<UInt8>) { buffer.append(contentsOf: bytes) }

    /// The head once complete; `remaining` gives the bytes after it. At most `maxHeadBytes`
    /// before its final CRLFCRLF, however the bytes arrive: a head that came in one read is
    /// held to the limit too, and one still waiting for the last bytes of its CRLFCRLF is not
    /// refused early.
    public mutating func parseHead() throws(HTTPParseError) -> Head? {
        if let head { return head }
        guard let end = Self.find(Array("\r\n\r\n".utf8), in: buffer) else {
            if buffer.count > maxHeadBytes + 3 { throw .headersTooLarge("response head too large") }
            return nil
        }
        guard end <= maxHeadBytes else { throw .headersTooLarge("response head too large") }
        let lines = Self.split(buffer[..<end])
        buffer.removeSubrange(..<(end + 4))
        guard let statusLine = lines.first else { throw .badRequest("empty response") }
        let parts = statusLine.split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, Array(parts[0]) == Array("HTTP/1.1".utf8) || Array(parts[0]) == Array("HTTP/1.0".utf8),
              parts[1].count == 3, parts[1].allSatisfy(HTTPRequestParser.isDigit),
              let status = Int(String(decoding: parts[1], as: UTF8.self)) else { throw .badRequest("bad status line") }
        var headers = HTTPHeaders()
        for line in lines.dropFirst() {
            let (name, value) = try HTTPRequestParser.field(line)
            headers.add(name, value)
        }
        let parsed = Head(status: status, headers: headers)
        head = parsed
        return parsed
    }

    /// Bytes received after the head (for an upgraded connection).
    public mutating func takeRemaining() -> [UInt8] {
        defer { buffer = [] }
        return buffer
    }

    /// The complete body, or nil if more bytes are needed. `closed` says the peer has closed.
    public mutating func body(closed: Bool) throws(HTTPParseError) -> [UInt8]? {
        guard let head else { return nil }
        if !expectsBody || head.status == 204 || head.status == 304 || (100..<200).contains(head.status) { return [] }
        let lengths = head.headers.values("Content-Length")
        if HTTPHeaders.same(head.headers["Transfer-Encoding"]?.trimmingASCIIWhitespace() ?? "", "chunked") {
            return try dechunk()
        }
        if let text = lengths.first {
            guard lengths.count == 1, let length = Int(text), length >= 0 else { throw .badRequest("bad Content-Length") }
            guard length <= maxBodyBytes else { throw .payloadTooLarge }
            if buffer.count >= length { return Array(buffer.prefix(length)) }
            if closed { throw .badRequest("truncated body") }
            return nil
        }
        guard buffer.count <= maxBodyBytes else { throw .payloadTooLarge }
        return closed ? buffer : nil
    }

    /// How far chunked decoding got: each call decodes only the chunks that arrived since the
    /// last (decoding the whole buffer on every read was quadratic in the body's size).
    private var decoded: [UInt8] = []
    private var nextChunk = 0

    /// The request parser's bounds apply: a size line (extensions included) of at most 1 KiB,
    /// trailers of at most `maxHeadBytes`, and a chunk refused once its declared size would pass
    /// `maxBodyBytes`, before its data is buffered; otherwise a server could make the client buffer
    /// without end.
    private mutating func dechunk() throws(HTTPParseError) -> [UInt8]? {
        while true {
            let line = buffer[nextChunk...].prefix(1026)
            guard let lineEnd = Self.find([0x0d, 0x0a], in: line) else {
                if line.count > 1025 { throw .badRequest("chunk size line too long") }
                return nil
            }
            // Pure hex, at most 15 digits as the request parser reads it: no sign, and the size
            // plus an offset cannot overflow (`7fffffffffffffff` trapped).
            let digits = buffer[nextChunk..<lineEnd].prefix { $0 != UInt8(ascii: ";") }
            guard !digits.isEmpty, digits.count <= 15, digits.allSatisfy(Self.isHexDigit),
                  let size = Int(String(decoding: digits, as: UTF8.self), radix: 16) else { throw .badRequest("bad chunk size") }
            let start = lineEnd + 2
            if size == 0 {
                // Trailers end with an empty line, and are held to `maxHeadBytes` before it as a
                // head is: however the bytes arrive (a split stream threw where a whole one passed).
                let trailers = buffer[start...]
                if trailers.starts(with: [0x0d, 0x0a]) { return decoded }
                if let end = Self.find(Array("\r\n\r\n".utf8), in: trailers) {
                    guard end - start <= maxHeadBytes else { throw .headersTooLarge("trailers too large") }
                    return decoded
                }
                if trailers.count > maxHeadBytes + 3 { throw .headersTooLarge("trailers too large") }
                return nil
            }
            guard decoded.count + size <= maxBodyBytes else { throw .payloadTooLarge }
            guard buffer.count >= start + size + 2 else { return nil }
            guard buffer[start + size] == 0x0d, buffer[start + size + 1] == 0x0a else { throw .badRequest("chunk not followed by CRLF") }
            decoded += buffer[start..<(start + size)]
            nextChunk = start + size + 2
        }
    }

    static func isHexDigit(_ c: UInt8) -> Bool {
        (0x30...0x39).contains(c) || (0x41...0x46).contains(c) || (0x61...0x66).contains(c)
    }

    static func find(_ needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var i = haystack.startIndex
        while i + needle.count <= haystack.endIndex {
            if haystack[i] == needle[0], haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? { find(needle, in: haystack[...]) }

    static func split(_ head: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var start = head.startIndex
        var i = head.startIndex
        while i + 1 < head.endIndex {
            if head[i] == 0x0d, head[i + 1] == 0x0a {
                lines.append(head[start..<i])
                start = i + 2
                i += 2
            } else {
                i += 1
            }
        }
        lines.append(head[start..<head.endIndex])
        return lines
    }
}

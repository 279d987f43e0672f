/// A strict, incremental HTTP/1.1 request parser (RFC 9112), with no I/O.
///
/// Feed bytes as they arrive and call `next()` until it returns nil. Each request yields
/// `.head` and then exactly one `.body` (possibly empty) with the whole decoded body. Between
/// the two the caller may set `bodyLimit` for the route; a declared length above it fails with
/// 413 at once, before any body byte is read.
///
/// Anything ambiguous fails closed: obs-folding, bare LF, whitespace before a colon, a
/// duplicate or malformed `Content-Length`, `Content-Length` together with
/// `Transfer-Encoding`, or a transfer coding other than `chunked`. After an error the parser
/// stays failed; the connection must be answered and closed.
public struct HTTPRequestParser: Sendable {
    public struct Limits: Sendable {
        /// Request line plus header section, CRLFs included (431 beyond).
        public var maxHeadBytes = 16 * 1024
        /// Header fields per request (431 beyond).
        public var maxHeaderCount = 100
        /// The body cap until the caller sets one for the route (413 beyond).
        public var defaultMaxBodyBytes = 64 * 1024
        public init() {}
    }

    public enum Event: Sendable, Equatable {
        case head(HTTPRequestHead)
        case body([UInt8])
    }

    private enum Framing: Sendable {
        case length(Int)
        case chunked
    }

    private enum State: Sendable {
        case head
        case bodyPending(Framing)
        case fixedBody(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers(bytes: Int)
        case failed(HTTPParseError)
    }

    public let limits: Limits
    /// The body cap for the current request.
    public var bodyLimit: Int
    private var state: State = .head
    private var buffer: [UInt8] = []
    private var index = 0
    private var body: [UInt8] = []

    public init(limits: Limits = Limits()) {
        self.limits = limits
        bodyLimit = limits.defaultMaxBodyBytes
    }

    /// Bytes received but not yet parsed.
    public var bufferedByteCount: Int { buffer.count - index }

    /// True when no request is partly parsed (a connection may close or go idle cleanly).
    public var isIdle: Bool {
        if case .head = state { return bufferedByteCount == 0 }
        return false
    }

    public mutating func feed(_ bytes: some Collection<UInt8>) {
        if index > 0, index == buffer.count {
            buffer.removeAll(keepingCapacity: false)
            index = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Everything received after the current request's head (for a protocol upgrade).
    public mutating func takeUnparsed() -> [UInt8] {
        defer {
            buffer = []
            index = 0
        }
        return Array(buffer[index...])
    }

    public mutating func next() throws(HTTPParseError) -> Event? {
        do throws(HTTPParseError) {
            return try step()
        } catch {
            state = .failed(error)
            throw error
        }
    }

    private mutating func step() throws(HTTPParseError) -> Event? {
        while true {
            switch state {
            case let .failed(error):
                throw error
            case .head:
                guard let head = try parseHead() else { return nil }
                body = []
                bodyLimit = limits.defaultMaxBodyBytes
                state = .bodyPending(try framing(of: head))
                return .head(head)
            case let .bodyPending(framing):
                switch framing {
                case let .length(length):
                    guard length <= bodyLimit else { throw .payloadTooLarge }
                    state = .fixedBody(remaining: length)
                case .chunked:
                    state = .chunkSize
                }
            case let .fixedBody(remaining):
                if remaining == 0 { return finishBody() }
                let take = min(remaining, bufferedByteCount)
                guard take > 0 else { return nil }
                body += buffer[index..<(index + take)]
                index += take
                state = .fixedBody(remaining: remaining - take)
            case .chunkSize:
                guard let line = try takeLine(limit: 1024) else { return nil }
                let size = try chunkSize(line)
                if size == 0 {
                    state = .trailers(bytes: 0)
                } else {
                    guard body.count + size <= bodyLimit else { throw .payloadTooLarge }
                    state = .chunkData(remaining: size)
                }
            case let .chunkData(remaining):
                let take = min(remaining, bufferedByteCount)
                guard take > 0 else { return nil }
                body += buffer[index..<(index + take)]
                index += take
                state = remaining - take == 0 ? .chunkDataEnd : .chunkData(remaining: remaining - take)
            case .chunkDataEnd:
                guard bufferedByteCount >= 2 else { return nil }
                guard buffer[index] == 0x0d, buffer[index + 1] == 0x0a else { throw .badRequest("chunk not followed by CRLF") }
                index += 2
                state = .chunkSize
            case let .trailers(bytes):
                guard let line = try takeLine(limit: limits.maxHeadBytes - bytes) else {
                    if bufferedByteCount > limits.maxHeadBytes - bytes { throw .headersTooLarge("trailers too large") }
                    return nil
                }
                if line.isEmpty { return finishBody() }
                // Trailer fields are read and discarded; they must still be well-formed.
                _ = try Self.field(line)
                state = .trailers(bytes: bytes + line.count + 2)
            }
        }
    }

    private mutating func finishBody() -> Event {
        state = .head
        let complete = body
        body = []
        if index == buffer.count {
            // Nothing pipelined behind: an idle kept-alive connection holds no buffer.
            buffer = []
            index = 0
        }
        return .body(complete)
    }

    /// One CRLF-terminated line without its CRLF, or nil if incomplete.
    private mutating func takeLine(limit: Int) throws(HTTPParseError) -> ArraySlice<UInt8>? {
        var i = index
        while i < buffer.count {
            if buffer[i] == 0x0a {
                guard i > index, buffer[i - 1] == 0x0d else { throw .badRequest("bare LF") }
                let line = buffer[index..<(i - 1)]
                index = i + 1
                return line
            }
            i += 1
            if i - index > limit { throw .badRequest("line too long") }
        }
        return nil
    }

    private func chunkSize(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> Int {
        // chunk-size [ ; chunk-ext ]: the extension is ignored but the size must be pure hex.
        let sizePart = line.prefix { $0 != UInt8(ascii: ";") }
        guard !sizePart.isEmpty, sizePart.count <= 15 else { throw .badRequest("bad chunk size") }
        var size = 0
        for c in sizePart {
            guard let digit = hexValue(c) else { throw .badRequest("bad chunk size") }
            size = size << 4 | digit
        }
        return size
    }

    // MARK: Head

    private mutating func parseHead() throws(HTTPParseError) -> HTTPRequestHead? {
        // RFC 9112 §2.2: empty lines before a request line are ignored (after a pipelined body).
        while bufferedByteCount >= 2, buffer[index] == 0x0d, buffer[index + 1] == 0x0a { index += 2 }
        guard let end = try headEnd() else {
            // Up to three bytes of the final CRLFCRLF may follow a head of the full size, so the
            // answer does not depend on where the reads happened to split it.
            if bufferedByteCount > limits.maxHeadBytes + 3 { throw .headersTooLarge("request head too large") }
            return nil
        }
        guard end - index <= limits.maxHeadBytes else { throw .headersTooLarge("request head too large") }
        let head = buffer[index..<end]
        index = end + 4
        // The lines are walked twice in place (counted, then parsed) rather than collected: a
        // head is parsed on every admission, and each array grown here was a handful of
        // allocations per connection.
        var fieldCount = 0
        for i in head.indices where head[i] == 0x0a {
            guard i > head.startIndex, head[i - 1] == 0x0d else { throw .badRequest("bare LF") }
            fieldCount += 1
        }
        guard fieldCount <= limits.maxHeaderCount else { throw .headersTooLarge("too many header fields") }
        // A line ends before its CRLF, or at the head's end (the final CRLFCRLF is not in it).
        func content(upTo lineEnd: Int) -> ArraySlice<UInt8> { lineEnd == head.endIndex ? head[..<lineEnd] : head[..<(lineEnd - 1)] }
        var lineEnd = head.firstIndex(of: 0x0a) ?? head.endIndex
        var request = try Self.requestLine(content(upTo: lineEnd))
        request.headers.reserveCapacity(fieldCount)
        while lineEnd < head.endIndex {
            let start = lineEnd + 1
            lineEnd = head[start...].firstIndex(of: 0x0a) ?? head.endIndex
            let (name, value) = try Self.field(content(upTo: lineEnd)[start...])
            request.headers.add(name, value)
        }
        if request.version == .http11, request.headers.only("Host") == nil {
            throw .badRequest("HTTP/1.1 requires exactly one Host")
        }
        return request
    }

    /// The offset of CRLFCRLF from `index`, if present. A bare LF is refused as soon as it
    /// arrives: a head written with LF line ends never has the CRLFCRLF that ends it, and waiting
    /// for one would hold the connection until the head timeout (RFC 9112 §2.2 lets a recipient
    /// refuse bare LF).
    private func headEnd() throws(HTTPParseError) -> Int? {
        var i = index
        while i < buffer.count {
            if buffer[i] == 0x0a {
                guard i > index, buffer[i - 1] == 0x0d else { throw .badRequest("bare LF") }
                if i - 3 >= index, buffer[i - 2] == 0x0a, buffer[i - 3] == 0x0d { return i - 3 }
            }
            i += 1
        }
        return nil
    }

    private static func requestLine(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> HTTPRequestHead {
        // method SP request-target SP HTTP-version, exactly two spaces (found in place).
        guard let firstSpace = line.firstIndex(of: 0x20),
              let secondSpace = line[(firstSpace + 1)...].firstIndex(of: 0x20),
              !line[(secondSpace + 1)...].contains(0x20) else { throw .badRequest("malformed request line") }
        let method = line[..<firstSpace], target = line[(firstSpace + 1)..<secondSpace], versionText = line[(secondSpace + 1)...]
        guard !method.isEmpty, !target.isEmpty else { throw .badRequest("malformed request line") }
        guard method.allSatisfy(isTokenCharacter) else { throw .badRequest("bad method") }
        // Visible ASCII only: no spaces, controls or raw UTF-8 in the target.
        guard target.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { throw .badRequest("bad request target") }
        let version: HTTPVersion
        if versionText.elementsEqual("HTTP/1.1".utf8) {
            version = .http11
        } else if versionText.elementsEqual("HTTP/1.0".utf8) {
            version = .http10
        } else {
            let v = versionText
            if v.count == 8, v.starts(with: "HTTP/".utf8), v[v.startIndex + 6] == UInt8(ascii: "."),
               isDigit(v[v.startIndex + 5]), isDigit(v[v.startIndex + 7]) {
                throw .unsupportedVersion
            }
            throw .badRequest("bad HTTP version")
        }
        return HTTPRequestHead(method: String(decoding: method, as: UTF8.self), target: String(decoding: target, as: UTF8.self),
                               version: version)
    }

    /// `name ":" OWS value OWS`; no whitespace before the colon, no folding, no controls.
    static func field(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> (String, String) {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
            if let first = line.first, first == 0x20 || first == 0x09 { throw .badRequest("obsolete line folding") }
            throw .badRequest("header line without colon")
        }
        let name = line[line.startIndex..<colon]
        guard !name.isEmpty, name.allSatisfy(isTokenCharacter) else { throw .badRequest("bad header name") }
        var value = line[(colon + 1)...]
        while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
        guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7f) }) else { throw .badRequest("control character in header value") }
        return (String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
    }

    private func framing(of head: HTTPRequestHead) throws(HTTPParseError) -> Framing {
        let lengths = head.headers.values("Content-Length")
        let codings = head.headers.values("Transfer-Encoding")
        if !codings.isEmpty {
            guard lengths.isEmpty else { throw .badRequest("both Content-Length and Transfer-Encoding") }
            guard head.version == .http11 else { throw .badRequest("Transfer-Encoding in HTTP/1.0") }
            guard codings.count == 1, HTTPHeaders.same(codings[0].trimmingASCIIWhitespace(), "chunked") else {
                throw .notImplemented("unsupported transfer coding")
            }
            return .chunked
        }
        guard !lengths.isEmpty else { return .length(0) }
        guard lengths.count == 1 else { throw .badRequest("duplicate Content-Length") }
        let digits = Array(lengths[0].utf8)
        guard !digits.isEmpty, digits.count <= 15, digits.allSatisfy(Self.isDigit) else { throw .badRequest("bad Content-Length") }
        return .length(Int(lengths[0])!)
    }

    // MARK: Character classes

    static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

    /// RFC 9110 tchar.
    static func isTokenCharacter(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"): true
        default: false
        }
    }
}

private func hexValue(_ c: UInt8) -> Int? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(c - UInt8(ascii: "0"))
    case UInt8(ascii: "a")...UInt8(ascii: "f"): Int(c - UInt8(ascii: "a") + 10)
    case UInt8(ascii: "A")...UInt8(ascii: "F"): Int(c - UInt8(ascii: "A") + 10)
    default: nil
    }
}

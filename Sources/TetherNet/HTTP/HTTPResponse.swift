/// An HTTP/1.1 response to serialise. `Content-Length` is always set from the body.
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A plain-text response (no trailing newline, as relay.md wants).
    public static func text(_ status: Int, _ text: String, contentType: String = "text/plain") -> HTTPResponse {
        HTTPResponse(status: status, headers: HTTPHeaders([("Content-Type", contentType)]), body: Array(text.utf8))
    }

    /// A JSON response from already-encoded bytes.
    public static func json(_ status: Int, _ body: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: status, headers: HTTPHeaders([("Content-Type", "application/json")]), body: body)
    }

    /// The wire bytes. `includeBody` is false for answers to HEAD. Written straight into one
    /// array sized up front: every admission sends one (the 101), and text appended piecewise
    /// grew a string and then copied it.
    public func serialized(closing: Bool = false, includeBody: Bool = true) -> [UInt8] {
        let reason = Self.reasonPhrase(status)
        let hasLength = status >= 200 && status != 204 && status != 304
        // Content-Length is always computed; a closing response says so in its own Connection field.
        func kept(_ name: String) -> Bool { !HTTPHeaders.same(name, "Content-Length") && !(closing && HTTPHeaders.same(name, "Connection")) }
        var size = 9 + 20 + 1 + reason.utf8.count + 2 + 2 + (hasLength ? 16 + 20 + 2 : 0) + (closing ? 19 : 0)
        for field in headers where kept(field.name) { size += field.name.utf8.count + 2 + field.value.utf8.count + 2 }
        if includeBody { size += body.count }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size)
        bytes.append(contentsOf: "HTTP/1.1 ".utf8)
        Self.appendDecimal(status, to: &bytes)
        bytes.append(0x20)
        bytes.append(contentsOf: reason.utf8)
        bytes.append(contentsOf: [0x0d, 0x0a])
        for field in headers where kept(field.name) {
            bytes.append(contentsOf: field.name.utf8)
            bytes.append(contentsOf: ": ".utf8)
            bytes.append(contentsOf: field.value.utf8)
            bytes.append(contentsOf: [0x0d, 0x0a])
        }
        if hasLength {
            bytes.append(contentsOf: "Content-Length: ".utf8)
            Self.appendDecimal(body.count, to: &bytes)
            bytes.append(contentsOf: [0x0d, 0x0a])
        }
        if closing { bytes.append(contentsOf: "Connection: close\r\n".utf8) }
        bytes.append(contentsOf: [0x0d, 0x0a])
        if includeBody { bytes.append(contentsOf: body) }
        return bytes
    }

    private static func appendDecimal(_ value: Int, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude, divisor: UInt = 1
        while magnitude / divisor >= 10 { divisor *= 10 }
        repeat {
            bytes.append(UInt8(ascii: "0") + UInt8(magnitude / divisor))
            magnitude %= divisor
            divisor /= 10
        } while divisor > 0
    }

    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 101: "Switching Protocols"
        case 200: "OK"
        case 204: "No Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 411: "Length Required"
        case 413: "Payload Too Large"
        case 414: "URI Too Long"
        case 421: "Misdirected Request"
        case 426: "Upgrade Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status \(status)"
        }
    }
}

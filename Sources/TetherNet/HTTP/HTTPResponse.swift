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

    /// The wire bytes. `includeBody` is false for answers to HEAD.
    public func serialized(closing: Bool = false, includeBody: Bool = true) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(Self.reasonPhrase(status))\r\n"
        // Content-Length is always computed; a closing response says so in its own Connection field.
        for field in headers where !HTTPHeaders.same(field.name, "Content-Length") && !(closing && HTTPHeaders.same(field.name, "Connection")) {
            head += "\(field.name): \(field.value)\r\n"
        }
        if status >= 200, status != 204, status != 304 { head += "Content-Length: \(body.count)\r\n" }
        if closing { head += "Connection: close\r\n" }
        head += "\r\n"
        return Array(head.utf8) + (includeBody ? body : [])
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
